// Arrival boards (src/distributed/arrivals.h): the side channel through which NCCL groups name the
// ranks that have not reached an expired op. Tested over MPI alone (no GPU needed). Every
// wait on a peer goes through the board itself or a collective; no sleep serves as a sync.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "distributed/arrivals.h"
#include "distributed/backend.h"
#include "distributed/dist_test_util.h"

namespace strata {
namespace {

using namespace std::chrono_literals;
using dist::detail::ArrivalBoard;
using dist::detail::describe_arrivals;
using dist::detail::Laggards;
using dist::detail::make_arrival_board;

// Generous: announcements cross a shared 2-vCPU machine; missing() returns as soon as
// every rank has announced, so this only bounds a failure. Budgets that must run out (a
// rank is missing on purpose) are 0.5-1 s: long enough for the worker to take a read when
// callers never drive, even on a busy machine.
constexpr auto kPatience = 30s;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Blocks until every rank of `sync` has announced `seq` on it (a barrier made of the board
// itself, for when the world group is busy with the op under test).
void rendezvous(ArrivalBoard& sync, int64_t seq) {
  sync.entered(seq);
  Laggards l = sync.missing(seq, kPatience);
  ASSERT_TRUE(l.fresh) << l.why;
  ASSERT_TRUE(l.ranks.empty()) << "rendezvous " << seq << ": " << sync.describe(l.ranks) << " did not arrive";
}

TEST(ArrivalBoard, NamesTheRankThatHasNotReachedAnOp) {
  auto& world = dist::world();
  ASSERT_GE(world.size(), 2);
  auto board = make_arrival_board(world, "test");
  ASSERT_NE(board, nullptr);
  EXPECT_EQ(board->size(), world.size());
  const int late = world.size() - 1;
  const int64_t k = 4;
  for (int64_t s = 0; s < k; ++s) board->entered(s);
  if (world.rank() != late) board->entered(k);

  // Every rank announced 0..k-1: missing() returns as soon as the announcements are in.
  Laggards all_in = board->missing(k - 1, kPatience);
  EXPECT_TRUE(all_in.fresh) << all_in.why;
  EXPECT_TRUE(all_in.ranks.empty());

  if (world.rank() != late) {
    const auto t0 = std::chrono::steady_clock::now();
    Laggards l = board->missing(k, 500ms);  // the budget runs out waiting for `late`
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_TRUE(l.fresh) << l.why;
    EXPECT_EQ(l.ranks, std::vector<int>{late});
    EXPECT_GE(took, 500ms);
    EXPECT_LT(took, 20s);  // bounded by the budget (loose: a shared machine)
    const std::string text = describe_arrivals(board.get(), k, 1s);
    EXPECT_EQ(text, "ranks " + std::to_string(late) + " of " + std::to_string(world.size()) + " had not reached it");
  }
  world.barrier()->wait();
  if (world.rank() == late) board->entered(k);
  Laggards done = board->missing(k, kPatience);
  EXPECT_TRUE(done.fresh) << done.why;
  EXPECT_TRUE(done.ranks.empty()) << board->describe(done.ranks);
  EXPECT_EQ(describe_arrivals(board.get(), k, kPatience),
            "every rank had entered it (one may have died or stopped inside it)");
  // A seq nobody reached names everyone.
  Laggards none = board->missing(k + 1, 1s);
  EXPECT_TRUE(none.fresh) << none.why;
  EXPECT_EQ(static_cast<int>(none.ranks.size()), world.size());
  world.barrier()->wait();
}

// The board must answer while the group's own collectives are stuck on the late rank (under
// STRATA_DEBUG_COLLECTIVES=1 the stuck op holds the engine's issue order in its first stage).
TEST(ArrivalBoard, AnswersWhileACollectiveWaitsForTheLateRank) {
  auto& world = dist::world();
  auto board = make_arrival_board(world, "op");
  auto sync = make_arrival_board(world, "sync");
  ASSERT_NE(board, nullptr);
  ASSERT_NE(sync, nullptr);
  const int late = world.size() - 1;
  Tensor t = full({8}, 1.0f);
  dist::WorkPtr w;
  if (world.rank() != late) {
    w = world.all_reduce(t);
    board->entered(0);
    Laggards l = board->missing(0, 500ms);
    EXPECT_TRUE(l.fresh) << l.why;
    EXPECT_EQ(l.ranks, std::vector<int>{late});
    EXPECT_FALSE(w->is_completed());  // it really waits for `late`
  }
  rendezvous(*sync, 0);
  if (world.rank() == late) {
    w = world.all_reduce(t);
    board->entered(0);
  }
  w->wait();
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(8, static_cast<float>(world.size())));
  Laggards l = board->missing(0, kPatience);
  EXPECT_TRUE(l.fresh) << l.why;
  EXPECT_TRUE(l.ranks.empty());
  world.barrier()->wait();
}

// A sub-group's board (as ncclCommSplit splits an NCCL group): even and odd world ranks.
// The even board's group ranks differ from the world ranks, and the message names both.
TEST(ArrivalBoard, SplitBoardsNameGroupAndWorldRanks) {
  auto& world = dist::world();
  ASSERT_GE(world.size(), 3) << "needs a sub-group whose ranks differ from the world's";
  auto board = make_arrival_board(world, "parent");
  ASSERT_NE(board, nullptr);
  std::vector<int> mine;
  for (int r = world.rank() % 2; r < world.size(); r += 2) mine.push_back(r);
  auto sub = board->split(mine, "parity");
  ASSERT_NE(sub, nullptr);
  ASSERT_EQ(sub->size(), static_cast<int>(mine.size()));
  int me = 0;
  while (mine[static_cast<size_t>(me)] != world.rank()) ++me;
  const int sub_late = sub->size() - 1;

  // The parent board's announcements do not reach the sub-board and the other way round.
  board->entered(0);
  sub->entered(0);
  if (me != sub_late) sub->entered(1);
  EXPECT_TRUE(sub->missing(0, kPatience).ranks.empty());
  EXPECT_TRUE(board->missing(0, kPatience).ranks.empty());
  Laggards parent = board->missing(1, 1s);
  EXPECT_TRUE(parent.fresh) << parent.why;
  EXPECT_EQ(static_cast<int>(parent.ranks.size()), world.size());
  if (me != sub_late) {
    Laggards l = sub->missing(1, 500ms);
    EXPECT_TRUE(l.fresh) << l.why;
    EXPECT_EQ(l.ranks, std::vector<int>{sub_late});
    const int world_late = mine[static_cast<size_t>(sub_late)];
    std::string text = describe_arrivals(sub.get(), 1, 1s);
    if (world_late == sub_late) {
      EXPECT_EQ(text,
                "ranks " + std::to_string(sub_late) + " of " + std::to_string(sub->size()) + " had not reached it");
    } else {
      EXPECT_EQ(text, "group ranks " + std::to_string(sub_late) + " (world ranks " + std::to_string(world_late) +
                          ") of " + std::to_string(sub->size()) + " had not reached it");
    }
  }
  world.barrier()->wait();
  if (me == sub_late) sub->entered(1);
  Laggards l = sub->missing(1, kPatience);
  EXPECT_TRUE(l.fresh) << l.why;
  EXPECT_TRUE(l.ranks.empty());
  world.barrier()->wait();
}

// A board destroyed right after announcing: the peers' announcements may still be on the
// way to its communicator, which must outlive them (Engine::retire_watch). Freed at once,
// Open MPI handed them to the next communicator given its context id, and the splits below
// crashed in MPI_Comm_dup (mca_pml_ob1_add_comm). No barrier between rounds on purpose.
TEST(ArrivalBoard, DestroyedRightAfterAnnouncingLeavesLaterGroupsIntact) {
  auto& world = dist::world();
  std::vector<int> everyone(static_cast<size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) everyone[static_cast<size_t>(r)] = r;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    {
      auto board = make_arrival_board(world, "brief");
      ASSERT_NE(board, nullptr);
      board->entered(0);
      board->entered(1);
    }
    auto group = world.split(everyone, "after-board");
    Tensor t = full({4}, 1.0);
    group->all_reduce(t)->wait();
    ASSERT_EQ(t.to_vector<double>()[0], world.size());
  }
}

// Only MPI groups carry a side channel: elsewhere the message says the ranks are unknown.
TEST(ArrivalBoard, NonMpiGroupHasNoBoard) {
  std::unique_ptr<dist::ProcessGroup> local = dist::detail::make_local_world();
  EXPECT_EQ(make_arrival_board(*local, "local"), nullptr);
  const std::string text = describe_arrivals(nullptr, 3);
  EXPECT_TRUE(contains(text, "which ranks had not reached it is unknown")) << text;
  EXPECT_TRUE(contains(text, "not made over an MPI group")) << text;
}

// describe_arrivals' wording for each kind of answer (a fake board: no MPI involved).
class FakeBoard final : public ArrivalBoard {
 public:
  explicit FakeBoard(Laggards answer) : answer_(std::move(answer)) {}
  void entered(int64_t) override {}
  Laggards missing(int64_t seq, std::chrono::milliseconds) override {
    asked = seq;
    return answer_;
  }
  int size() const override { return 4; }
  std::string describe(const std::vector<int>& ranks) const override {
    std::string s = "group ranks";
    for (int r : ranks) {
      s += ' ';
      s += std::to_string(r);
    }
    return s;
  }
  std::unique_ptr<ArrivalBoard> split(std::span<const int>, const std::string&) override { return nullptr; }
  int64_t asked = -1;

 private:
  Laggards answer_;
};

TEST(ArrivalBoard, DescribeArrivalsWording) {
  FakeBoard late({{1, 3}, true, ""});
  EXPECT_EQ(describe_arrivals(&late, 7), "group ranks 1 3 of 4 had not reached it");
  EXPECT_EQ(late.asked, 7);
  FakeBoard all_in({{}, true, ""});
  EXPECT_EQ(describe_arrivals(&all_in, 7), "every rank had entered it (one may have died or stopped inside it)");
  // A stale answer is not passed off as the truth, whatever ranks it holds.
  FakeBoard stale({{2}, false, "the distributed runtime is finalized"});
  const std::string text = describe_arrivals(&stale, 7);
  EXPECT_TRUE(contains(text, "is unknown")) << text;
  EXPECT_TRUE(contains(text, "the distributed runtime is finalized")) << text;
  EXPECT_FALSE(contains(text, "group ranks 2")) << text;
}

// Last on purpose: finalizes the runtime (dist_main then skips its final agreement).
TEST(ArrivalBoardZ, AfterFinalizeTheRanksAreUnknown) {
  auto& world = dist::world();
  auto board = make_arrival_board(world, "late");
  ASSERT_NE(board, nullptr);
  board->entered(0);
  EXPECT_TRUE(board->missing(0, kPatience).ranks.empty());
  dist::finalize();
  Laggards l = board->missing(0, 100ms);
  EXPECT_FALSE(l.fresh);
  EXPECT_TRUE(contains(l.why, "finalized")) << l.why;
  board->entered(1);  // no effect, no throw
  const std::string text = describe_arrivals(board.get(), 1);
  EXPECT_TRUE(contains(text, "is unknown")) << text;
  board.reset();  // no MPI call after finalize
}

}  // namespace
}  // namespace strata
