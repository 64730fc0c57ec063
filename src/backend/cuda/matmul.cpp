// CUDA glue of matmul and linear: the shared GEMM plan (../gemm_plan.h), the same one the
// CPU runs, turned into cublasLtMatmul calls by ../gemm_cublas_layout.h and issued on the
// current stream. Compute types: float32 in float32 (TF32 only after
// cuda::set_allow_tf32(true)), float64 in float64, bfloat16/float16 inputs and outputs with
// float32 accumulation. Split-K reductions are limited to the compute type (none in place or
// in the output type): 16-bit partial sums would lose the float32 accumulation, and in-place
// schemes may add partials in a varying order.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/gemm_algo_cache.h"
#include "backend/gemm_cublas_layout.h"
#include "backend/gemm_plan.h"
#include "strata/tensor/cuda.h"
#include "strata/tensor/factory.h"

namespace strata::cuda_ops {
namespace {

// The most workspace an algorithm may ask for (NVIDIA suggests 32 MiB on Hopper, less on
// Ampere). Each call takes what its algorithm needs from the caching allocator.
constexpr uint64_t kMaxWorkspace = uint64_t{32} << 20;

// What a failure names: the public op and its operands.
struct What {
  const char* op;
  const Tensor& a;
  const Tensor& b;
};

[[noreturn]] void fail(const What& w, const char* call, cublasStatus_t status) {
  STRATA_FAIL(w.op, ": ", call, " failed on ", w.a.device(), " for a ", w.a.shape(), " (", w.a.dtype(), ") @ b ",
              w.b.shape(), " (", w.b.dtype(), "): ", cublasLtGetStatusString(status), " (",
              cublasLtGetStatusName(status), ")");
}

void check(const What& w, const char* call, cublasStatus_t status) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    fail(w, call, status);
}

struct Types {
  cudaDataType_t data;          // A, B, C, D and the bias
  cudaDataType_t scale;         // alpha and beta
  cublasComputeType_t compute;  // the accumulation
};

Types types_of(const What& w) {
  switch (w.a.dtype()) {
    case DType::Float32:
      return {CUDA_R_32F, CUDA_R_32F, cuda::allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::Float64: return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case DType::BFloat16: return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DType::Float16: return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    default: break;
  }
  STRATA_FAIL(w.op, ": a ", w.a.shape(), " on ", w.a.device(), " has dtype ", w.a.dtype(),
              "; the CUDA matmul takes float32, float64, bfloat16 or float16");
}

// One cuBLASLt handle per device, created on first use with the device current and kept for
// the life of the process (like the allocator's state: tensors may outlive static
// destructors). A handle carries no stream, so threads may share it.
cublasLtHandle_t handle_of(int device, const What& w) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, cublasLtHandle_t>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = handles->find(device);
  if (it != handles->end()) return it->second;
  cublasLtHandle_t h = nullptr;
  check(w, "cublasLtCreate", cublasLtCreate(&h));
  handles->emplace(device, h);
  return h;
}

// Owners of cuBLASLt descriptors.
struct DescDelete {
  void operator()(cublasLtMatmulDesc_t d) const { (void)cublasLtMatmulDescDestroy(d); }
};
struct LayoutDelete {
  void operator()(cublasLtMatrixLayout_t l) const { (void)cublasLtMatrixLayoutDestroy(l); }
};
struct PrefDelete {
  void operator()(cublasLtMatmulPreference_t p) const { (void)cublasLtMatmulPreferenceDestroy(p); }
};
using Desc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, DescDelete>;
using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>, LayoutDelete>;
using Pref = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, PrefDelete>;

// A workspace block from the caching allocator, returned when the call has been issued. Safe
// without waiting: all of strata's CUDA work on a device runs in order on one stream, so the
// block's next user starts after this GEMM.
class Workspace {
 public:
  Workspace(size_t bytes, int device)
      : bytes_(bytes), device_(device), ptr_(bytes ? cuda_detail::allocate(bytes, device) : nullptr) {}
  ~Workspace() {
    if (ptr_) cuda_detail::deallocate(ptr_, bytes_, device_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* get() const { return ptr_; }

 private:
  size_t bytes_;
  int device_;
  void* ptr_;
};

// The largest power of two (at most 256, cuBLASLt's default requirement) dividing every
// address a matrix's products start at.
uint32_t alignment(const void* p, int64_t stride_bytes) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(stride_bytes) | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// Everything the calls of one op share.
struct Context {
  const What& w;
  Types types;
  size_t esize;
  int device;
  cudaStream_t stream;
  cublasLtHandle_t lt;
};

Layout matrix_layout(const Context& x, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check(x.w, "cublasLtMatrixLayoutCreate",
        cublasLtMatrixLayoutCreate(&l, x.types.data, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  Layout owned(l);
  if (batch > 1) {
    const auto count = static_cast<int32_t>(batch);
    check(x.w, "cublasLtMatrixLayoutSetAttribute",
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    check(x.w, "cublasLtMatrixLayoutSetAttribute",
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  return owned;
}

template <class V>
void set_desc(const What& w, cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const V& v) {
  check(w, "cublasLtMatmulDescSetAttribute", cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v));
}
template <class V>
void set_pref(const What& w, cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const V& v) {
  check(w, "cublasLtMatmulPreferenceSetAttribute", cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof v));
}

// cuBLASLt's answer for one problem (gemm_algo_cache.h): its algorithm and workspace, or that
// none takes it. Errors other than "not supported" are thrown, never cached.
struct Choice {
  cublasLtMatmulHeuristicResult_t result{};
  bool found = false;
};

gemm::AlgoCache<Choice>& algo_cache() {
  static auto* cache = new gemm::AlgoCache<Choice>();  // never destroyed, like the handles
  return *cache;
}

// Issues one call on pointers already offset to its first product; `bias` (or null) is added
// to every column of D by the epilogue. Returns false, having issued nothing, when bias is
// given and no algorithm takes the epilogue for this problem; fails when none takes it at all.
bool issue(const Context& x, const gemm::CublasCall& c, const void* a, const void* b, void* d, const void* bias) {
  cublasLtMatmulDesc_t raw_desc = nullptr;
  check(x.w, "cublasLtMatmulDescCreate", cublasLtMatmulDescCreate(&raw_desc, x.types.compute, x.types.scale));
  Desc desc(raw_desc);
  set_desc(x.w, raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, c.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc(x.w, raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, c.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (bias) {
    // One bias vector for every product (CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE stays 0).
    set_desc(x.w, raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_desc(x.w, raw_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  const Layout la = matrix_layout(x, c.a.rows, c.a.cols, c.a.ld, c.batch, c.stride_a);
  const Layout lb = matrix_layout(x, c.b.rows, c.b.cols, c.b.ld, c.batch, c.stride_b);
  const Layout ld = matrix_layout(x, c.m, c.n, c.ldd, c.batch, c.stride_d);

  const auto bytes = [&](int64_t stride) { return c.batch > 1 ? stride * static_cast<int64_t>(x.esize) : 0; };
  const uint32_t align_a = alignment(a, bytes(c.stride_a)), align_b = alignment(b, bytes(c.stride_b));
  const uint32_t align_d = alignment(d, bytes(c.stride_d));
  const uint32_t align_bias = bias ? alignment(bias, 0) : 0;
  const gemm::AlgoKey key = gemm::algo_key(x.device, {x.types.data, x.types.scale, x.types.compute}, c,
                                           {align_a, align_b, align_d, align_bias});
  const Choice choice = algo_cache().find_or_choose(key, [&] {
    cublasLtMatmulPreference_t raw_pref = nullptr;
    check(x.w, "cublasLtMatmulPreferenceCreate", cublasLtMatmulPreferenceCreate(&raw_pref));
    Pref pref(raw_pref);
    set_pref(x.w, raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspace);
    set_pref(x.w, raw_pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
    set_pref(x.w, raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
    set_pref(x.w, raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
    set_pref(x.w, raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d);
    set_pref(x.w, raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d);
    Choice ch;
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(x.lt, raw_desc, la.get(), lb.get(), ld.get(), ld.get(),
                                                             raw_pref, 1, &ch.result, &found);
    if (hs != CUBLAS_STATUS_NOT_SUPPORTED) check(x.w, "cublasLtMatmulAlgoGetHeuristic", hs);
    ch.found = hs == CUBLAS_STATUS_SUCCESS && found > 0;
    return ch;
  });
  if (!choice.found) {
    if (bias) return false;
    fail(x.w, "cublasLtMatmulAlgoGetHeuristic (no algorithm for this layout)", CUBLAS_STATUS_NOT_SUPPORTED);
  }
  const cublasLtMatmulHeuristicResult_t& result = choice.result;

  Workspace ws(result.workspaceSize, x.device);
  const bool f64 = x.types.scale == CUDA_R_64F;
  const double alpha64 = 1, beta64 = c.accumulate ? 1 : 0;
  const float alpha32 = 1, beta32 = c.accumulate ? 1 : 0;
  profiler::count_launch();
  check(x.w, "cublasLtMatmul",
        cublasLtMatmul(x.lt, raw_desc, f64 ? static_cast<const void*>(&alpha64) : &alpha32, a, la.get(), b, lb.get(),
                       f64 ? static_cast<const void*>(&beta64) : &beta32, d, ld.get(), d, ld.get(), &result.algo,
                       ws.get(), result.workspaceSize, x.stream));
  return true;
}

char* at(const Tensor& t, int64_t elements, size_t esize) {
  return static_cast<char*>(t.data_ptr()) + elements * static_cast<int64_t>(esize);
}

// Adds bias to `rows` rows of out starting at row `first` (out is [.., n] contiguous): a
// rank-1 GEMM, bias ones^T, accumulated into the output. For where the epilogue is refused.
// Never in TF32, which would round the bias itself to 10 mantissa bits.
void add_bias_rows(const Context& x, const Tensor& out, const Tensor& bias, int64_t first, int64_t rows) {
  const int64_t n = out.size(-1);
  const Tensor ones = full({rows}, 1.0, {.dtype = out.dtype(), .device = out.device()});
  Context exact = x;
  if (exact.types.compute == CUBLAS_COMPUTE_32F_FAST_TF32) exact.types.compute = CUBLAS_COMPUTE_32F;
  const gemm::CublasCall c = gemm::bias_rows_call(n, rows);
  issue(exact, c, bias.data_ptr(), ones.data_ptr(), at(out, first * n, x.esize), nullptr);
}

// Runs plan p into out (fresh, contiguous); bias (contiguous, [n], or undefined) on every row.
void run(const What& w, const gemm::Plan& p, const Tensor& out, const Tensor& bias) {
  const int device = out.device().index;
  cuda_detail::DeviceGuard guard(device);
  const Context x{
      w, types_of(w), dtype_size(out.dtype()), device, cuda_detail::stream_of(device), handle_of(device, w)};
  const std::vector<gemm::CublasCall> calls = gemm::cublas_calls(p);
  if (calls.empty()) {  // k == 0: the products are zeros
    cuda_detail::fill(out, 0.0);
    if (bias.defined()) add_bias_rows(x, out, bias, 0, out.numel() / out.size(-1));
    return;
  }
  const void* bias_ptr = bias.defined() ? bias.data_ptr() : nullptr;
  for (const gemm::CublasCall& c : calls) {
    const void* a = at(p.b.t, c.offset_a, x.esize);
    const void* b = at(p.a.t, c.offset_b, x.esize);
    void* d = at(out, c.offset_d, x.esize);
    if (issue(x, c, a, b, d, bias_ptr)) continue;
    issue(x, c, a, b, d, nullptr);  // bias is given: this problem has no epilogue kernel
    add_bias_rows(x, out, bias, c.offset_d / p.n, c.batch * p.m);
  }
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const Tensor& bias, const char* name) {
  const What w{name, a, b};
  cuda_detail::check_device(a.device(), name);  // before anything is allocated
  (void)types_of(w);
  Shape out_shape = batch;
  out_shape.push_back(a.size(-2));
  out_shape.push_back(b.size(-1));
  Tensor out = empty(out_shape, {.dtype = a.dtype(), .device = a.device()});
  if (out.numel() == 0) return out;
  const gemm::Plan plan = gemm::plan_matmul(a, b, batch);
  run(w, plan, out, bias.defined() ? bias.detach().contiguous() : bias);
  return out;
}

Tensor matmul_sum(const Tensor& a, const Tensor& b, const char* name) {
  const What w{name, a, b};
  cuda_detail::check_device(a.device(), name);
  (void)types_of(w);
  Tensor out = empty({a.size(-2), b.size(-1)}, {.dtype = a.dtype(), .device = a.device()});
  if (out.numel() == 0) return out;
  run(w, gemm::plan_matmul_sum(a, b), out, Tensor());
  return out;
}

}  // namespace strata::cuda_ops
