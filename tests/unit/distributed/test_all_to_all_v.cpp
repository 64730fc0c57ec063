// ProcessGroup::all_to_all_v without mpirun: the front door's checks (which run before any
// communication), its byte counts, the default backend path (one batch of sends and
// receives), and the local world of one process with the differentiable exchange.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "strata/core/error.h"
#include "strata/distributed/init.h"
#include "strata/distributed/split_exchange.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/reduce.h"
#include "strata/parallel/token_exchange.h"
#include "strata/tensor/factory.h"

namespace strata::dist {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "expected \"" << part << "\" in: " << message;
}

class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
  void synchronize(std::chrono::milliseconds) override {}
  void synchronize() override {}
};

// Rank 1 of 4 that records the one thing all_to_all_v's default path calls (a batch of
// sends and receives) and refuses every other op.
class RecordingGroup final : public ProcessGroup {
 public:
  RecordingGroup() : ProcessGroup(1, 4, "rec", {0, 1, 2, 3}) {}
  std::vector<std::vector<P2POp>> batches;

 protected:
  Placement placement() const override { return Placement::Any; }
  WorkPtr do_all_reduce(Tensor&, ReduceOp, const OpDescription& d) override { return refuse(d); }
  WorkPtr do_broadcast(Tensor&, int, const OpDescription& d) override { return refuse(d); }
  WorkPtr do_all_gather(Tensor&, const Tensor&, const OpDescription& d) override { return refuse(d); }
  WorkPtr do_reduce_scatter(Tensor&, const Tensor&, ReduceOp, const OpDescription& d) override { return refuse(d); }
  WorkPtr do_all_to_all(Tensor&, const Tensor&, const OpDescription& d) override { return refuse(d); }
  WorkPtr do_send(const Tensor&, int, const OpDescription& d) override { return refuse(d); }
  WorkPtr do_recv(Tensor&, int, const OpDescription& d) override { return refuse(d); }
  WorkPtr do_barrier(const OpDescription& d) override { return refuse(d); }
  WorkPtr do_batch_send_recv(std::span<const P2POp> ops, const OpDescription& desc) override {
    EXPECT_STREQ(desc.name, "all_to_all_v");
    batches.emplace_back(ops.begin(), ops.end());
    return std::make_unique<CompletedWork>();
  }
  std::unique_ptr<ProcessGroup> do_split(const SplitPlan&, const OpDescription& d) override {
    refuse(d);
    return nullptr;
  }

 private:
  static WorkPtr refuse(const OpDescription& d) { STRATA_FAIL("RecordingGroup: unexpected ", d.name); }
};

using Splits = std::vector<int64_t>;

// Each bad argument is named, and nothing reaches the backend or the counters.
TEST(AllToAllV, BadArgumentsAreNamedBeforeAnyCommunication) {
  RecordingGroup g;
  Tensor in = zeros({5, 3});
  Tensor out = zeros({4, 3});
  const Splits in_ok{1, 0, 2, 2}, out_ok{1, 0, 3, 0};
  auto call = [&](Tensor& o, const Tensor& i, const Splits& os, const Splits& is) {
    return error_of([&] { g.all_to_all_v(o, i, os, is); });
  };
  std::string err = call(out, in, out_ok, Splits{1, 2, 2});
  expect_contains(err, "all_to_all_v on group 'rec' (rank 1): in_splits has 3 entries but the group has 4 ranks");
  err = call(out, in, Splits{0, 4, 0}, in_ok);
  expect_contains(err, "out_splits has 3 entries but the group has 4 ranks");
  err = call(out, in, out_ok, Splits{3, -1, 2, 1});
  expect_contains(err, "in_splits[1] is -1; a split counts rows and cannot be negative");
  err = call(out, in, out_ok, Splits{1, 1, 2, 2});
  expect_contains(err, "in_splits sum to 6 rows but in of shape [5, 3] has 5 rows along dim 0");
  err = call(out, in, Splits{1, 1, 0, 2}, in_ok);
  expect_contains(err, "in_splits[1] = 0 rows to itself but out_splits[1] = 1 rows from itself");
  err = call(out, in, Splits{0, 0, 3, 0}, in_ok);
  expect_contains(err, "out_splits sum to 3 rows but out of shape [4, 3] has 4 rows along dim 0");
  Tensor out64 = zeros({4, 3}, {.dtype = DType::Float64});
  err = call(out64, in, out_ok, in_ok);
  expect_contains(err, "all_to_all_v on group 'rec' (rank 1): out is float64 but in is float32");
  Tensor wide = zeros({4, 2});
  err = call(wide, in, out_ok, in_ok);
  expect_contains(err, "out of shape [4, 2] and in of shape [5, 3] have different rows");
  Tensor scalar = scalar_tensor(1.0);
  err = call(out, scalar, out_ok, in_ok);
  expect_contains(err, "need a dim 0 of rows");
  Tensor strided = zeros({3, 5}).transpose(0, 1);
  err = call(out, strided, out_ok, in_ok);
  expect_contains(err, "all_to_all_v on group 'rec' (rank 1): in of shape [5, 3]");
  expect_contains(err, "is not contiguous");
  EXPECT_TRUE(g.batches.empty());
  EXPECT_TRUE(g.stats().empty());
}

// The default backend path: rank r's slice of `in` to every rank with rows for it, and
// `out`'s slice from each rank that sends, at the right offsets; bytes from the splits.
TEST(AllToAllV, DefaultPathSendsEachRanksRowsAndCountsBytes) {
  RecordingGroup g;
  Tensor in = zeros({5, 2, 3}, {.dtype = DType::Float64});
  Tensor out = zeros({4, 2, 3}, {.dtype = DType::Float64});
  const Splits in_splits{1, 0, 2, 2}, out_splits{3, 0, 0, 1};
  g.all_to_all_v(out, in, out_splits, in_splits)->wait();
  ASSERT_EQ(g.batches.size(), 1u);
  const std::vector<P2POp>& ops = g.batches[0];
  // (kind, peer, first element, elements): sends to 0, 2, 3; receives from 0 and 3.
  struct Expected {
    P2POp::Kind kind;
    int peer;
    int64_t offset, numel;
  };
  const std::vector<Expected> expected{{P2POp::Kind::Send, 0, 0, 6},
                                       {P2POp::Kind::Recv, 0, 0, 18},
                                       {P2POp::Kind::Send, 2, 6, 12},
                                       {P2POp::Kind::Send, 3, 18, 12},
                                       {P2POp::Kind::Recv, 3, 18, 6}};
  ASSERT_EQ(ops.size(), expected.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Tensor& base = ops[i].kind == P2POp::Kind::Send ? in : out;
    EXPECT_EQ(ops[i].kind, expected[i].kind) << i;
    EXPECT_EQ(ops[i].peer, expected[i].peer) << i;
    EXPECT_EQ(ops[i].tensor.numel(), expected[i].numel) << i;
    EXPECT_EQ(ops[i].tensor.data_ptr(), static_cast<const void*>(base.data<double>() + expected[i].offset)) << i;
  }
  const CommStats s = g.stats();
  ASSERT_EQ(s.count(OpType::AllToAllV), 1u);
  EXPECT_EQ(s.at(OpType::AllToAllV).calls, 1u);
  EXPECT_EQ(s.at(OpType::AllToAllV).bytes, 5u * 6 * 8);
  EXPECT_EQ(s.at(OpType::AllToAllV).received_bytes, 4u * 6 * 8);
}

// A rank that neither sends nor receives anything issues nothing and is done.
TEST(AllToAllV, NothingToExchangeIsCompleteAtOnce) {
  RecordingGroup g;
  Tensor in = zeros({0, 3});
  Tensor out = zeros({0, 3});
  WorkPtr w = g.all_to_all_v(out, in, Splits{0, 0, 0, 0}, Splits{0, 0, 0, 0});
  EXPECT_TRUE(w->is_completed());
  EXPECT_TRUE(g.batches.empty());
  EXPECT_EQ(g.stats().at(OpType::AllToAllV).calls, 1u);
}

TEST(AllToAllV, SplitExchangeChecksItsSplits) {
  RecordingGroup g;
  std::string err = error_of([&] { exchange_split_sizes(g, Splits{1, 2}); });
  expect_contains(err, "exchange_split_sizes on group 'rec' (rank 1): in_splits has 2 entries but the group has 4");
  err = error_of([&] { exchange_split_sizes(g, Splits{1, 2, -3, 0}); });
  expect_contains(err, "in_splits[2] is -3");
  EXPECT_TRUE(g.stats().empty());
}

// The local world of one process: every row goes to itself, forward and backward.
TEST(AllToAllV, LocalWorldOfOneCopiesAndDifferentiates) {
  ProcessGroup& world = init({.start_mpi = false});
  ASSERT_EQ(world.size(), 1);
  world.reset_stats();
  EXPECT_EQ(exchange_split_sizes(world, Splits{3}), Splits{3});
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2});
  x.set_requires_grad(true);
  std::vector<int64_t> out_splits;
  Tensor y = parallel::all_to_all_v(x, world, Splits{3}, &out_splits);
  EXPECT_EQ(out_splits, Splits{3});
  EXPECT_EQ(y.to_vector<double>(), x.to_vector<double>());
  Tensor w = from_vector(std::vector<double>{1, -1, 2, -2, 3, -3}, {3, 2});
  sum(y * w).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), w.to_vector<double>());
  const CommStats s = world.stats();
  EXPECT_EQ(s.at(OpType::AllToAllV).calls, 2u);  // forward and backward
  EXPECT_EQ(s.at(OpType::AllToAllV).bytes, 2u * 6 * 8);
  EXPECT_EQ(s.at(OpType::AllToAll).bytes, 2u * 8);  // the two split exchanges
  Tensor out = zeros({2, 2}, {.dtype = DType::Float64});
  std::string err = error_of([&] { world.all_to_all_v(out, x.detach(), Splits{2}, Splits{3}); });
  expect_contains(err,
                  "all_to_all_v on group 'world' (rank 0): in_splits[0] = 3 rows to itself but out_splits[0] = "
                  "2 rows from itself");
}

}  // namespace
}  // namespace strata::dist
