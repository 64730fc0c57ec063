// CUDA glue of grouped_linear's products: one cuBLAS grouped GEMM (cublas*GroupedBatched)
// per product, every group a problem of its own size, issued on the current stream. The
// operands are row-major, cuBLAS reads column-major: a row-major [r, c] matrix is the
// column-major [c, r] one, so out = a op(b) is issued as out^T = op(b)^T a^T with b first.
// The matrices' addresses go to the device as one small array, written in stream order
// through kernel parameters (no host wait); sizes, leading dimensions and scales stay on the
// host, as cuBLAS takes them.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "strata/tensor/cuda.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/small_table.h"

namespace strata::cuda_ops {
namespace {

// A cuBLAS handle per device with the mutex that keeps its stream setting and the call that
// uses it together (threads share the handle). Kept for the process's life, as the
// cuBLASLt handles of matmul.cpp.
struct HandleSlot {
  std::mutex mutex;
  cublasHandle_t handle = nullptr;
};

HandleSlot& handle_of(int device, const char* name) {
  static std::mutex mutex;
  static auto* slots = new std::map<int, HandleSlot*>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = slots->find(device);
  if (it != slots->end()) return *it->second;
  auto* slot = new HandleSlot();
  const cublasStatus_t st = cublasCreate(&slot->handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    delete slot;
    STRATA_FAIL(name, ": cublasCreate failed on cuda:", device, ": ", cublasGetStatusString(st));
  }
  slots->emplace(device, slot);
  return *slot;
}

// The problems of one grouped call, column-major as cuBLAS sees them: C (m x n) = op(A) op(B).
struct Problems {
  std::vector<cublasOperation_t> trans_a, trans_b;
  std::vector<int64_t> m, n, k, lda, ldb, ldc, size;
  std::vector<int64_t> pointers;  // every A, then every B, then every C

  void add(bool ta, bool tb, int64_t m_, int64_t n_, int64_t k_, const void* a, int64_t lda_, const void* b,
           int64_t ldb_, void* c, int64_t ldc_) {
    trans_a.push_back(ta ? CUBLAS_OP_T : CUBLAS_OP_N);
    trans_b.push_back(tb ? CUBLAS_OP_T : CUBLAS_OP_N);
    m.push_back(m_), n.push_back(n_), k.push_back(k_);
    lda.push_back(lda_), ldb.push_back(ldb_), ldc.push_back(ldc_);
    size.push_back(1);
    a_.push_back(reinterpret_cast<intptr_t>(a));
    b_.push_back(reinterpret_cast<intptr_t>(b));
    c_.push_back(reinterpret_cast<intptr_t>(c));
  }
  void finish() {
    pointers.assign(a_.begin(), a_.end());
    pointers.insert(pointers.end(), b_.begin(), b_.end());
    pointers.insert(pointers.end(), c_.begin(), c_.end());
  }

 private:
  std::vector<int64_t> a_, b_, c_;
};

// Issues the problems in one call; false (nothing issued) where cuBLAS has no grouped kernel
// for the dtype or the problems.
bool issue(Problems& p, DType dtype, const Tensor& like, const char* name) {
  p.finish();
  const auto count = static_cast<int64_t>(p.size.size());
  const int device = like.device().index;
  cuda_detail::OpScope scope(like, name);
  // The addresses on the device: freed to the caching allocator after the call is queued,
  // reused only by work queued after it on the same stream.
  const Tensor pointers = empty({3 * count}, {.dtype = DType::Int64, .device = like.device()});
  auto* ptr = static_cast<int64_t*>(pointers.data_ptr());
  STRATA_LAUNCH(strata_write_small_table(ptr, p.pointers.data(), 3 * count, scope.stream));
  const auto* a = reinterpret_cast<const void* const*>(ptr);
  const auto* b = reinterpret_cast<const void* const*>(ptr + count);
  auto* const* c = reinterpret_cast<void* const*>(ptr + 2 * count);
  HandleSlot& slot = handle_of(device, name);
  std::lock_guard<std::mutex> lock(slot.mutex);
  cublasStatus_t st = cublasSetStream(slot.handle, scope.stream);
  if (st != CUBLAS_STATUS_SUCCESS) STRATA_FAIL(name, ": cublasSetStream failed: ", cublasGetStatusString(st));
  profiler::count_launch();
  if (dtype == DType::Float64) {
    const std::vector<double> one(p.size.size(), 1.0), zero(p.size.size(), 0.0);
    st = cublasDgemmGroupedBatched_64(slot.handle, p.trans_a.data(), p.trans_b.data(), p.m.data(), p.n.data(),
                                      p.k.data(), one.data(), reinterpret_cast<const double* const*>(a), p.lda.data(),
                                      reinterpret_cast<const double* const*>(b), p.ldb.data(), zero.data(),
                                      reinterpret_cast<double* const*>(c), p.ldc.data(), count, p.size.data());
  } else {
    const std::vector<float> one(p.size.size(), 1.0f), zero(p.size.size(), 0.0f);
    const cudaDataType_t type = dtype == DType::Float32    ? CUDA_R_32F
                                : dtype == DType::BFloat16 ? CUDA_R_16BF
                                                           : CUDA_R_16F;
    const cublasComputeType_t compute =
        dtype == DType::Float32 && cuda::allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    st = cublasGemmGroupedBatchedEx_64(slot.handle, p.trans_a.data(), p.trans_b.data(), p.m.data(), p.n.data(),
                                       p.k.data(), one.data(), a, type, p.lda.data(), b, type, p.ldb.data(),
                                       zero.data(), c, type, p.ldc.data(), count, p.size.data(), compute);
  }
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  if (st != CUBLAS_STATUS_SUCCESS)
    STRATA_FAIL(name, ": cuBLAS grouped GEMM of ", count, " groups (", dtype, ") failed on ", like.device(), ": ",
                cublasGetStatusString(st));
  return true;
}

bool grouped_dtype(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::BFloat16 || d == DType::Float16;
}

char* row(const Tensor& t, int64_t r) {
  return static_cast<char*>(t.data_ptr()) + r * t.size(1) * static_cast<int64_t>(dtype_size(t.dtype()));
}

}  // namespace

std::optional<Tensor> grouped_matmul(const Tensor& a, const std::vector<int64_t>& rows, const std::vector<Tensor>& b,
                                     bool transpose, const char* name) {
  if (!grouped_dtype(a.dtype()) || rows.empty()) return std::nullopt;
  const int64_t k = a.size(1), n = transpose ? b.front().size(0) : b.front().size(1);
  Tensor out = empty({a.size(0), n}, {.dtype = a.dtype(), .device = a.device()});
  Problems p;
  std::vector<Tensor> held;  // contiguous weights, alive until the call is queued
  int64_t first = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    if (b[g].dtype() != a.dtype()) return std::nullopt;
    held.push_back(b[g].contiguous());
    // out_g^T (n x m_g, ld n) = op(b_g)^T (n x k) a_g^T (k x m_g, ld k).
    p.add(transpose, false, n, rows[g], k, held.back().data_ptr(), transpose ? k : n, row(a, first), k, row(out, first),
          n);
    first += rows[g];
  }
  if (!issue(p, a.dtype(), a, name)) return std::nullopt;
  return out;
}

std::optional<std::vector<Tensor>> grouped_weight_grads(const Tensor& g, const Tensor& x,
                                                        const std::vector<int64_t>& rows, const char* name) {
  if (!grouped_dtype(g.dtype()) || x.dtype() != g.dtype() || rows.empty()) return std::nullopt;
  const int64_t n = g.size(1), k = x.size(1);
  std::vector<Tensor> out;
  Problems p;
  int64_t first = 0;
  for (int64_t r : rows) {
    out.push_back(empty({n, k}, {.dtype = g.dtype(), .device = g.device()}));
    // dW^T (k x n, ld k) = x_g^T (k x r, ld k) g_g (r x n: g_g^T's transpose, ld n).
    p.add(false, true, k, n, r, row(x, first), k, row(g, first), n, out.back().data_ptr(), k);
    first += r;
  }
  if (!issue(p, g.dtype(), g, name)) return std::nullopt;
  return out;
}

}  // namespace strata::cuda_ops
