// Pipeline schedules (strata/parallel/pipeline_schedule.h), checked by running every rank's
// action list together in the simulator (src/parallel/pipeline_simulator.h): no deadlock,
// each (micro-batch, stage) computed once in dependency order, the activation memory and the
// bubble of the papers, and the errors.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "parallel/pipeline_simulator.h"
#include "strata/parallel/pipeline_schedule.h"
#include "test_util.h"

namespace strata::parallel {
namespace {

using Kind = PipelineActionKind;
using Sched = PipelineScheduleKind;

struct Case {
  Sched kind;
  PipelineShape shape;
};

std::string name(const Case& c) {
  return detail::concat(to_string(c.kind), " p=", c.shape.ranks, " m=", c.shape.micro_batches, " v=", c.shape.chunks);
}

// Every shape the brief asks for: p in 1..4, m in {1,2,3,4,5,8}, v in 1..3 for interleaved
// where m % p == 0 (v == 1 is 1F1B and takes any m).
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Sched kind : {Sched::GPipe, Sched::OneFOneB, Sched::Interleaved1F1B})
    for (int p : {1, 2, 3, 4})
      for (int m : {1, 2, 3, 4, 5, 8})
        for (int v : {1, 2, 3}) {
          if (v > 1 && (kind != Sched::Interleaved1F1B || m % p != 0)) continue;
          cases.push_back({kind, {p, m, v}});
        }
  return cases;
}

// The papers' bubble fraction: idle time over compute time per rank.
double theory_bubble(const PipelineShape& s) {
  return static_cast<double>(s.ranks - 1) / (static_cast<double>(s.micro_batches) * s.chunks);
}

// Most (micro-batch, chunk) activations rank r holds: its warm-up forwards plus the one it
// pairs with its first backward, capped at all m*v.
int expected_peak(const Case& c, int r) {
  const PipelineShape& s = c.shape;
  if (c.kind == Sched::GPipe) return s.micro_batches;
  const int warmup = s.chunks == 1 ? s.ranks - r - 1 : (s.chunks - 1) * s.ranks + 2 * (s.ranks - r - 1);
  return std::min(warmup + 1, s.micro_batches * s.chunks);
}

TEST(PipelineSchedule, EveryScheduleRunsWithoutDeadlockAndInDependencyOrder) {
  const std::vector<Case> cases = all_cases();
  // 24 shapes per schedule with v == 1; v in {2, 3} where m % p == 0: 6 + 3 + 1 + 2 values of m.
  EXPECT_EQ(cases.size(), 3u * 24 + 2 * (6 + 3 + 1 + 2));
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c));
    const PipelineSchedule sched = make_pipeline_schedule(c.kind, c.shape);
    PipelineSimulation sim;
    ASSERT_NO_THROW(sim = simulate_pipeline(sched));
    const int p = c.shape.ranks, m = c.shape.micro_batches, v = c.shape.chunks, stages = p * v;
    // (micro-batch, global stage) -> spans of its forwards and backwards, from every rank.
    std::map<std::pair<int, int>, std::vector<ComputeSpan>> fwd, bwd;
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(sim.timeline[r].size(), static_cast<size_t>(2 * m * v));
      for (const ComputeSpan& span : sim.timeline[r])
        (span.forward ? fwd : bwd)[{span.micro_batch, sched.stage(r, span.chunk)}].push_back(span);
    }
    for (int mb = 0; mb < m; ++mb)
      for (int s = 0; s < stages; ++s) {
        SCOPED_TRACE(detail::concat("micro-batch ", mb, ", stage ", s));
        const std::pair<int, int> key(mb, s), prev(mb, s - 1), next(mb, s + 1);
        ASSERT_EQ(fwd[key].size(), 1u);
        ASSERT_EQ(bwd[key].size(), 1u);
        const ComputeSpan& f = fwd[key][0];
        const ComputeSpan& b = bwd[key][0];
        EXPECT_LE(f.end, b.start);
        if (s > 0) {
          EXPECT_LE(fwd[prev][0].end, f.start);  // the lower stage ran first (filled in earlier)
        }
        if (s + 1 < stages) {
          ASSERT_EQ(bwd[next].size(), 1u);
          EXPECT_LE(bwd[next][0].end, b.start);
        }
      }
  }
}

// Forward 1 unit, backward 2, communication free: the simulated step takes exactly
// 3(m + p - 1) units for GPipe and 1F1B and 3(m*v + p - 1) chunk units for interleaved 1F1B,
// for every shape here (not only large m), so the fraction equals the formula up to the
// rounding of one division; 1e-12 only absorbs that.
TEST(PipelineSchedule, BubbleMatchesTheoryAndActivationMemoryItsBound) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(name(c));
    const PipelineSimulation sim = simulate_pipeline(make_pipeline_schedule(c.kind, c.shape));
    const int p = c.shape.ranks;
    EXPECT_EQ(sim.makespan, 3 * (c.shape.micro_batches * c.shape.chunks + p - 1));
    for (int r = 0; r < p; ++r) {
      EXPECT_NEAR(sim.bubble_fraction(r), theory_bubble(c.shape), 1e-12) << "rank " << r;
      EXPECT_EQ(sim.peak_in_flight[r], expected_peak(c, r)) << "rank " << r;
    }
    if (c.kind == Sched::OneFOneB) {
      EXPECT_EQ(sim.peak_in_flight[0], std::min(c.shape.micro_batches, p));
    }
  }
}

// The figures docs/parallelism.md "Pipeline schedules" quotes (p = 4, m = 8).
TEST(PipelineSchedule, DocumentedTable) {
  struct Row {
    Sched kind;
    int v;
    double bubble;
    std::vector<int> peaks;
  };
  for (const Row& row : {Row{Sched::GPipe, 1, 0.375, {8, 8, 8, 8}}, Row{Sched::OneFOneB, 1, 0.375, {4, 3, 2, 1}},
                         Row{Sched::Interleaved1F1B, 2, 0.1875, {11, 9, 7, 5}}}) {
    SCOPED_TRACE(to_string(row.kind));
    const PipelineSimulation sim = simulate_pipeline(make_pipeline_schedule(row.kind, {4, 8, row.v}));
    EXPECT_DOUBLE_EQ(sim.bubble_fraction(), row.bubble);
    EXPECT_EQ(sim.peak_in_flight, row.peaks);
  }
}

// Tag-free matching, read off the lists themselves: for each ordered pair of ranks, what src
// sends to dst (in action order, batch order inside a batch) is what dst receives from src,
// message for message: same kind, micro-batch and neighbouring stage.
TEST(PipelineSchedule, SendsAndReceivesBetweenTwoRanksListTheSameMessagesInTheSameOrder) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(name(c));
    const PipelineSchedule sched = make_pipeline_schedule(c.kind, c.shape);
    // (src, dst) -> messages as (activation?, micro-batch, sending stage).
    std::map<std::pair<int, int>, std::vector<std::tuple<bool, int, int>>> sent, received;
    for (int r = 0; r < c.shape.ranks; ++r)
      for (const PipelineAction& a : sched.actions[r])
        for (const PipelineAction& t : a.transfers()) {
          const bool activation = t.kind == Kind::SendActivation || t.kind == Kind::RecvActivation;
          const int stage = sched.stage(r, t.chunk);
          if (t.is_send()) {
            sent[{r, t.peer}].emplace_back(activation, t.micro_batch, stage);
          } else {
            received[{t.peer, r}].emplace_back(activation, t.micro_batch, activation ? stage - 1 : stage + 1);
          }
        }
    EXPECT_EQ(sent, received);
  }
}

// The batching rule in its best-known form: in steady-state 1F1B a middle rank sends its
// forward output and receives the next gradient in one batch (send_forward_recv_backward),
// and sends its input gradient and receives the next input in another.
TEST(PipelineSchedule, SteadyState1F1BPairsASendWithAReceiveInOneBatch) {
  const PipelineSchedule sched = make_pipeline_schedule(Sched::OneFOneB, {4, 8, 1});
  int forward_pairs = 0, backward_pairs = 0;
  for (const PipelineAction& a : sched.actions[1]) {
    if (a.kind != Kind::CommBatch) continue;
    ASSERT_EQ(a.batch.size(), 2u) << to_string(a);
    const PipelineAction &send = a.batch[0], &recv = a.batch[1];
    if (send.kind == Kind::SendActivation && recv.kind == Kind::RecvGrad) {
      EXPECT_EQ(send.peer, 2);
      EXPECT_EQ(recv.peer, 2);
      ++forward_pairs;
    } else if (send.kind == Kind::SendGrad && recv.kind == Kind::RecvActivation) {
      EXPECT_EQ(send.peer, 0);
      EXPECT_EQ(recv.peer, 0);
      ++backward_pairs;
    }
  }
  // Rank 1 warms up with 2 forwards, then 6 forward/backward pairs: every pair's forward
  // is followed by a forward batch, every backward but the last by a backward batch.
  EXPECT_EQ(forward_pairs, 6);
  EXPECT_EQ(backward_pairs, 5);
}

TEST(PipelineSchedule, InterleavedWithOneChunkIs1F1B) {
  for (int p : {1, 2, 3, 4})
    for (int m : {1, 2, 3, 4, 5, 8}) {
      const PipelineSchedule a = make_pipeline_schedule(Sched::OneFOneB, {p, m, 1});
      const PipelineSchedule b = make_pipeline_schedule(Sched::Interleaved1F1B, {p, m, 1});
      for (int r = 0; r < p; ++r) {
        ASSERT_EQ(a.actions[r].size(), b.actions[r].size());
        for (size_t i = 0; i < a.actions[r].size(); ++i)
          EXPECT_EQ(to_string(a.actions[r][i]), to_string(b.actions[r][i])) << "p=" << p << " m=" << m;
      }
    }
}

TEST(PipelineSchedule, SingleRankTalksToItselfOnlyBetweenChunks) {
  // p == 1, v == 1: no transfer at all.
  const PipelineSchedule alone = make_pipeline_schedule(Sched::OneFOneB, {1, 3, 1});
  for (const PipelineAction& a : alone.actions[0]) EXPECT_TRUE(a.is_compute()) << to_string(a);
  // p == 1, v == 2: chunk 0 feeds chunk 1 of the same rank; each message is received in the
  // batch that sends it (a lone send would wait for a receive posted later by the same rank).
  const PipelineSchedule sched = make_pipeline_schedule(Sched::Interleaved1F1B, {1, 2, 2});
  int transfers = 0;
  for (const PipelineAction& a : sched.actions[0]) {
    if (a.is_compute()) continue;
    ASSERT_EQ(a.kind, Kind::CommBatch) << to_string(a);
    ASSERT_EQ(a.batch.size(), 2u);
    EXPECT_TRUE(a.batch[0].is_send());
    EXPECT_EQ(a.batch[0].micro_batch, a.batch[1].micro_batch);
    for (const PipelineAction& t : a.batch) EXPECT_EQ(t.peer, 0);
    transfers += 2;
  }
  EXPECT_EQ(transfers, 2 * 2 * 2);  // per micro-batch: one activation, one gradient, each sent and received
}

TEST(PipelineSchedule, TransfersOfAnAction) {
  PipelineAction compute{Kind::Forward, 0, 0};
  PipelineAction single{Kind::SendGrad, 1, 0, 2};
  PipelineAction batch{Kind::CommBatch, -1, -1, -1, {single, {Kind::RecvActivation, 2, 0, 2}}};
  EXPECT_TRUE(compute.transfers().empty());
  ASSERT_EQ(single.transfers().size(), 1u);
  EXPECT_EQ(&single.transfers()[0], &single);
  ASSERT_EQ(batch.transfers().size(), 2u);
  EXPECT_EQ(batch.transfers()[1].kind, Kind::RecvActivation);
  EXPECT_EQ(to_string(batch),
            "batch[send grad(micro-batch 1, chunk 0) to rank 2; "
            "recv activation(micro-batch 2, chunk 0) from rank 2]");
}

TEST(PipelineSchedule, ErrorsNameTheRequirement) {
  using testing::expect_error_mentions;
  expect_error_mentions([] { make_pipeline_schedule(Sched::OneFOneB, {0, 4, 1}); }, {"at least 1 rank", "ranks = 0"});
  expect_error_mentions(
      [] {
        make_pipeline_schedule(Sched::GPipe, {2, 0, 1});
      },
      {"at least 1 micro-batch", "micro_batches = 0"});
  expect_error_mentions(
      [] {
        make_pipeline_schedule(Sched::Interleaved1F1B, {2, 4, 0});
      },
      {"at least 1 model chunk", "chunks = 0"});
  expect_error_mentions(
      [] {
        make_pipeline_schedule(Sched::Interleaved1F1B, {4, 6, 2});
      },
      {"multiple of the number of ranks", "Megatron-LM", "micro_batches = 6", "ranks = 4"});
  // m < p with v > 1 is the same requirement (m must be a positive multiple of p).
  expect_error_mentions(
      [] {
        make_pipeline_schedule(Sched::Interleaved1F1B, {4, 2, 2});
      },
      {"multiple", "micro_batches = 2"});
  expect_error_mentions(
      [] {
        make_pipeline_schedule(Sched::GPipe, {2, 4, 2});
      },
      {"GPipe", "one model chunk", "Interleaved1F1B"});
  expect_error_mentions([] { make_pipeline_schedule(Sched::OneFOneB, {2, 4, 3}); }, {"1F1B", "chunks = 3"});
  // Fewer micro-batches than ranks is allowed where the schedule works with it.
  EXPECT_NO_THROW(simulate_pipeline(make_pipeline_schedule(Sched::GPipe, {4, 1, 1})));
  EXPECT_NO_THROW(simulate_pipeline(make_pipeline_schedule(Sched::OneFOneB, {4, 3, 1})));
  EXPECT_NO_THROW(simulate_pipeline(make_pipeline_schedule(Sched::Interleaved1F1B, {4, 3, 1})));
}

}  // namespace
}  // namespace strata::parallel
