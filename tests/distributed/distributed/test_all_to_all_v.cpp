// ProcessGroup::all_to_all_v over MPI on 2 and 4 ranks: uneven splits with a rank that sends
// nothing (rank 0) and one that receives nothing (the last), every moving dtype, rows of
// several dims, exact byte counts, the split-size exchange, bad splits refused before any
// communication, splits that disagree across ranks, and a rank that never joins named by
// the others' timeout.
#include <chrono>
#include <numeric>

#include "distributed/dist_test_util.h"
#include "strata/distributed/split_exchange.h"

namespace strata {
namespace {

using test::error_of;
using test::expect_contains;
using Splits = std::vector<int64_t>;

// Rows rank `src` sends rank `dst` (of n): rank 0 sends none, rank n-1 receives none, the
// others 1 to 3 rows, some zero-size pairs among them for n = 4.
int64_t rows_between(int src, int dst, int n) {
  if (src == 0 || dst == n - 1) return 0;
  return (src * 3 + dst) % 4;
}

Splits in_splits_of(int rank, int n) {
  Splits s;
  for (int d = 0; d < n; ++d) s.push_back(rows_between(rank, d, n));
  return s;
}

Splits out_splits_of(int rank, int n) {
  Splits s;
  for (int src = 0; src < n; ++src) s.push_back(rows_between(src, rank, n));
  return s;
}

int64_t total(const Splits& s) {
  int64_t t = 0;
  for (int64_t x : s) t += x;
  return t;
}

// Element j of row k of the block src -> dst: small integers, exact in every dtype (bf16
// included: at most 8 significant bits for rows of up to 3 elements).
double value(int src, int dst, int64_t k, int64_t j) { return 64.0 * j + 16 * src + 4 * dst + k; }

// The rows this rank sends (blocks for rank 0, 1, ... in order), or expects to receive.
Tensor block_rows(int me, int n, bool sending, int64_t row_elems) {
  std::vector<double> v;
  for (int peer = 0; peer < n; ++peer) {
    const int src = sending ? me : peer, dst = sending ? peer : me;
    for (int64_t k = 0; k < rows_between(src, dst, n); ++k)
      for (int64_t j = 0; j < row_elems; ++j) v.push_back(value(src, dst, k, j));
  }
  return from_vector(v, {static_cast<int64_t>(v.size())});
}

void exchange_and_check(DType dtype, const Shape& row) {
  auto& w = dist::world();
  const int n = w.size(), me = w.rank();
  const Splits in_splits = in_splits_of(me, n), out_splits = out_splits_of(me, n);
  int64_t row_elems = 1;
  Shape in_shape{total(in_splits)}, out_shape{total(out_splits)};
  for (int64_t d : row) {
    row_elems *= d;
    in_shape.push_back(d);
    out_shape.push_back(d);
  }
  const Tensor in = block_rows(me, n, true, row_elems).to(dtype).view(in_shape);
  Tensor out = full(out_shape, -1.0, {.dtype = dtype});
  w.reset_stats();
  w.all_to_all_v(out, in, out_splits, in_splits)->wait();
  const Tensor expected = block_rows(me, n, false, row_elems);
  EXPECT_EQ(out.to(DType::Float64).to_vector<double>(), expected.to_vector<double>()) << dtype;
  const dist::CommStats s = w.stats();
  const uint64_t row_bytes = static_cast<uint64_t>(row_elems) * dtype_size(dtype);
  ASSERT_EQ(s.count(dist::OpType::AllToAllV), 1u);
  EXPECT_EQ(s.at(dist::OpType::AllToAllV).calls, 1u);
  EXPECT_EQ(s.at(dist::OpType::AllToAllV).bytes, static_cast<uint64_t>(total(in_splits)) * row_bytes) << dtype;
  EXPECT_EQ(s.at(dist::OpType::AllToAllV).received_bytes, static_cast<uint64_t>(total(out_splits)) * row_bytes)
      << dtype;
}

TEST(DistAllToAllV, UnevenAndZeroSplitsInEveryDtype) {
  for (DType d : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16, DType::Int32, DType::Int64})
    exchange_and_check(d, {3});
}

TEST(DistAllToAllV, RowsOfSeveralDims) { exchange_and_check(DType::Float64, {2, 3, 5}); }

TEST(DistAllToAllV, RowsWithoutElements) { exchange_and_check(DType::Float32, {0}); }

TEST(DistAllToAllV, SplitExchangeTellsEachRankWhatItReceives) {
  auto& w = dist::world();
  const int n = w.size(), me = w.rank();
  w.reset_stats();
  EXPECT_EQ(dist::exchange_split_sizes(w, in_splits_of(me, n)), out_splits_of(me, n));
  EXPECT_EQ(w.stats().at(dist::OpType::AllToAll).bytes, static_cast<uint64_t>(8 * n));
}

// Every rank passes the same bad argument: each refuses it before any communication, so the
// group stays in step and the next exchange works.
TEST(DistAllToAllV, BadSplitsAreRefusedBeforeAnyCommunication) {
  auto& w = dist::world();
  const int n = w.size(), me = w.rank();
  Splits in_splits = in_splits_of(me, n), out_splits = out_splits_of(me, n);
  const Tensor in = zeros({total(in_splits), 2});
  Tensor out = zeros({total(out_splits), 2});
  w.reset_stats();
  Splits short_splits(in_splits.begin(), in_splits.end() - 1);
  expect_contains(error_of([&] { w.all_to_all_v(out, in, out_splits, short_splits); }),
                  "all_to_all_v on group 'world' (rank " + std::to_string(me) + "): in_splits has " +
                      std::to_string(n - 1) + " entries but the group has " + std::to_string(n) + " ranks");
  Splits negative = out_splits;
  negative[0] = -1;
  expect_contains(error_of([&] { w.all_to_all_v(out, in, negative, in_splits); }),
                  "out_splits[0] is -1; a split counts rows and cannot be negative");
  Splits too_many = in_splits;
  too_many[0] += 1;
  expect_contains(error_of([&] { w.all_to_all_v(out, in, out_splits, too_many); }),
                  "in_splits sum to " + std::to_string(total(in_splits) + 1) + " rows but in of shape");
  Tensor other_dtype = zeros({total(out_splits), 2}, {.dtype = DType::Float64});
  expect_contains(error_of([&] { w.all_to_all_v(other_dtype, in, out_splits, in_splits); }),
                  "out is float64 but in is float32");
  Tensor other_rows = zeros({total(out_splits), 3});
  expect_contains(error_of([&] { w.all_to_all_v(other_rows, in, out_splits, in_splits); }), "have different rows");
  EXPECT_TRUE(w.stats().empty());
  exchange_and_check(DType::Float32, {2});
}

// Rank 1 sends rank 0 one row more than rank 0 expects: MPI reports the truncation and the
// op fails on the receiver, naming it, instead of writing past `out`.
TEST(DistAllToAllV, MoreRowsThanTheReceiverExpectsFailTheOp) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  auto g = world.split(all, "a2av_mismatch");
  g->set_timeout(std::chrono::milliseconds(2000));
  Splits in_splits(static_cast<size_t>(n), 0), out_splits(static_cast<size_t>(n), 0);
  if (me == 1) in_splits[0] = 2;
  if (me == 0) out_splits[1] = 1;
  const Tensor in = ones({total(in_splits), 2});
  Tensor out = zeros({total(out_splits) + 1, 2});  // a guard row after the expected one
  Tensor rows = out.narrow(0, 0, total(out_splits));
  const std::string err = error_of([&] { g->all_to_all_v(rows, in, out_splits, in_splits)->wait(); });
  if (me == 0) {
    expect_contains(err, "all_to_all_v #0 (float32, rows of 2 elements, 0 rows sent, 1 received)");
    expect_contains(err, "in group 'a2av_mismatch'");
    EXPECT_EQ(out.to_vector<float>().back(), 0.0F);
  }
  world.barrier()->wait();
}

// A rank that never calls it: the others time out naming the op, the group and the rank.
TEST(DistAllToAllV, RankThatNeverJoinsIsNamedByTheTimeout) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  auto g = world.split(all, "a2av_late");
  g->set_timeout(std::chrono::milliseconds(1000));
  if (me != n - 1) {
    const Splits in_splits(static_cast<size_t>(n), 1), out_splits(static_cast<size_t>(n), 1);
    const Tensor in = ones({n, 2});
    Tensor out = zeros({n, 2});
    const auto start = std::chrono::steady_clock::now();
    const std::string err = error_of([&] { g->all_to_all_v(out, in, out_splits, in_splits)->wait(); });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    expect_contains(err, "all_to_all_v #0");
    expect_contains(err, "in group 'a2av_late'");
    expect_contains(err, "timed out after 1000 ms");
    expect_contains(err, "ranks " + std::to_string(n - 1) + " of " + std::to_string(n) + " had not reached it");
    EXPECT_LT(secs, 4.0);
  }
  world.barrier()->wait();
}

}  // namespace
}  // namespace strata
