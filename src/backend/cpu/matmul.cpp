#include "backend/cpu/matmul.h"

#include <cstring>

#include "backend/cpu/gemm.h"
#include "backend/gemm_plan.h"
#include "strata/tensor/factory.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

// Runs a plan into c (row-major [m, n] per product, ldc = n); beta applies to the first
// product written into each output.
template <class T>
void run(const gemm::Plan& p, T* c, T beta) {
  const gemm::Operand &a = p.a, &b = p.b;
  const T* pa = a.t.data<T>();
  const T* pb = b.t.data<T>();
  if (p.sum_batch) {
    // One product after another into the same output (BLAS threads each product).
    if (p.batch == 0) std::memset(c, 0, static_cast<size_t>(p.m * p.n) * sizeof(T));
    for (size_t i = 0; i < static_cast<size_t>(p.batch); ++i) {
      gemm(a.layout.trans, b.layout.trans, p.m, p.n, p.k, T(1), pa + a.offsets[i], a.layout.ld, pb + b.offsets[i],
           b.layout.ld, i == 0 ? beta : T(1), c, p.n);
    }
    return;
  }
  if (p.batch == 1) {
    gemm(a.layout.trans, b.layout.trans, p.m, p.n, p.k, T(1), pa + a.offsets[0], a.layout.ld, pb + b.offsets[0],
         b.layout.ld, beta, c, p.n);
    return;
  }
  gemm_batched(a.layout.trans, b.layout.trans, p.m, p.n, p.k, T(1), pa, a.offsets.data(), a.layout.ld, pb,
               b.offsets.data(), b.layout.ld, beta, c, p.m * p.n, p.n, p.batch);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const Tensor& bias) {
  Shape out_shape = batch;
  out_shape.push_back(a.size(-2));
  out_shape.push_back(b.size(-1));
  Tensor out = empty(out_shape, {.dtype = a.dtype()});
  if (out.numel() == 0) return out;
  const gemm::Plan plan = gemm::plan_matmul(a, b, batch);
  detail::dispatch_floating(a.dtype(), "matmul", [&]<class T>() {
    T* c = out.data<T>();
    T beta = 0;
    if (bias.defined()) {  // bias rows then beta = 1: replaces the zeroing pass BLAS makes for beta = 0
      const int64_t n = out_shape.back(), rows = out.numel() / n;
      Tensor bc = bias.detach().contiguous();
      const T* bp = bc.data<T>();
#pragma omp parallel for if (rows * n > 65536) schedule(static)
      for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * n, bp, static_cast<size_t>(n) * sizeof(T));
      beta = 1;
    }
    run<T>(plan, c, beta);
  });
  return out;
}

Tensor matmul_sum(const Tensor& a, const Tensor& b) {
  Tensor out = empty({a.size(-2), b.size(-1)}, {.dtype = a.dtype()});
  if (out.numel() == 0) return out;
  const gemm::Plan plan = gemm::plan_matmul_sum(a, b);
  detail::dispatch_floating(a.dtype(), "matmul", [&]<class T>() { run<T>(plan, out.data<T>(), T(0)); });
  return out;
}

}  // namespace strata::cpu
