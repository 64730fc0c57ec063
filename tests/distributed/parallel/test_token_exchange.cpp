// parallel::all_to_all_v (expert parallelism's dispatch and combine) on 2 and 4 ranks: the
// forward rows and the gradient equal a single-process reference that moves the same rows
// with narrow and cat (float64, exact: every value only moves or is multiplied once).
#include "distributed/dist_test_util.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/reduce.h"
#include "strata/ops/shape_ops.h"
#include "strata/parallel/token_exchange.h"

namespace strata {
namespace {

using Splits = std::vector<int64_t>;
constexpr int64_t kWidth = 3;

// Rows rank `src` dispatches to rank `dst`: rank 0 sends none, the last rank receives none.
int64_t rows_between(int src, int dst, int n) {
  if (src == 0 || dst == n - 1) return 0;
  return 1 + (src + 2 * dst) % 3;
}

Splits sends_of(int src, int n) {
  Splits s;
  for (int d = 0; d < n; ++d) s.push_back(rows_between(src, d, n));
  return s;
}

int64_t total(const Splits& s) {
  int64_t t = 0;
  for (int64_t x : s) t += x;
  return t;
}

// Rank r's tokens, distinct across ranks.
Tensor tokens_of(int r, int n) {
  const int64_t rows = total(sends_of(r, n));
  std::vector<double> v;
  for (int64_t i = 0; i < rows * kWidth; ++i) v.push_back(100.0 * r + static_cast<double>(i) + 0.5);
  return from_vector(v, {rows, kWidth});
}

// A per-element weight for rank r's received rows (the "expert" work), and for the rows
// combined back to it: distinct values make every gradient entry tell where its row went.
Tensor weights(int r, int64_t rows, double base) {
  std::vector<double> v;
  for (int64_t i = 0; i < rows * kWidth; ++i) v.push_back(base + 10.0 * r + 0.25 * static_cast<double>(i));
  return from_vector(v, {rows, kWidth});
}

// The rows rank `dst` receives, gathered from every rank's tokens in rank order.
Tensor dispatched_to(int dst, int n, const std::vector<Tensor>& xs) {
  std::vector<Tensor> parts;
  for (int src = 0; src < n; ++src) {
    int64_t start = 0;
    for (int d = 0; d < dst; ++d) start += rows_between(src, d, n);
    const int64_t rows = rows_between(src, dst, n);
    if (rows > 0) parts.push_back(xs[static_cast<size_t>(src)].narrow(0, start, rows));
  }
  if (parts.empty()) return zeros({0, kWidth}, {.dtype = DType::Float64});
  return cat(parts, 0);
}

// Dispatch, an elementwise "expert" per rank, combine back, a weighted loss: the loss and
// every gradient of the one-process reference, against the exchange's.
TEST(DistTokenExchange, DispatchAndCombineMatchTheSingleProcessReference) {
  auto& w = dist::world();
  const int n = w.size(), me = w.rank();
  const Splits in_splits = sends_of(me, n);

  // Reference: every rank's tokens in one process.
  std::vector<Tensor> xs;
  xs.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) xs.push_back(tokens_of(r, n).set_requires_grad(true));
  Tensor ref_loss = scalar_tensor(0.0, {.dtype = DType::Float64});
  std::vector<Tensor> ref_received;
  ref_received.reserve(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) ref_received.push_back(dispatched_to(d, n, xs));
  // Combine in the reference: each rank's expert output, row for row, back where it came
  // from; the loss weighs the rows as they return, so the gradient crosses both exchanges.
  for (int d = 0; d < n; ++d) {
    const Tensor& recv = ref_received[static_cast<size_t>(d)];
    if (recv.size(0) > 0)
      ref_loss = ref_loss + sum(recv * weights(d, recv.size(0), 1.0) * weights(d, recv.size(0), 2.0));
  }
  ref_loss.backward();

  Tensor x = tokens_of(me, n).set_requires_grad(true);
  Splits out_splits;
  w.reset_stats();
  parallel::reset_token_exchange_stats();
  Tensor received = parallel::all_to_all_v(x, w, in_splits, &out_splits);
  EXPECT_EQ(received.to_vector<double>(), ref_received[static_cast<size_t>(me)].detach().to_vector<double>());
  const int64_t rows = received.size(0);
  Tensor expert_out = received * weights(me, rows, 1.0);
  Tensor back = parallel::all_to_all_v(expert_out, w, out_splits, in_splits);
  ASSERT_EQ(back.shape(), x.shape());
  // The combined rows are this rank's own tokens times the weight where each row was worked on.
  // Weigh them with the reference's second weight, which lives on the expert's rank: bring it back too.
  Tensor w2_back = parallel::all_to_all_v(weights(me, rows, 2.0), w, out_splits, in_splits);
  Tensor loss = sum(back * w2_back);
  loss.backward();
  if (x.size(0) > 0) {
    EXPECT_EQ(x.grad().to_vector<double>(), xs[static_cast<size_t>(me)].grad().to_vector<double>());
  } else {  // rank 0 sends no tokens
    EXPECT_TRUE(!x.grad().defined() || x.grad().numel() == 0);
  }
  // Byte counts from the routing counts alone. Forward: dispatch sends `sent` rows, the two
  // combines `got` each; backward (the weights need none): combine's sends `sent` back,
  // dispatch's `got`. Received: the same exchanges seen from the other side.
  const uint64_t row_bytes = kWidth * sizeof(double);
  const dist::CommStats s = w.stats();
  EXPECT_EQ(s.at(dist::OpType::AllToAllV).calls, 5u);
  const auto sent = static_cast<uint64_t>(total(in_splits)), got = static_cast<uint64_t>(total(out_splits));
  EXPECT_EQ(s.at(dist::OpType::AllToAllV).bytes, (2 * sent + 3 * got) * row_bytes);
  EXPECT_EQ(s.at(dist::OpType::AllToAllV).received_bytes, (3 * sent + 2 * got) * row_bytes);
  EXPECT_EQ(s.at(dist::OpType::AllToAll).calls, 1u);  // the split sizes, once
  // The exchange's own counters agree with the group's, and timed every call.
  const parallel::TokenExchangeStats t = parallel::token_exchange_stats();
  EXPECT_EQ(t.calls, 5);
  EXPECT_EQ(static_cast<uint64_t>(t.bytes_sent), s.at(dist::OpType::AllToAllV).bytes);
  EXPECT_EQ(static_cast<uint64_t>(t.bytes_received), s.at(dist::OpType::AllToAllV).received_bytes);
  EXPECT_GT(t.seconds, 0.0);
}

}  // namespace
}  // namespace strata
