#include "reduce.h"

#include "dtype_dispatch.h"
#include "strata/tensor/factory.h"

namespace strata::cpu {

Tensor sum_keepdim(const Tensor& x_in, const std::vector<bool>& reduced) {
  const size_t nd = x_in.shape().size();
  Shape out_shape = x_in.shape();
  for (size_t d = 0; d < nd; ++d)
    if (reduced[d]) out_shape[d] = 1;
  // Bring kept dimensions first and reduced ones last, then it is a row reduction; when the
  // reduced dimensions already lead (bias gradients) reduce columns without a copy.
  size_t lead = 0;
  while (lead < nd && reduced[lead]) ++lead;
  bool prefix = true;
  for (size_t d = lead; d < nd; ++d) prefix = prefix && !reduced[d];

  Tensor out = empty(out_shape, {.dtype = x_in.dtype(), .device = x_in.device()});
  detail::dispatch_arith(x_in.dtype(), "sum", [&]<class T>() {
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    T* o = out.data<T>();
    if (prefix && x_in.is_contiguous()) {
      const T* x = x_in.data<T>();
      const int64_t cols = out.numel();
      const int64_t rows = cols == 0 ? 0 : x_in.numel() / cols;
#pragma omp parallel for if (rows * cols > 32768) schedule(static)
      for (int64_t c0 = 0; c0 < cols; c0 += 256) {
        const int64_t c1 = std::min(cols, c0 + 256);
        Acc acc[256] = {};
        for (int64_t r = 0; r < rows; ++r) {
          const T* row = x + r * cols;
          for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
        }
        for (int64_t c = c0; c < c1; ++c) o[c] = static_cast<T>(acc[c - c0]);
      }
      return;
    }
    std::vector<int64_t> order;
    for (size_t d = 0; d < nd; ++d)
      if (!reduced[d]) order.push_back(static_cast<int64_t>(d));
    for (size_t d = 0; d < nd; ++d)
      if (reduced[d]) order.push_back(static_cast<int64_t>(d));
    Tensor xp = x_in.detach().permute(order).contiguous();
    const T* x = xp.data<T>();
    const int64_t outer = out.numel();
    const int64_t inner = outer == 0 ? 0 : xp.numel() / outer;
#pragma omp parallel for if (outer * inner > 32768) schedule(static)
    for (int64_t i = 0; i < outer; ++i) {
      Acc acc = 0;
      const T* row = x + i * inner;
      for (int64_t j = 0; j < inner; ++j) acc += row[j];
      o[i] = static_cast<T>(acc);
    }
  });
  return out;
}

void max_keepdim(const Tensor& x_in, int64_t dim, Tensor* values, Tensor* indices) {
  Tensor x = x_in.contiguous();
  Shape out_shape = x.shape();
  const int64_t n = out_shape[static_cast<size_t>(dim)];
  STRATA_CHECK(n > 0, "max: dimension ", dim, " of shape ", x.shape(), " is empty");
  out_shape[static_cast<size_t>(dim)] = 1;
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
  const int64_t outer = out_shape.numel() / inner;
  *values = empty(out_shape, {.dtype = x.dtype()});
  *indices = empty(out_shape, {.dtype = DType::Int64});
  detail::dispatch_arith(x.dtype(), "max", [&]<class T>() {
    const T* p = x.data<T>();
    T* v = values->data<T>();
    int64_t* ix = indices->data<int64_t>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* base = p + o * n * inner + i;
        T best = base[0];
        int64_t arg = 0;
        for (int64_t k = 1; k < n; ++k) {
          if (base[k * inner] > best || (base[k * inner] != base[k * inner] && best == best)) {  // NaN wins
            best = base[k * inner];
            arg = k;
          }
        }
        v[o * inner + i] = best;
        ix[o * inner + i] = arg;
      }
    }
  });
}

Tensor max_backward(const Tensor& grad, const Tensor& indices, const Shape& in_shape, int64_t dim) {
  Tensor gx = zeros(in_shape, {.dtype = grad.dtype()});
  const int64_t n = in_shape[static_cast<size_t>(dim)];
  int64_t inner = 1;
  for (size_t k = static_cast<size_t>(dim) + 1; k < in_shape.size(); ++k) inner *= in_shape[k];
  const int64_t* ix = indices.data<int64_t>();
  detail::dispatch_floating(grad.dtype(), "max backward", [&]<class T>() {
    const T* pg = grad.data<T>();
    T* px = gx.data<T>();
    for (int64_t i = 0; i < grad.numel(); ++i) {
      int64_t o = i / inner, r = i % inner;
      px[(o * n + ix[i]) * inner + r] = pg[i];
    }
  });
  return gx;
}

}  // namespace strata::cpu
