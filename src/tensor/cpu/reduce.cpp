#include "reduce.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "dim_layout.h"
#include "dtype_dispatch.h"
#include "multiversion.h"
#include "strata/tensor/factory.h"

namespace strata::cpu {
namespace {

// o[c] = sum over rows of x[r, c] for a contiguous [rows, cols] x (bias gradients), in
// blocks of 256 columns accumulated in Acc. Compiled per ISA level: the float-to-double
// accumulation ran 2 lanes wide as baseline SSE2. The sum over rows keeps its order.
template <class T, class Acc>
STRATA_MULTIVERSION void column_sums(const T* x, int64_t rows, int64_t cols, T* o) {
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
}

}  // namespace

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
      const int64_t cols = out.numel();
      const int64_t rows = cols == 0 ? 0 : x_in.numel() / cols;
      column_sums<T, Acc>(x_in.data<T>(), rows, cols, o);
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
  out_shape[static_cast<size_t>(dim)] = 1;
  const Layout l = layout_of(x.shape(), dim);
  const int64_t n = l.n, outer = l.outer, inner = l.inner;
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

namespace {

// Order for topk: a before b when a's value ranks higher (NaN above every number), equal
// values by lower index. A strict weak order, so std::partial_sort is well defined.
template <class T>
struct TopkBefore {
  bool largest;
  bool operator()(const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) const {
    const bool a_nan = a.first != a.first, b_nan = b.first != b.first;
    if (a_nan != b_nan) return largest ? a_nan : b_nan;
    if (!a_nan && a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  }
};

}  // namespace

void topk(const Tensor& x_in, int64_t k, int64_t dim, bool largest, Tensor* values, Tensor* indices) {
  Tensor x = x_in.contiguous();
  Shape out_shape = x.shape();
  const int64_t n = x.size(dim);
  out_shape[static_cast<size_t>(dim)] = k;
  const Layout l = layout_of(x.shape(), dim);
  const int64_t outer = l.outer, inner = l.inner;
  *values = empty(out_shape, {.dtype = x.dtype()});
  *indices = empty(out_shape, {.dtype = DType::Int64});
  detail::dispatch_arith(x.dtype(), "topk", [&]<class T>() {
    const T* p = x.data<T>();
    T* v = values->data<T>();
    int64_t* ix = indices->data<int64_t>();
#pragma omp parallel if (x.numel() > 32768 && outer * inner > 1)
    {
      std::vector<std::pair<T, int64_t>> lane(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t l = 0; l < outer * inner; ++l) {
        const int64_t o = l / inner, i = l % inner;
        const T* src = p + o * n * inner + i;
        for (int64_t j = 0; j < n; ++j) lane[static_cast<size_t>(j)] = {src[j * inner], j};
        std::partial_sort(lane.begin(), lane.begin() + k, lane.end(), TopkBefore<T>{largest});
        for (int64_t j = 0; j < k; ++j) {
          v[(o * k + j) * inner + i] = lane[static_cast<size_t>(j)].first;
          ix[(o * k + j) * inner + i] = lane[static_cast<size_t>(j)].second;
        }
      }
    }
  });
}

Tensor cumsum(const Tensor& x_in, int64_t dim, bool reverse) {
  Tensor x = x_in.contiguous();
  Tensor out = empty(x.shape(), {.dtype = x.dtype()});
  const int64_t n = x.size(dim);
  const Layout l = layout_of(x.shape(), dim);
  const int64_t outer = l.outer, inner = l.inner;
  detail::dispatch_arith(x.dtype(), "cumsum", [&]<class T>() {
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const T* p = x.data<T>();
    T* o = out.data<T>();
    // Row by row along `dim`, with one running sum per inner position: contiguous reads.
#pragma omp parallel if (x.numel() > 32768 && outer > 1)
    {
      std::vector<Acc> acc(static_cast<size_t>(inner));
#pragma omp for schedule(static)
      for (int64_t b = 0; b < outer; ++b) {
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = (b * n + (reverse ? n - 1 - j : j)) * inner;
          for (int64_t i = 0; i < inner; ++i) {
            acc[static_cast<size_t>(i)] += p[at + i];
            o[at + i] = static_cast<T>(acc[static_cast<size_t>(i)]);
          }
        }
      }
    }
  });
  return out;
}

}  // namespace strata::cpu
