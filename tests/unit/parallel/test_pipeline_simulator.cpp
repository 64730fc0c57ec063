// The pipeline simulator (src/parallel/pipeline_simulator.h) on broken schedules: it must
// catch what would hang or corrupt a real run, and say where.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "parallel/pipeline_simulator.h"
#include "strata/parallel/pipeline_schedule.h"
#include "test_util.h"

namespace strata::parallel {
namespace {

using Kind = PipelineActionKind;
using Sched = PipelineScheduleKind;
using testing::expect_error_mentions;

TEST(PipelineSimulator, TimesOneMicroBatchThroughTwoRanks) {
  const PipelineSimulation sim = simulate_pipeline(make_pipeline_schedule(Sched::OneFOneB, {2, 1, 1}));
  // forward rank 0 [0,1), rank 1 [1,2); backward rank 1 [2,4), rank 0 [4,6).
  EXPECT_EQ(sim.makespan, 6);
  EXPECT_EQ(sim.busy, (std::vector<int64_t>{3, 3}));
  ASSERT_EQ(sim.timeline[0].size(), 2u);
  EXPECT_EQ(sim.timeline[0][1].start, 4);
  EXPECT_EQ(sim.timeline[1][0].start, 1);
  EXPECT_EQ(sim.timeline[1][1].end, 4);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction(), 1.0);
  // Costs are parameters: forward 2, backward 3 gives 2 + 2 + 3 + 3.
  const PipelineSchedule sched = make_pipeline_schedule(Sched::OneFOneB, {2, 1, 1});
  EXPECT_EQ(simulate_pipeline(sched, {.forward = 2, .backward = 3}).makespan, 10);
}

// Why transfers are batched: the same 1F1B with every batch split into its sends and then its
// receives, each waited for alone, hangs in steady state: rank 0 waits for rank 1 to take its
// activation while rank 1 waits for rank 0 to take its gradient.
TEST(PipelineSimulator, ReportsTheDeadlockOfUnbatchedSends) {
  PipelineSchedule sched = make_pipeline_schedule(Sched::OneFOneB, {2, 4, 1});
  for (auto& actions : sched.actions) {
    std::vector<PipelineAction> split;
    for (const PipelineAction& a : actions) {
      if (a.kind != Kind::CommBatch) split.push_back(a);
      for (const PipelineAction& t : a.batch) split.push_back(t);
    }
    actions = std::move(split);
  }
  expect_error_mentions([&] { simulate_pipeline(sched); },
                        {"1F1B, ranks 2, micro-batches 4, chunks 1", "deadlocks: no rank can progress",
                         "rank 0 at action #", "waits for send activation(micro-batch 1, chunk 0) to rank 1",
                         "rank 1 at action #", "waits for send grad(micro-batch 0, chunk 0) to rank 0"});
}

// Tag-free matching: two sends to one rank swapped on the sender only (interleaved 1F1B with
// p = 2 sends rank 1 both activations and gradients) would deliver each tensor into the
// other's buffer. The simulator names both sides.
TEST(PipelineSimulator, ReportsTransfersListedInDifferentOrders) {
  PipelineSchedule sched = make_pipeline_schedule(Sched::Interleaved1F1B, {2, 4, 2});
  bool swapped = false;
  for (PipelineAction& a : sched.actions[0]) {
    if (a.kind != Kind::CommBatch || a.batch.size() < 2) continue;
    if (a.batch[0].is_send() && a.batch[1].is_send() && a.batch[0].peer == a.batch[1].peer) {
      std::swap(a.batch[0], a.batch[1]);
      swapped = true;
      break;
    }
  }
  ASSERT_TRUE(swapped);
  expect_error_mentions([&] { simulate_pipeline(sched); },
                        {"rank 0's send #", "to rank 1, send grad", "meets rank 1's receive #", "recv activation",
                         "both ranks must list them in the same order"});
}

TEST(PipelineSimulator, ReportsAComputationWithoutItsInput) {
  PipelineSchedule sched = make_pipeline_schedule(Sched::OneFOneB, {2, 1, 1});
  ASSERT_EQ(sched.actions[1][0].kind, Kind::RecvActivation);
  sched.actions[1].erase(sched.actions[1].begin());
  expect_error_mentions([&] { simulate_pipeline(sched); },
                        {"rank 1 at action #0 (forward(micro-batch 0, chunk 0))", "before its input activation"});

  PipelineSchedule early = make_pipeline_schedule(Sched::GPipe, {1, 2, 1});
  std::swap(early.actions[0][1], early.actions[0][2]);  // backward 0 before forward 1 is fine...
  EXPECT_NO_THROW(simulate_pipeline(early));
  std::swap(early.actions[0][0], early.actions[0][2]);  // ...backward 0 before forward 0 is not
  expect_error_mentions([&] { simulate_pipeline(early); }, {"backward(micro-batch 0, chunk 0)", "before its forward"});
}

TEST(PipelineSimulator, ReportsWrongPeersAndMissingWork) {
  PipelineSchedule wrong = make_pipeline_schedule(Sched::GPipe, {3, 2, 1});
  ASSERT_EQ(wrong.actions[0][1].kind, Kind::SendActivation);
  wrong.actions[0][1].peer = 2;
  expect_error_mentions([&] { simulate_pipeline(wrong); }, {"rank 0 at action #1", "the next stage (1) is on rank 1"});

  PipelineSchedule last = make_pipeline_schedule(Sched::OneFOneB, {2, 1, 1});
  last.actions[1].push_back({Kind::SendActivation, 0, 0, 0});
  expect_error_mentions([&] { simulate_pipeline(last); }, {"stage 1 is the last stage"});

  PipelineSchedule missing = make_pipeline_schedule(Sched::OneFOneB, {1, 2, 1});
  missing.actions[0].pop_back();
  expect_error_mentions([&] { simulate_pipeline(missing); }, {"rank 0 never runs backward(micro-batch 1, chunk 0)"});

  PipelineSchedule twice = make_pipeline_schedule(Sched::GPipe, {1, 1, 1});
  twice.actions[0].push_back(twice.actions[0][0]);
  expect_error_mentions([&] { simulate_pipeline(twice); }, {"forward(micro-batch 0, chunk 0)", "a second time"});

  PipelineSchedule ranks = make_pipeline_schedule(Sched::GPipe, {2, 1, 1});
  ranks.actions.pop_back();
  expect_error_mentions([&] { simulate_pipeline(ranks); }, {"action lists for 1 ranks, needs 2"});
}

}  // namespace
}  // namespace strata::parallel
