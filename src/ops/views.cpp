// Views: tensors sharing the input's storage with other shape/strides/offset. Each records
// its inverse for autograd.
#include <algorithm>
#include <numeric>

#include "strata/autograd/function.h"
#include "strata/ops/reduce.h"
#include "strata/tensor/factory.h"
#include "strata/tensor/tensor.h"

namespace strata {
namespace {

Tensor make_view(const Tensor& base, int64_t offset, Shape shape, Strides strides) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// Resolves one -1 entry and checks the element count.
Shape infer_shape(const Shape& requested, int64_t numel, const char* op, const Shape& from) {
  Shape shape = requested;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      STRATA_CHECK(infer < 0, op, ": only one dimension may be -1 in ", requested);
      infer = static_cast<int>(i);
    } else {
      STRATA_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " in ", requested);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    STRATA_CHECK(known != 0 && numel % known == 0, op, ": cannot infer -1 in ", requested, " for ", numel,
                 " elements (input shape ", from, ")");
    shape[static_cast<size_t>(infer)] = numel / known;
  }
  STRATA_CHECK(shape.numel() == numel, op, ": shape ", requested, " is invalid for input of shape ", from, " (", numel,
               " elements)");
  return shape;
}

template <class Fn>
void record_view(const char* name, const Tensor& in, const Tensor& out, Fn backward) {
  if (autograd::needs_grad({in})) {
    autograd::record(name, {in}, {out}, {},
                     [backward](autograd::BackwardContext& ctx) { return std::vector<Tensor>{backward(ctx.grad(0))}; });
  }
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  Shape shape = infer_shape(requested, numel(), "view", this->shape());
  STRATA_CHECK(is_contiguous(), "view: tensor of shape ", this->shape(), " is not contiguous (strides ",
               Shape(strides()), "); use reshape() or contiguous()");
  Tensor out = make_view(*this, offset(), shape, contiguous_strides(shape));
  Shape in_shape = this->shape();
  record_view("ViewBackward", *this, out, [in_shape](const Tensor& g) { return g.reshape(in_shape); });
  return out;
}

Tensor Tensor::reshape(const Shape& requested) const {
  if (is_contiguous()) return view(requested);
  return contiguous().view(requested);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  const size_t dim_i = static_cast<size_t>(normalize_dim(d, dim(), "narrow"));
  const int64_t extent = shape()[dim_i];
  if (start < 0) start += extent;
  STRATA_CHECK(start >= 0 && length >= 0 && start + length <= extent, "narrow: range [", start, ", ", start + length,
               ") is out of bounds for dimension ", d, " of size ", extent, " (shape ", shape(), ")");
  Shape shape = this->shape();
  shape[dim_i] = length;
  Tensor out = make_view(*this, offset() + start * strides()[dim_i], shape, strides());
  Shape in_shape = this->shape();
  DType dt = dtype();
  record_view("NarrowBackward", *this, out, [in_shape, dt, dim_i, start, length](const Tensor& g) {
    Tensor full = zeros(in_shape, {.dtype = dt, .device = g.device()});
    full.narrow(static_cast<int64_t>(dim_i), start, length).copy_(g);
    return full;
  });
  return out;
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) const {
  const size_t dim_i = static_cast<size_t>(normalize_dim(d, dim(), "slice"));
  STRATA_CHECK(step > 0, "slice: step ", step, " must be positive (dimension ", d, ", shape ", shape(), ")");
  const int64_t extent = shape()[dim_i];
  // Python's slice bounds: negative counts from the end, then clamp to [0, extent].
  auto bound = [extent](std::optional<int64_t> b, int64_t unset) {
    int64_t v = b.value_or(unset);
    if (v < 0) v += extent;
    return std::clamp<int64_t>(v, 0, extent);
  };
  const int64_t first = bound(start, 0);
  const int64_t last = std::max(first, bound(stop, extent));
  Shape shape = this->shape();
  shape[dim_i] = (last - first + step - 1) / step;
  Strides strides = this->strides();
  strides[dim_i] *= step;
  Tensor out = make_view(*this, offset() + first * this->strides()[dim_i], shape, strides);
  Shape in_shape = this->shape();
  DType dt = dtype();
  record_view("SliceBackward", *this, out, [in_shape, dt, dim_i, first, last, step](const Tensor& g) {
    Tensor full = zeros(in_shape, {.dtype = dt, .device = g.device()});
    full.slice(static_cast<int64_t>(dim_i), first, last, step).copy_(g);
    return full;
  });
  return out;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  int64_t dn = normalize_dim(d, dim(), "select");
  int64_t extent = shape()[static_cast<size_t>(dn)];
  STRATA_CHECK(index >= -extent && index < extent, "select: index ", index, " out of range for dimension ", d,
               " of size ", extent);
  return narrow(dn, index < 0 ? index + extent : index, 1).squeeze(dn);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  const size_t a = static_cast<size_t>(normalize_dim(d0, dim(), "transpose"));
  const size_t b = static_cast<size_t>(normalize_dim(d1, dim(), "transpose"));
  Shape shape = this->shape();
  Strides strides = this->strides();
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  Tensor out = make_view(*this, offset(), shape, strides);
  record_view("TransposeBackward", *this, out,
              [a, b](const Tensor& g) { return g.transpose(static_cast<int64_t>(a), static_cast<int64_t>(b)); });
  return out;
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  const int64_t nd = dim();
  STRATA_CHECK(static_cast<int64_t>(order.size()) == nd, "permute: order has ", order.size(),
               " entries for a tensor of ", nd, " dimensions");
  std::vector<int64_t> norm(order.size());
  std::vector<bool> seen(order.size(), false);
  Shape shape;
  Strides strides;
  for (size_t i = 0; i < order.size(); ++i) {
    norm[i] = normalize_dim(order[i], nd, "permute");
    STRATA_CHECK(!seen[static_cast<size_t>(norm[i])], "permute: dimension ", order[i], " repeated");
    seen[static_cast<size_t>(norm[i])] = true;
    shape.push_back(this->shape()[static_cast<size_t>(norm[i])]);
    strides.push_back(this->strides()[static_cast<size_t>(norm[i])]);
  }
  Tensor out = make_view(*this, offset(), shape, strides);
  std::vector<int64_t> inverse(norm.size());
  for (size_t i = 0; i < norm.size(); ++i) inverse[static_cast<size_t>(norm[i])] = static_cast<int64_t>(i);
  record_view("PermuteBackward", *this, out, [inverse](const Tensor& g) { return g.permute(inverse); });
  return out;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const size_t at = static_cast<size_t>(normalize_dim(d, dim() + 1, "unsqueeze"));
  Shape shape = this->shape();
  Strides strides = this->strides();
  int64_t stride = at < shape.size() ? strides[at] * shape[at] : 1;
  shape.insert(at, 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(at), stride);
  Tensor out = make_view(*this, offset(), shape, strides);
  record_view("UnsqueezeBackward", *this, out, [at](const Tensor& g) { return g.squeeze(static_cast<int64_t>(at)); });
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  const size_t at = static_cast<size_t>(normalize_dim(d, dim(), "squeeze"));
  if (shape()[at] != 1) return *this;  // like torch: squeezing a non-1 dimension is a no-op
  Shape shape = this->shape();
  Strides strides = this->strides();
  shape.erase(at);
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(at));
  Tensor out = make_view(*this, offset(), shape, strides);
  record_view("SqueezeBackward", *this, out, [at](const Tensor& g) { return g.unsqueeze(static_cast<int64_t>(at)); });
  return out;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const size_t s = static_cast<size_t>(normalize_dim(start_dim, dim(), "flatten"));
  const size_t e = static_cast<size_t>(normalize_dim(end_dim, dim(), "flatten"));
  STRATA_CHECK(s <= e, "flatten: start_dim ", start_dim, " is after end_dim ", end_dim);
  Shape shape;
  int64_t merged = 1;
  for (size_t i = 0; i < this->shape().size(); ++i) {
    if (i < s || i > e) {
      shape.push_back(this->shape()[i]);
    } else {
      merged *= this->shape()[i];
      if (i == e) shape.push_back(merged);
    }
  }
  return reshape(shape);
}

Tensor Tensor::expand(const Shape& target) const {
  STRATA_CHECK(target.size() >= shape().size(), "expand: target ", target, " has fewer dimensions than ", shape());
  const size_t lead = target.size() - shape().size();
  Strides strides(target.size(), 0);
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) continue;
    int64_t have = shape()[i - lead];
    STRATA_CHECK(have == target[i] || have == 1, "expand: cannot expand shape ", shape(), " to ", target,
                 " (dimension ", i, ")");
    strides[i] = have == target[i] ? this->strides()[i - lead] : 0;
  }
  Tensor out = make_view(*this, offset(), target, strides);
  Shape in_shape = shape();
  record_view("ExpandBackward", *this, out, [in_shape](const Tensor& g) { return sum_to(g, in_shape); });
  return out;
}

}  // namespace strata
