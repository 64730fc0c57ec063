#include "backend/cpu/reduce.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "backend/cpu/dim_layout.h"
#include "backend/cpu/multiversion.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/dim_reduce.h"
#include "strata_kernels/common/line_select.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

using strata_kernels::kDimReduceLanes;

// Step 2 of common/dim_reduce.h's order over lanes[0, active) (lanes from `active` on are
// empty, and adding an empty lane is exact, so they are skipped), `width` columns each.
template <class Acc>
STRATA_ALWAYS_INLINE void halve_lanes(Acc* lanes, int64_t lane_stride, int64_t active, int64_t width) {
  for (int64_t s = kDimReduceLanes / 2; s > 0; s /= 2)
    for (int64_t t = 0; t < s && t + s < active; ++t) {
      Acc* a = lanes + t * lane_stride;
      const Acc* b = lanes + (t + s) * lane_stride;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) a[c] += b[c];
    }
}

// inner == 1: each output sums a contiguous row of n; the lanes are a SIMD vector.
template <class T, class Acc>
STRATA_MULTIVERSION void sum_rows(const T* x, int64_t outer, int64_t n, T* o) {
  const int64_t active = std::min<int64_t>(n, kDimReduceLanes);
#pragma omp parallel for if (outer * n > 32768) schedule(static)
  for (int64_t i = 0; i < outer; ++i) {
    Acc lanes[kDimReduceLanes] = {};
    const T* row = x + i * n;
    int64_t k = 0;
    for (; k + kDimReduceLanes <= n; k += kDimReduceLanes) {
#pragma omp simd
      for (int l = 0; l < kDimReduceLanes; ++l) lanes[l] += static_cast<Acc>(row[k + l]);
    }
    for (int l = 0; k + l < n; ++l) lanes[l] += static_cast<Acc>(row[k + l]);
    halve_lanes(lanes, 1, active, 1);
    o[i] = static_cast<T>(lanes[0]);
  }
}

// Lane t's position in the order the tree consumes leaves (bit-reversed t): the halving's
// first step pairs lanes t and t + L/2, so a left-to-right pairwise merge of the leaves taken
// in this order is the same tree.
constexpr int leaf_lane(int j) {
  int t = 0;
  for (int b = 1, r = kDimReduceLanes / 2; b < kDimReduceLanes; b *= 2, r /= 2)
    if (j & b) t += r;
  return t;
}

// inner > 1 (bias gradients: outer 1, reduced rows, kept columns): blocks of kCols columns.
// One lane at a time sums its rows (t, t + L, ...) into one L1-resident row of accumulators,
// as the plain column sum did; finished lanes are merged pairwise on a stack (a binary
// counter), so only log2(L) + 1 rows of accumulators exist, not L. Lanes past n are empty
// and skipped (adding an empty lane is exact).
template <class T, class Acc>
STRATA_MULTIVERSION void sum_columns(const T* x, int64_t outer, int64_t n, int64_t inner, T* o) {
  constexpr int64_t kCols = 512;
  constexpr int kDepth = 6;  // log2(kDimReduceLanes) + 1
  static_assert(1 << (kDepth - 1) == kDimReduceLanes);
  const int64_t blocks = (inner + kCols - 1) / kCols;
#pragma omp parallel for if (outer * n * inner > 32768) schedule(static)
  for (int64_t ob = 0; ob < outer * blocks; ++ob) {
    const int64_t b = ob / blocks, c0 = ob % blocks * kCols, width = std::min(kCols, inner - c0);
    Acc rows[kDepth][kCols];
    Acc* stack[kDepth];
    bool empty[kDepth];
    int depth = 0;
    const T* base = x + b * n * inner + c0;
    for (int j = 0; j < kDimReduceLanes; ++j) {
      const int t = leaf_lane(j);
      // The free row: the one no stack entry below `depth` holds.
      Acc* acc = nullptr;
      for (int r = 0; r < kDepth && acc == nullptr; ++r) {
        bool used = false;
        for (int e = 0; e < depth; ++e) used = used || stack[e] == rows[r];
        if (!used) acc = rows[r];
      }
      stack[depth] = acc;
      empty[depth] = t >= n;
      if (t < n) {
        for (int64_t c = 0; c < width; ++c) acc[c] = Acc(0);
        for (int64_t k = t; k < n; k += kDimReduceLanes) {
          const T* row = base + k * inner;
#pragma omp simd
          for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<Acc>(row[c]);
        }
      }
      ++depth;
      for (int m = j + 1; m % 2 == 0; m /= 2, --depth) {
        Acc* left = stack[depth - 2];
        const Acc* right = stack[depth - 1];
        if (empty[depth - 1]) continue;
        if (empty[depth - 2]) {
          stack[depth - 2] = stack[depth - 1];
          empty[depth - 2] = false;
          continue;
        }
#pragma omp simd
        for (int64_t c = 0; c < width; ++c) left[c] += right[c];
      }
    }
    const Acc* result = stack[0];
    for (int64_t c = 0; c < width; ++c) o[b * inner + c0 + c] = empty[0] ? T(0) : static_cast<T>(result[c]);
  }
}

}  // namespace

DimReducePlan plan_dim_reduce(const Tensor& x, const std::vector<bool>& reduced) {
  const Shape& shape = x.shape();
  const size_t nd = shape.size();
  // A size-1 dimension changes no element's place in the reduced order: leave it kept.
  std::vector<bool> r(nd);
  int64_t n = 1;
  for (size_t d = 0; d < nd; ++d) {
    r[d] = reduced[d] && shape[d] != 1;
    if (r[d]) n *= shape[d];
  }
  size_t first = nd, last = 0;
  for (size_t d = 0; d < nd; ++d)
    if (r[d]) {
      first = std::min(first, d);
      last = d;
    }
  bool run = true;  // the reduced dimensions are one block (size-1 kept ones may sit inside)
  for (size_t d = first; d < nd && d <= last; ++d) run = run && (r[d] || shape[d] == 1);
  DimReducePlan p;
  p.n = n;
  if (first == nd) {  // nothing reduced: every output sums one element
    p.src = x.contiguous();
    p.outer = x.numel();
    p.inner = 1;
    return p;
  }
  if (run) {
    p.src = x.contiguous();
    p.outer = 1;
    p.inner = 1;
    for (size_t d = 0; d < first; ++d) p.outer *= shape[d];
    for (size_t d = last + 1; d < nd; ++d) p.inner *= shape[d];
    return p;
  }
  // Kept dimensions first, reduced ones last (in their own order, so the reduced order is
  // the same), then each output is a contiguous row.
  std::vector<int64_t> order;
  for (size_t d = 0; d < nd; ++d)
    if (!r[d]) order.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d < nd; ++d)
    if (r[d]) order.push_back(static_cast<int64_t>(d));
  p.src = x.detach().permute(order).contiguous();
  p.outer = 1;
  for (size_t d = 0; d < nd; ++d)
    if (!r[d]) p.outer *= shape[d];
  p.inner = 1;
  return p;
}

Shape sum_keepdim_shape(const Shape& shape, const std::vector<bool>& reduced) {
  Shape out = shape;
  for (size_t d = 0; d < out.size(); ++d)
    if (reduced[d]) out[d] = 1;
  return out;
}

Tensor sum_keepdim(const Tensor& x_in, const std::vector<bool>& reduced) {
  Tensor out = empty(sum_keepdim_shape(x_in.shape(), reduced), {.dtype = x_in.dtype(), .device = x_in.device()});
  if (out.numel() == 0) return out;
  const DimReducePlan p = plan_dim_reduce(x_in.detach(), reduced);
  detail::dispatch_arith(x_in.dtype(), "sum", [&]<class T>() {
    using Acc = typename strata_kernels::DimReduceAcc<T>::type;
    if (p.inner == 1) {
      sum_rows<T, Acc>(p.src.data<T>(), p.outer, p.n, out.data<T>());
    } else {
      sum_columns<T, Acc>(p.src.data<T>(), p.outer, p.n, p.inner, out.data<T>());
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
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        strata_kernels::line_max(p + o * n * inner + i, n, inner, &v[o * inner + i], &ix[o * inner + i]);
  });
}

namespace {

// Order for topk past kSmallTopk: a before b when a's value ranks higher
// (common/line_select.h's value_before), equal values by lower index. A strict weak order, so
// std::partial_sort is well defined, and a total one on (value, index): the same answer as
// line_topk's insertion.
template <class T>
struct TopkBefore {
  bool largest;
  bool operator()(const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) const {
    if (strata_kernels::value_before(a.first, b.first, largest)) return true;
    if (strata_kernels::value_before(b.first, a.first, largest)) return false;
    return a.second < b.second;
  }
};

// Up to this k, topk runs the kernels' line_topk (as the GPU does); beyond, whose insertion
// costs O(n * k) on an ascending line, a partial sort by the same order.
constexpr int64_t kSmallTopk = 64;

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
      std::vector<std::pair<T, int64_t>> lane(static_cast<size_t>(k <= kSmallTopk ? 0 : n));
#pragma omp for schedule(static)
      for (int64_t l = 0; l < outer * inner; ++l) {
        const int64_t o = l / inner, i = l % inner;
        const T* src = p + o * n * inner + i;
        if (k <= kSmallTopk) {
          strata_kernels::line_topk(src, n, inner, k, largest, v + o * k * inner + i, ix + o * k * inner + i, inner);
          continue;
        }
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
    using Acc = typename strata_kernels::CumsumAcc<T>::type;
    const T* p = x.data<T>();
    T* o = out.data<T>();
    // Row by row along `dim`, with one running sum per inner position: contiguous reads. Each
    // running sum takes its line's elements in index order through cumsum_step, as the GPU's
    // thread per line does (line_cumsum): the same bits, whatever the loop order.
#pragma omp parallel if (x.numel() > 32768 && outer > 1)
    {
      std::vector<Acc> acc(static_cast<size_t>(inner));
#pragma omp for schedule(static)
      for (int64_t b = 0; b < outer; ++b) {
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = (b * n + (reverse ? n - 1 - j : j)) * inner;
          for (int64_t i = 0; i < inner; ++i) {
            o[at + i] = strata_kernels::cumsum_step<T, Acc>(&acc[static_cast<size_t>(i)], p[at + i]);
          }
        }
      }
    }
  });
  return out;
}

}  // namespace strata::cpu
