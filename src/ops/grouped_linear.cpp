// grouped_linear (strata/ops/linalg.h): argument checks, autocast, the device switch and
// autograd of a product per group of rows. Each of its three products (the output, the input
// gradient, the weight gradients) is one cuBLAS grouped GEMM on CUDA (cuda/grouped_matmul)
// and, on the CPU or where cuBLAS refuses, a loop over the groups of the very calls linear
// makes (products.h): the loop is what the CPU tests check, group by group, against linear.
#include <numeric>
#include <optional>

#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"
#include "ops/nn_common.h"
#include "ops/products.h"
#include "strata/autograd/function.h"
#include "strata/ops/linalg.h"
#include "strata/ops/shape_ops.h"
#include "strata/tensor/factory.h"

namespace strata {
namespace {

using namespace products;  // NOLINT(google-build-using-namespace): the shared product helpers

constexpr const char* kOp = "grouped_linear";

// The groups that have rows: their row counts and operands, in group order.
struct Groups {
  std::vector<int64_t> rows;
  std::vector<Tensor> weights;  // the parameters, as given (autograd inputs)
  std::vector<size_t> index;    // each one's position in the caller's lists
};

Groups check_groups(const Tensor& x, const std::vector<int64_t>& rows, const std::vector<Tensor>& weights,
                    const CastOpt& cast) {
  check_operand(x, kOp, "input", cast);
  STRATA_CHECK(x.dim() == 2, kOp, ": input must be [rows, in], got shape ", x.shape());
  STRATA_CHECK(rows.size() == weights.size(), kOp, ": ", rows.size(), " row counts for ", weights.size(),
               " weights (one count per weight)");
  STRATA_CHECK(!weights.empty(), kOp, ": no weights (at least one group is needed)");
  const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  STRATA_CHECK(total == x.size(0), kOp, ": the row counts sum to ", total, " but input ", x.shape(), " has ", x.size(0),
               " rows");
  Groups g;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& w = weights[i];
    STRATA_CHECK(w.defined(), kOp, ": weight ", i, " is undefined");
    STRATA_CHECK(rows[i] >= 0, kOp, ": group ", i, " has ", rows[i], " rows (a count must be non-negative)");
    STRATA_CHECK(w.dim() == 2 && w.size(1) == x.size(1) && w.size(0) == weights[0].size(0), kOp, ": weight ", i,
                 " has shape ", w.shape(), "; every weight must be [out, ", x.size(1),
                 "] with out = ", weights[0].size(0), " (weight 0's)");
    STRATA_CHECK(w.dtype() == weights[0].dtype(), kOp, ": weight ", i, " has dtype ", w.dtype(), " but weight 0 has ",
                 weights[0].dtype());
    if (!cast) detail::check_param(w, x.dtype(), kOp, "weight");
    detail::common_device(kOp, {{"input", x}, {"weight", w}});
    if (rows[i] == 0) continue;
    g.rows.push_back(rows[i]);
    g.weights.push_back(w);
    g.index.push_back(i);
  }
  return g;
}

// The cast's 16-bit result kept 16-bit: the loop rounds once per group and scoped_result
// converts the whole output once.
CastOpt raw16(const CastOpt& cast) { return cast ? CastOpt(Cast{cast->dtype, true}) : cast; }

// out [S, n]: rows of group g = a_g @ b_g^T (transpose) or a_g @ b_g, where b_g is [n, k]
// or [k, n]. Operands already in the compute dtype; 16-bit under a cast, without scoped_result.
Tensor rows_product(const Tensor& a, const std::vector<int64_t>& rows, const std::vector<Tensor>& b, bool transpose,
                    int64_t n, const CastOpt& cast) {
  if (a.device().is_cuda() && !rows.empty()) {
    std::optional<Tensor> out = cuda_ops::grouped_matmul(a.contiguous(), rows, b, transpose, kOp);
    if (out) return *out;
  }
  std::vector<Tensor> parts;
  int64_t first = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    const Tensor ag = a.narrow(0, first, rows[g]);
    const Tensor bg = transpose ? b[g].transpose(0, 1) : b[g];
    parts.push_back(cast ? bmm16(kOp, ag, bg, {}, {}, *raw16(cast)) : bmm(kOp, ag, bg, {}));
    first += rows[g];
  }
  if (parts.empty()) return empty({0, n}, {.dtype = cast ? cast->dtype : a.dtype(), .device = a.device()});
  return parts.size() == 1 ? parts.front() : cat(parts, 0);
}

// Per group: g_g^T @ x_g ([n, k]), the weight gradients; 16-bit under a cast.
std::vector<Tensor> weight_products(const Tensor& g, const Tensor& x, const std::vector<int64_t>& rows,
                                    const CastOpt& cast) {
  if (g.device().is_cuda() && !rows.empty()) {
    std::optional<std::vector<Tensor>> out = cuda_ops::grouped_weight_grads(g.contiguous(), x.contiguous(), rows, kOp);
    if (out) return *out;
  }
  std::vector<Tensor> out;
  int64_t first = 0;
  for (int64_t r : rows) {
    const Tensor gt = g.narrow(0, first, r).transpose(0, 1), xg = x.narrow(0, first, r);
    out.push_back(cast ? bmm_sum16(kOp, gt, xg, *raw16(cast)) : bmm_sum(kOp, gt, xg));
    first += r;
  }
  return out;
}

// The weights as the products read them (compute_values, or the scope's 16-bit operands).
std::vector<Tensor> weight_operands(const std::vector<Tensor>& weights, DType compute, const CastOpt& cast) {
  std::vector<Tensor> out;
  out.reserve(weights.size());
  for (const Tensor& w : weights)
    out.push_back(cast ? detail::autocast_operand(w, cast->dtype) : compute_values(w, compute));
  return out;
}

void record_backward(const Tensor& x, const Tensor& a, const Groups& groups, DType wdt, const Tensor& out,
                     const CastOpt& cast) {
  std::vector<Tensor> inputs{x};
  inputs.insert(inputs.end(), groups.weights.begin(), groups.weights.end());
  if (!autograd::needs_grad(inputs)) return;
  // Saved: the input as the products read it, and the weights (16-bit operands under a
  // cast; else detached, their compute values made again in backward as linear does).
  std::vector<Tensor> w_saved;
  for (const Tensor& w : cast ? weight_operands(groups.weights, x.dtype(), cast) : groups.weights)
    w_saved.push_back(w.detach());
  std::vector<autograd::SavedTensor> saved{a};
  saved.insert(saved.end(), w_saved.begin(), w_saved.end());
  autograd::record("GroupedLinearBackward", inputs, {out}, std::move(saved),
                   [a, w_saved, rows = groups.rows, cast, xdt = x.dtype(), wdt](autograd::BackwardContext& ctx) {
                     const Tensor g = cast ? detail::autocast_operand(ctx.grad(), cast->dtype) : ctx.grad();
                     std::vector<Tensor> grads(w_saved.size() + 1);
                     if (ctx.needs(0)) {
                       const std::vector<Tensor> w = cast ? w_saved : weight_operands(w_saved, xdt, std::nullopt);
                       const Tensor gx = rows_product(g, rows, w, false, a.size(1), cast);
                       grads[0] = cast ? in_dtype(gx, xdt) : gx;
                     }
                     bool any_weight = false;
                     for (size_t i = 1; i < grads.size(); ++i) any_weight = any_weight || ctx.needs(i);
                     if (!any_weight) return grads;
                     std::vector<Tensor> gw = weight_products(g, a, rows, cast);
                     for (size_t i = 1; i < grads.size(); ++i) {
                       if (!ctx.needs(i)) continue;
                       grads[i] = cast ? in_dtype(gw[i - 1], wdt) : detail::param_grad(gw[i - 1], wdt);
                     }
                     return grads;
                   });
}

}  // namespace

Tensor grouped_linear(const Tensor& x, const std::vector<int64_t>& rows, const std::vector<Tensor>& weights) {
  std::vector<Tensor> operands{x};
  operands.insert(operands.end(), weights.begin(), weights.end());
  const CastOpt cast = autocast_for(operands);
  const Groups groups = check_groups(x, rows, weights, cast);
  const Tensor a = cast ? detail::autocast_operand(x, cast->dtype) : x.detach();
  profiler::Scope scope(kOp, x.device());
  Tensor out = rows_product(a, groups.rows, weight_operands(groups.weights, x.dtype(), cast), true,
                            weights.front().size(0), cast);
  if (cast) out = scoped_result(out, *cast);
  record_backward(x, a, groups, weights.front().dtype(), out, cast);
  return out;
}

}  // namespace strata
