#include "strata/parallel/token_exchange.h"

#include <chrono>

#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/distributed/split_exchange.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

thread_local TokenExchangeStats stats;

}  // namespace

Tensor all_to_all_v_rows(const Tensor& x, dist::ProcessGroup& group, std::span<const int64_t> in_splits,
                         std::span<const int64_t> out_splits) {
  NoGradGuard no_grad;  // the collective itself; all_to_all_v records its transpose
  STRATA_CHECK(x.defined(), "parallel::all_to_all_v on group '", group.name(), "': x is an undefined tensor");
  STRATA_CHECK(x.dim() >= 1, "parallel::all_to_all_v on group '", group.name(), "': x of shape ", x.shape(),
               " needs a dim 0 of rows (give a scalar the shape [1])");
  Shape shape = x.shape();
  // The front door checks the splits (length, signs, sums) before any communication; a
  // negative split must not reach the shape first.
  int64_t rows = 0;
  for (int64_t s : out_splits) rows += s > 0 ? s : 0;
  shape[0] = rows;
  Tensor out = empty(shape, {.dtype = x.dtype(), .device = x.device()});
  const auto start = std::chrono::steady_clock::now();
  group.all_to_all_v(out, x.contiguous(), out_splits, in_splits)->wait();
  stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++stats.calls;
  stats.bytes_sent += static_cast<int64_t>(x.nbytes());
  stats.bytes_received += static_cast<int64_t>(out.nbytes());
  return out;
}

Tensor all_to_all_v(const Tensor& x, dist::ProcessGroup& group, std::span<const int64_t> in_splits,
                    std::span<const int64_t> out_splits) {
  Tensor out = all_to_all_v_rows(x, group, in_splits, out_splits);
  if (autograd::needs_grad({x})) {
    // The gradient's rows retrace the forward's: what came from rank i goes back to rank i.
    std::vector<int64_t> back_in(out_splits.begin(), out_splits.end());
    std::vector<int64_t> back_out(in_splits.begin(), in_splits.end());
    autograd::record("AllToAllVBackward", {x}, {out}, {}, [&group, back_in, back_out](autograd::BackwardContext& ctx) {
      return std::vector<Tensor>{all_to_all_v_rows(ctx.grad(), group, back_in, back_out)};
    });
  }
  return out;
}

Tensor all_to_all_v(const Tensor& x, dist::ProcessGroup& group, std::span<const int64_t> in_splits,
                    std::vector<int64_t>* out_splits) {
  std::vector<int64_t> received = dist::exchange_split_sizes(group, in_splits);
  Tensor out = all_to_all_v(x, group, in_splits, received);
  if (out_splits) *out_splits = std::move(received);
  return out;
}

TokenExchangeStats token_exchange_stats() { return stats; }
void reset_token_exchange_stats() { stats = {}; }

}  // namespace strata::parallel
