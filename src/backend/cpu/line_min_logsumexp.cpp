#include "backend/cpu/line_min_logsumexp.h"

#include "backend/cpu/dim_layout.h"
#include "backend/cpu/reduce.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/line_min_logsumexp.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {

// Lines above which the loop is shared between threads (each line costs n reads).
constexpr int64_t kParallelElements = 32768;

void min_keepdim(const Tensor& x_in, int64_t dim, Tensor* values, Tensor* indices) {
  const Tensor x = x_in.detach().contiguous();
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(dim)] = 1;
  const Layout l = layout_of(x.shape(), dim);
  *values = empty(out_shape, {.dtype = x.dtype()});
  *indices = empty(out_shape, {.dtype = DType::Int64});
  detail::dispatch_arith(x.dtype(), "min", [&]<class T>() {
    const T* p = x.data<T>();
    T* v = values->data<T>();
    int64_t* ix = indices->data<int64_t>();
    const int64_t lines = l.outer * l.inner;
#pragma omp parallel for if (lines * l.n > kParallelElements) schedule(static)
    for (int64_t line = 0; line < lines; ++line) {
      const int64_t o = line / l.inner, i = line % l.inner;
      strata_kernels::line_min(p + o * l.n * l.inner + i, l.n, l.inner, &v[line], &ix[line]);
    }
  });
}

Tensor logsumexp_keepdim(const Tensor& x, const std::vector<bool>& reduced) {
  Tensor out = empty(sum_keepdim_shape(x.shape(), reduced), {.dtype = x.dtype()});
  if (out.numel() == 0) return out;
  // The sum's plan: the reduced elements of each output form the middle axis of [outer, n,
  // inner] (a copy with them moved last where they are not one block).
  const DimReducePlan p = plan_dim_reduce(x.detach(), reduced);
  detail::dispatch_floating(x.dtype(), "logsumexp", [&]<class T>() {
    const T* src = p.src.data<T>();
    T* o = out.data<T>();
    const int64_t lines = p.outer * p.inner;
#pragma omp parallel for if (lines * p.n > kParallelElements) schedule(static)
    for (int64_t line = 0; line < lines; ++line) {
      const int64_t a = line / p.inner, i = line % p.inner;
      o[line] = strata_kernels::line_logsumexp(src + a * p.n * p.inner + i, p.n, p.inner);
    }
  });
  return out;
}

}  // namespace strata::cpu
