#include "backend/gemm_plan.h"

#include <algorithm>

namespace strata::gemm {
namespace {

// A tensor over t's storage and offset with other sizes and strides; no autograd.
Tensor strided_view(const Tensor& t, Shape shape, Strides strides) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->offset = t.offset();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

// The first `count` dimensions of t: sizes and strides.
std::span<const int64_t> lead_sizes(const Tensor& t, int64_t count) {
  return std::span<const int64_t>(t.shape().vec().data(), static_cast<size_t>(count));
}
std::span<const int64_t> lead_strides(const Tensor& t, int64_t count) {
  return std::span<const int64_t>(t.strides().data(), static_cast<size_t>(count));
}

// t's matrices (last two dimensions) readable in place, else a contiguous copy; offsets and
// batch stride for `batch` products (all 0 for a 2-D operand, which every product shares).
Operand operand(const Tensor& t, const Shape& batch) {
  Operand o;
  if (auto l = layout(t.size(-2), t.size(-1), t.stride(-2), t.stride(-1))) {
    o.t = t;
    o.layout = *l;
  } else {
    o.t = t.contiguous();
    o.layout = Layout{false, std::max<int64_t>(1, o.t.size(-1))};
  }
  if (o.t.dim() == 2) {
    o.offsets.assign(static_cast<size_t>(batch.numel()), 0);
    o.batch_stride = 0;
    return o;
  }
  const int64_t nb = o.t.dim() - 2;
  o.offsets = batch_offsets(batch.vec(), lead_strides(o.t, nb));
  if (auto merged = merge_dims(lead_sizes(o.t, nb), lead_strides(o.t, nb))) o.batch_stride = merged->stride;
  return o;
}

// An operand read as one matrix in place with the given layout (batch 1).
Operand single(const Tensor& t, Layout l) { return Operand{t, l, {0}, 0}; }

}  // namespace

std::optional<Layout> layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rows == 0 || cols == 0) return Layout{false, std::max<int64_t>(1, cols)};  // nothing is read
  // A single row or column never steps by the other stride, so that stride is free.
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<int64_t>(1, cols)))
    return Layout{false, rows <= 1 ? std::max<int64_t>(1, cols) : rs};
  if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<int64_t>(1, rows)))
    return Layout{true, cols <= 1 ? std::max<int64_t>(1, rows) : cs};
  return std::nullopt;
}

std::optional<Merged> merge_dims(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  int64_t n = 1, s = 1;
  bool have_inner = false;  // s is the stride of the innermost dimension of size > 1 so far
  for (size_t i = sizes.size(); i-- > 0;) {
    const int64_t len = sizes[i], st = strides[i];
    if (len == 0) return Merged{0, 1};
    if (len == 1) continue;
    if (!have_inner) {
      s = st;
      have_inner = true;
    } else if (st != s * n) {
      return std::nullopt;
    }
    n *= len;
  }
  return Merged{n, s};
}

std::vector<int64_t> batch_offsets(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  int64_t nb = 1;
  for (int64_t s : sizes) nb *= s;
  std::vector<int64_t> offsets(static_cast<size_t>(nb), 0);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = sizes.size(); d-- > 0;) {
      off += (rem % sizes[d]) * strides[d];
      rem /= sizes[d];
    }
    offsets[static_cast<size_t>(i)] = off;
  }
  return offsets;
}

Plan plan_matmul(const Tensor& a, const Tensor& b, const Shape& batch) {
  Plan p;
  p.m = a.size(-2);
  p.k = a.size(-1);
  p.n = b.size(-1);
  if (b.dim() == 2) {
    // Every row of every matrix of a meets the same b: one GEMM over all rows when a's rows
    // share one stride (always after a copy, so copy only if a batched loop cannot read a
    // either).
    std::optional<Layout> la;
    Tensor at = a;
    int64_t rows = 0;
    const std::vector<int64_t> row_sizes(a.shape().begin(), a.shape().end() - 1);
    const std::vector<int64_t> row_strides(a.strides().begin(), a.strides().end() - 1);
    if (auto merged = merge_dims(row_sizes, row_strides)) {
      rows = merged->size;
      la = layout(rows, p.k, merged->stride, a.stride(-1));
    }
    if (!la && !layout(p.m, p.k, a.stride(-2), a.stride(-1))) {
      at = a.contiguous();
      rows = batch.numel() * p.m;
      la = Layout{false, std::max<int64_t>(1, p.k)};
    }
    if (la) {
      p.m = rows;
      p.a = single(at, *la);
      p.b = operand(b, Shape{});
      return p;
    }
  }
  p.batch = batch.numel();
  p.a = operand(a, batch);
  p.b = operand(b, batch);
  return p;
}

Plan plan_matmul_sum(const Tensor& a, const Tensor& b) {
  Plan p;
  p.m = a.size(-2);
  p.k = a.size(-1);
  p.n = b.size(-1);
  // The batch folds into the contraction when a's (batch.., K) and b's (batch.., K)
  // dimensions each merge: [M, batch*K] x [batch*K, N] in one GEMM.
  std::vector<int64_t> sizes_a(a.shape().begin(), a.shape().end() - 2);
  std::vector<int64_t> strides_a(a.strides().begin(), a.strides().end() - 2);
  std::vector<int64_t> sizes_b(b.shape().begin(), b.shape().end() - 2);
  std::vector<int64_t> strides_b(b.strides().begin(), b.strides().end() - 2);
  sizes_a.push_back(p.k);
  strides_a.push_back(a.stride(-1));
  sizes_b.push_back(b.size(-2));
  strides_b.push_back(b.stride(-2));
  auto ma = merge_dims(sizes_a, strides_a), mb = merge_dims(sizes_b, strides_b);
  if (ma && mb) {
    p.k = ma->size;
    p.a = operand(strided_view(a, {p.m, ma->size}, {a.stride(-2), ma->stride}), Shape{});
    p.b = operand(strided_view(b, {mb->size, p.n}, {mb->stride, b.stride(-1)}), Shape{});
    return p;
  }
  // Otherwise accumulate one batch entry after another into the same output.
  const Shape batch(a.shape().begin(), a.shape().end() - 2);
  p.batch = batch.numel();
  p.sum_batch = true;
  p.a = operand(a, batch);
  p.b = operand(b, batch);
  return p;
}

bool row_major_in_place(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const bool unit_cols = cols <= 1 || t.stride(-1) == 1;
  const bool rows_ok = rows <= 1 || t.stride(-2) >= cols;
  bool batch_ok = true;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) batch_ok = batch_ok && t.stride(d) >= 0;
  return unit_cols && rows_ok && batch_ok;
}

}  // namespace strata::gemm
