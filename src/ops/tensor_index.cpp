// Tensor::index and Tensor::index_put_ (strata/tensor/tensor_index.h). The basic indices
// (integers, slices, None, Ellipsis) become a view of the tensor; the advanced ones (integer
// and Bool tensors) then pick rows of that view with its indexed dimensions flattened into
// one: index_select on the CPU, embedding's row lookup on CUDA, both differentiable.
// Index values are checked on the host, so a CUDA index costs one copy to the host.
#include "strata/tensor/tensor_index.h"

#include <algorithm>
#include <numeric>

#include "backend/dispatch/device_dispatch.h"
#include "ops/in_place.h"
#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/ops/compare.h"
#include "strata/ops/indexing.h"
#include "strata/ops/nn_functional.h"
#include "strata/ops/reduce.h"
#include "strata/ops/shape_ops.h"
#include "strata/tensor/factory.h"

namespace strata {
namespace {

using indexing::TensorIndex;
using Kind = TensorIndex::Kind;

// The tensor after its basic indices, and the advanced indices still to apply to it.
struct IndexPlan {
  Tensor view;
  std::vector<int64_t> adv_dims;  // dimensions of `view` indexed by tensors, ascending
  std::vector<Tensor> adv_index;  // one per adv_dims entry: int64 on the host, in [0, size)
};

int64_t dims_named(const TensorIndex& ix) {
  switch (ix.kind()) {
    case Kind::Integer:
    case Kind::Slice: return 1;
    case Kind::Tensor: return ix.tensor().dtype() == DType::Bool ? ix.tensor().dim() : 1;
    case Kind::None:
    case Kind::Ellipsis: return 0;
  }
  return 0;
}

// An integer index tensor on the host as int64 in [0, size), checked against the size.
Tensor checked_index(const char* op, const Tensor& t, int64_t dim, int64_t size, const Shape& x_shape) {
  std::vector<int64_t> v = t.to_vector<int64_t>();
  for (int64_t& i : v) {
    STRATA_CHECK(i >= -size && i < size, op, ": index ", i, " is out of range for dimension ", dim, " with size ", size,
                 " (tensor of shape ", x_shape, ")");
    if (i < 0) i += size;
  }
  return from_vector(v, t.shape());
}

// The true positions of a Bool mask, as one int64 host tensor per mask dimension.
std::vector<Tensor> mask_positions(const Tensor& mask) {
  const std::vector<int64_t> m = mask.to_vector<int64_t>();
  const Strides strides = contiguous_strides(mask.shape());
  std::vector<std::vector<int64_t>> pos(static_cast<size_t>(mask.dim()));
  for (size_t flat = 0; flat < m.size(); ++flat) {
    if (m[flat] == 0) continue;
    auto rem = static_cast<int64_t>(flat);
    for (size_t d = 0; d < pos.size(); ++d) {
      pos[d].push_back(rem / strides[d]);
      rem %= strides[d];
    }
  }
  std::vector<Tensor> out;
  for (auto& p : pos) {
    const auto n = static_cast<int64_t>(p.size());
    out.push_back(from_vector(p, {n}));
  }
  return out;
}

void add_tensor_index(const char* op, const Tensor& t, IndexPlan& plan, int64_t& cur, int64_t& src,
                      const Shape& x_shape) {
  STRATA_CHECK(t.defined(), op, ": an index tensor is undefined");
  if (t.dtype() == DType::Bool) {
    STRATA_CHECK(t.dim() >= 1, op, ": a 0-d Bool index is not supported (tensor of shape ", x_shape, ")");
    for (int64_t j = 0; j < t.dim(); ++j) {
      STRATA_CHECK(t.size(j) == plan.view.size(cur + j), op, ": the Bool mask of shape ", t.shape(),
                   " does not match the indexed tensor (shape ", x_shape, ") at dimension ", src + j, ": mask size ",
                   t.size(j), ", tensor size ", plan.view.size(cur + j));
    }
    std::vector<Tensor> positions = mask_positions(t);
    for (size_t j = 0; j < positions.size(); ++j) {
      plan.adv_dims.push_back(cur++);
      plan.adv_index.push_back(positions[j]);
    }
    src += t.dim();
    return;
  }
  STRATA_CHECK(t.dtype() == DType::Int64 || t.dtype() == DType::Int32, op, ": an index tensor must be int64, int32 or ",
               "bool, got ", t.dtype(), " (index shape ", t.shape(), ")");
  plan.adv_index.push_back(checked_index(op, t, src, plan.view.size(cur), x_shape));
  plan.adv_dims.push_back(cur++);
  ++src;
}

IndexPlan plan_index(const char* op, const Tensor& x, const std::vector<TensorIndex>& indices) {
  int64_t named = 0, ellipses = 0;
  for (const TensorIndex& ix : indices) {
    named += dims_named(ix);
    ellipses += ix.kind() == Kind::Ellipsis ? 1 : 0;
  }
  STRATA_CHECK(ellipses <= 1, op, ": an index may hold one Ellipsis, got ", ellipses);
  STRATA_CHECK(named <= x.dim(), op, ": too many indices for a tensor of dimension ", x.dim(), " (shape ", x.shape(),
               "): the index names ", named, " dimensions");
  IndexPlan plan{x, {}, {}};
  int64_t cur = 0, src = 0;  // the next dimension of plan.view, and of x (for messages)
  for (const TensorIndex& ix : indices) {
    switch (ix.kind()) {
      case Kind::None: plan.view = plan.view.unsqueeze(cur++); break;
      case Kind::Ellipsis:
        cur += x.dim() - named;
        src += x.dim() - named;
        break;
      case Kind::Integer: {
        const int64_t size = plan.view.size(cur), i = ix.integer();
        STRATA_CHECK(i >= -size && i < size, op, ": index ", i, " is out of range for dimension ", src, " with size ",
                     size, " (tensor of shape ", x.shape(), ")");
        plan.view = plan.view.select(cur, i);
        ++src;
        break;
      }
      case Kind::Slice: {
        const indexing::Slice& s = ix.slice();
        STRATA_CHECK(s.step.value_or(1) > 0, op, ": slice step ", s.step.value_or(1), " at dimension ", src,
                     " must be positive");
        plan.view = plan.view.slice(cur++, s.start, s.stop, s.step.value_or(1));
        ++src;
        break;
      }
      case Kind::Tensor: add_tensor_index(op, ix.tensor(), plan, cur, src, x.shape()); break;
    }
  }
  return plan;
}

// How the advanced indices address the view: its indexed dimensions first (perm), flattened
// into `rows` rows of the remaining dimensions (`rest`); `linear` (int64, host, shape
// `broadcast`) is the row of each result entry. The broadcast dimensions stand at
// `insert_at` of the result: where the indexed dimensions were when adjacent, else first.
struct AdvancedLayout {
  Shape broadcast;
  Tensor linear;
  std::vector<int64_t> perm;
  Shape rest;
  int64_t rows = 1;
  int64_t insert_at = 0;

  int64_t row_size() const { return rest.numel(); }
  Shape result_shape() const {
    Shape out;
    for (size_t i = 0; i < rest.size(); ++i) {
      if (static_cast<int64_t>(i) == insert_at)
        for (int64_t b : broadcast) out.push_back(b);
      out.push_back(rest[i]);
    }
    if (insert_at == static_cast<int64_t>(rest.size()))
      for (int64_t b : broadcast) out.push_back(b);
    return out;
  }
  // Result dimensions in the order broadcast + rest (identity when insert_at is 0).
  std::vector<int64_t> to_broadcast_first() const {
    const auto nb = static_cast<int64_t>(broadcast.size()), total = nb + static_cast<int64_t>(rest.size());
    std::vector<int64_t> order;
    for (int64_t i = 0; i < nb; ++i) order.push_back(insert_at + i);
    for (int64_t i = 0; i < total; ++i)
      if (i < insert_at || i >= insert_at + nb) order.push_back(i);
    return order;
  }
};

AdvancedLayout advanced_layout(const char* op, const IndexPlan& plan) {
  AdvancedLayout lay;
  for (const Tensor& t : plan.adv_index) lay.broadcast = broadcast_shapes(lay.broadcast, t.shape(), op);
  std::vector<int64_t> linear(static_cast<size_t>(lay.broadcast.numel()), 0);
  for (size_t k = 0; k < plan.adv_index.size(); ++k) {
    const int64_t size = plan.view.size(plan.adv_dims[k]);
    const std::vector<int64_t> e = plan.adv_index[k].expand(lay.broadcast).to_vector<int64_t>();
    for (size_t j = 0; j < linear.size(); ++j) linear[j] = linear[j] * size + e[j];
    lay.rows *= size;
    lay.perm.push_back(plan.adv_dims[k]);
  }
  lay.linear = from_vector(linear, lay.broadcast);
  for (int64_t d = 0; d < plan.view.dim(); ++d) {
    if (std::find(plan.adv_dims.begin(), plan.adv_dims.end(), d) != plan.adv_dims.end()) continue;
    lay.perm.push_back(d);
    lay.rest.push_back(plan.view.size(d));
  }
  const bool adjacent = plan.adv_dims.back() - plan.adv_dims.front() + 1 == static_cast<int64_t>(plan.adv_dims.size());
  lay.insert_at = adjacent ? plan.adv_dims.front() : 0;
  return lay;
}

// Rows `index` (int64, 1-D, on table's device) of a [rows, R] table; differentiable.
Tensor take_rows(const Tensor& table, const Tensor& index) {
  if (table.device().is_cpu()) return index_select(table, 0, index);
  return embedding(index, table);  // CUDA's row lookup (floating dtypes)
}

Tensor gather_advanced(const char* op, const IndexPlan& plan) {
  const AdvancedLayout lay = advanced_layout(op, plan);
  Tensor table = plan.view.permute(lay.perm).reshape({lay.rows, lay.row_size()});
  Tensor lin = lay.linear.reshape({lay.linear.numel()}).to(table.device());
  Shape gathered = lay.broadcast;
  for (int64_t r : lay.rest) gathered.push_back(r);
  Tensor out = take_rows(table, lin).reshape(gathered);
  if (lay.insert_at == 0) return out;
  std::vector<int64_t> order = lay.to_broadcast_first(), inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return out.permute(inverse);
}

// `value` broadcast to `shape` (leading size-1 dimensions beyond its rank dropped, as torch).
Tensor broadcast_value(const Tensor& value, const Shape& shape) {
  Tensor v = value;
  while (v.dim() > static_cast<int64_t>(shape.size()) && v.size(0) == 1) v = v.squeeze(0);
  bool fits = v.dim() <= static_cast<int64_t>(shape.size());
  for (int64_t i = 1; fits && i <= v.dim(); ++i) {
    const int64_t have = v.size(-i), want = shape[shape.size() - static_cast<size_t>(i)];
    fits = have == want || have == 1;
  }
  STRATA_CHECK(fits, "index_put_: value of shape ", value.shape(), " cannot be broadcast to the indexed shape ", shape);
  return v.expand(shape);
}

// Writes the advanced-indexed entries of plan.view (a view of the destination): each row
// takes its last writer's values, the others keep theirs.
void put_advanced(const IndexPlan& plan, const Tensor& value) {
  const AdvancedLayout lay = advanced_layout("index_put_", plan);
  const int64_t m = lay.linear.numel(), r = lay.row_size();
  const Device device = plan.view.device();
  Tensor rows = broadcast_value(value, lay.result_shape()).permute(lay.to_broadcast_first()).reshape({m, r});
  std::vector<int64_t> source(static_cast<size_t>(lay.rows), m);  // m: no writer
  const std::vector<int64_t> lin = lay.linear.to_vector<int64_t>();
  for (size_t j = 0; j < lin.size(); ++j) source[static_cast<size_t>(lin[j])] = static_cast<int64_t>(j);
  Tensor src = from_vector(source, {lay.rows}).to(device);
  Tensor padded = cat({rows, zeros({1, r}, {.dtype = value.dtype(), .device = device})}, 0);
  Tensor target = plan.view.permute(lay.perm);
  Tensor updated = where(lt(src, static_cast<double>(m)).reshape({lay.rows, 1}), take_rows(padded, src),
                         target.reshape({lay.rows, r}));
  target.copy_(updated.reshape(target.shape()));
}

// The index with its tensors copied, so a backward reads them as they were.
std::vector<TensorIndex> frozen(const std::vector<TensorIndex>& indices) {
  std::vector<TensorIndex> out;
  out.reserve(indices.size());
  for (const TensorIndex& ix : indices)
    out.push_back(ix.kind() == Kind::Tensor ? TensorIndex(ix.tensor().detach().clone()) : ix);
  return out;
}

}  // namespace

Tensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  IndexPlan plan = plan_index("index", *this, indices);
  if (plan.adv_dims.empty()) return plan.view;
  return gather_advanced("index", plan);
}

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& value) {
  STRATA_CHECK(defined(), "index_put_: the tensor written is undefined");
  STRATA_CHECK(value.defined(), "index_put_: value is undefined");
  STRATA_CHECK(value.dtype() == dtype(), "index_put_: value has dtype ", value.dtype(), " but the tensor (shape ",
               shape(), ") has ", dtype(), "; convert it with .to()");
  detail::common_device("index_put_", {{"tensor", *this}, {"value", value}});
  const bool record = autograd::needs_grad({*this, value});
  if (record) detail::check_in_place_recordable("index_put_", *this);
  const Tensor before = detail::history_handle(*this);
  {
    NoGradGuard no_grad;
    // A value sharing this memory is read before the write starts.
    Tensor v = value.storage() == storage() ? value.clone() : value.detach();
    IndexPlan plan = plan_index("index_put_", detach(), indices);
    if (plan.adv_dims.empty()) {
      plan.view.copy_(broadcast_value(v, plan.view.shape()));  // bumps the version
    } else {
      put_advanced(plan, v);
    }
  }
  if (record) {
    detail::clear_history(*this);
    autograd::record("IndexPutBackward", {before, value}, {*this}, {},
                     [ix = frozen(indices), value_shape = value.shape()](autograd::BackwardContext& ctx) {
                       NoGradGuard no_grad;
                       std::vector<Tensor> grads(2);
                       if (ctx.needs(0)) grads[0] = ctx.grad().clone().index_put_(ix, 0.0);
                       if (ctx.needs(1)) grads[1] = sum_to(ctx.grad().index(ix), value_shape);
                       return grads;
                     });
  }
  return *this;
}

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, double value) {
  STRATA_CHECK(defined(), "index_put_: the tensor written is undefined");
  return index_put_(indices, scalar_tensor(value, {.dtype = dtype(), .device = device()}));
}

}  // namespace strata
