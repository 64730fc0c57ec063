// cat / stack copy once into a fresh output; their backward hands each input a narrow view
// of the gradient. split / chunk return views of the input under one SplitBackward node
// whose backward concatenates the pieces' gradients (one pass, instead of one zero-filled
// full-size tensor per piece as separate narrow nodes would need).
#include "strata/ops/shape_ops.h"

#include <algorithm>
#include <string>

#include "backend/cpu/copy.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "strata/autograd/function.h"
#include "strata/tensor/factory.h"

namespace strata {
namespace {

// Checks that the tensors can be concatenated along `dim` and returns the output shape.
Shape cat_shape(const std::vector<Tensor>& ts, int64_t dim, const char* op) {
  STRATA_CHECK(!ts.empty(), op, ": expected a non-empty list of tensors");
  for (size_t i = 0; i < ts.size(); ++i) {
    STRATA_CHECK(ts[i].defined(), op, ": tensor ", i, " is undefined");
    if (ts[i].device() != ts[0].device()) [[unlikely]]
      detail::mixed_devices(op, "tensor 0", ts[0], "tensor " + std::to_string(i), ts[i]);
  }
  const Tensor& first = ts[0];
  STRATA_CHECK(first.dim() >= 1, op, ": zero-dimensional tensor 0 cannot be concatenated");
  const size_t d = static_cast<size_t>(normalize_dim(dim, first.dim(), op));
  Shape out = first.shape();
  out[d] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    STRATA_CHECK(t.dtype() == first.dtype(), op, ": tensor ", i, " has dtype ", t.dtype(), " but tensor 0 has ",
                 first.dtype());
    STRATA_CHECK(t.dim() == first.dim(), op, ": tensor ", i, " has shape ", t.shape(), " but tensor 0 has ",
                 first.shape(), " (different number of dimensions)");
    for (size_t k = 0; k < out.size(); ++k) {
      STRATA_CHECK(k == d || t.shape()[k] == first.shape()[k], op, ": tensor ", i, " has shape ", t.shape(),
                   " but tensor 0 has ", first.shape(), "; sizes must match except in dimension ", dim);
    }
    out[d] += t.shape()[d];
  }
  return out;
}

// The (already checked) tensors concatenated along `d` into a fresh tensor of `out_shape`.
Tensor cat_copy(const std::vector<Tensor>& ts, size_t d, const Shape& out_shape, const char* op) {
  return detail::on_device(
      op, ts[0].device(), [&] { return cpu::cat(ts, d, out_shape); },
      [&] { return cuda_ops::cat(ts, d, out_shape, op); });
}

std::vector<int64_t> even_sizes(int64_t extent, int64_t split_size) {
  std::vector<int64_t> sizes;
  if (extent == 0) return {0};
  for (int64_t s = 0; s < extent; s += split_size) sizes.push_back(std::min(split_size, extent - s));
  return sizes;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  const Shape out_shape = cat_shape(tensors, dim, "cat");
  const size_t d = static_cast<size_t>(normalize_dim(dim, tensors[0].dim(), "cat"));
  Tensor out = cat_copy(tensors, d, out_shape, "cat");
  if (is_floating(out.dtype()) && autograd::needs_grad(tensors)) {
    std::vector<int64_t> lengths;
    lengths.reserve(tensors.size());
    for (const Tensor& t : tensors) lengths.push_back(t.shape()[d]);
    autograd::record("CatBackward", tensors, {out}, {}, [lengths, d](autograd::BackwardContext& ctx) {
      std::vector<Tensor> grads(lengths.size());
      int64_t start = 0;
      for (size_t i = 0; i < lengths.size(); ++i) {
        if (ctx.needs(i)) grads[i] = ctx.grad().narrow(static_cast<int64_t>(d), start, lengths[i]);
        start += lengths[i];
      }
      return grads;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  STRATA_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    STRATA_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    STRATA_CHECK(tensors[i].shape() == tensors[0].shape(), "stack: tensor ", i, " has shape ", tensors[i].shape(),
                 " but tensor 0 has ", tensors[0].shape(), "; all shapes must be equal");
  }
  const int64_t d = normalize_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> views;
  views.reserve(tensors.size());
  for (const Tensor& t : tensors) views.push_back(t.detach().unsqueeze(d));
  const Shape out_shape = cat_shape(views, d, "stack");
  Tensor out = cat_copy(views, static_cast<size_t>(d), out_shape, "stack");
  if (is_floating(out.dtype()) && autograd::needs_grad(tensors)) {
    const size_t count = tensors.size();
    autograd::record("StackBackward", tensors, {out}, {}, [count, d](autograd::BackwardContext& ctx) {
      std::vector<Tensor> grads(count);
      for (size_t i = 0; i < count; ++i)
        if (ctx.needs(i)) grads[i] = ctx.grad().select(d, static_cast<int64_t>(i));
      return grads;
    });
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  STRATA_CHECK(x.defined(), "split: tensor is undefined");
  STRATA_CHECK(x.dim() >= 1, "split: cannot split a zero-dimensional tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "split");
  const int64_t extent = x.size(d);
  STRATA_CHECK(!sizes.empty(), "split: empty list of sizes for dimension ", dim, " of size ", extent, " (shape ",
               x.shape(), ")");
  int64_t total = 0;
  for (int64_t s : sizes) {
    STRATA_CHECK(s >= 0, "split: negative size ", s, " in ", Shape(sizes));
    total += s;
  }
  STRATA_CHECK(total == extent, "split: sizes ", Shape(sizes), " sum to ", total, " but dimension ", dim, " of shape ",
               x.shape(), " has size ", extent);
  std::vector<Tensor> pieces;
  pieces.reserve(sizes.size());
  Tensor base = x.detach();
  int64_t start = 0;
  for (int64_t s : sizes) {
    pieces.push_back(base.narrow(d, start, s));
    start += s;
  }
  if (is_floating(x.dtype()) && autograd::needs_grad({x})) {
    autograd::record("SplitBackward", {x}, pieces, {}, [d, shape = x.shape()](autograd::BackwardContext& ctx) {
      // Pieces that received no gradient arrive as zeros from the engine.
      return std::vector<Tensor>{cat_copy(ctx.grads, static_cast<size_t>(d), shape, "split backward")};
    });
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  STRATA_CHECK(x.defined(), "split: tensor is undefined");
  STRATA_CHECK(x.dim() >= 1, "split: cannot split a zero-dimensional tensor");
  const int64_t extent = x.size(normalize_dim(dim, x.dim(), "split"));
  STRATA_CHECK(split_size > 0 || (split_size == 0 && extent == 0), "split: split_size ", split_size,
               " is invalid for dimension ", dim, " of size ", extent, " (shape ", x.shape(), "); it must be positive");
  return split(x, even_sizes(extent, split_size), dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  STRATA_CHECK(x.defined(), "chunk: tensor is undefined");
  STRATA_CHECK(x.dim() >= 1, "chunk: cannot chunk a zero-dimensional tensor");
  STRATA_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  const int64_t extent = x.size(normalize_dim(dim, x.dim(), "chunk"));
  // As torch: pieces of ceil(extent / chunks), so there may be fewer than `chunks`; an empty
  // dimension gives `chunks` empty pieces.
  if (extent == 0) return split(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), dim);
  return split(x, (extent + chunks - 1) / chunks, dim);
}

}  // namespace strata
