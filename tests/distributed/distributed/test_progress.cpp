// Who drives MPI (src/distributed/mpi/engine.h): a thread waiting on an op runs the engine itself,
// the worker progresses ops nobody waits on. These tests mix the two: waits while the
// worker is busy with another group's op, waits from threads other than the issuing one,
// timeouts surfacing in the waiting thread, background progress without a wait, the CPU a
// rank uses while it waits for a late peer, and raw MPI calls between strata ops.
#include <mpi.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "distributed/dist_test_util.h"

namespace strata {
namespace {

using test::error_of;
using Clock = std::chrono::steady_clock;

// Large enough for the ring (256 KiB by default): it needs many polls to finish.
constexpr int64_t kLarge = 1 << 20;  // floats: 4 MiB

std::unique_ptr<dist::ProcessGroup> copy_of_world(const std::string& name, std::chrono::milliseconds timeout) {
  auto& world = dist::world();
  std::vector<int> all;
  for (int r = 0; r < world.size(); ++r) all.push_back(r);
  auto g = world.split(all, name);
  g->set_timeout(timeout);
  return g;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// sum over ranks of (r + 1) * v
double rank_sum(int n, double v) { return v * n * (n + 1) / 2.0; }

void expect_all(const Tensor& t, double want, const std::string& what) {
  std::vector<double> got = t.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 3; ++i)
    if (got[i] != want) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want;
      ++bad;
    }
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

TEST(DistProgress, WaitOnOneGroupWhileAnotherGroupsRingIsInFlight) {
  auto& world = dist::world();
  const int n = world.size(), r = world.rank();
  auto a = copy_of_world("a", std::chrono::seconds(30));
  auto b = copy_of_world("b", std::chrono::seconds(30));
  for (int round = 0; round < 5; ++round) {
    Tensor big = full({kLarge}, static_cast<double>(r + 1));
    Tensor small = full({16}, static_cast<double>(2 * (r + 1)));
    // The ring on group a starts first (global issue order) and nobody waits on it yet; the
    // wait on b drives both. Alternate which one is waited first.
    auto wa = a->all_reduce(big);
    auto wb = b->all_reduce(small);
    if (round % 2 == 0) {
      wb->wait();
      wa->wait();
    } else {
      wa->wait();
      wb->wait();
    }
    expect_all(big, rank_sum(n, 1), "group a's ring all_reduce, round " + std::to_string(round));
    expect_all(small, rank_sum(n, 2), "group b's all_reduce, round " + std::to_string(round));
  }
}

TEST(DistProgress, WaitsFromThreadsOtherThanTheIssuingOne) {
  auto& world = dist::world();
  const int n = world.size(), r = world.rank();
  constexpr int kOps = 6;
  std::vector<Tensor> t;
  std::vector<dist::WorkPtr> w;
  for (int i = 0; i < kOps; ++i) {
    // Alternate small ops (MPI's collective) and ring ops.
    t.push_back(full({i % 2 ? kLarge : int64_t{64}}, static_cast<double>((r + 1) * (i + 1))));
    w.push_back(world.all_reduce(t.back()));
  }
  // Every op is waited by its own thread, all at once: one of them drives, the others sleep.
  std::vector<std::string> errors(kOps);
  std::vector<std::thread> threads;
  for (int i = 0; i < kOps; ++i)
    threads.emplace_back(
        [&, i] { errors[static_cast<size_t>(i)] = error_of([&] { w[static_cast<size_t>(i)]->wait(); }); });
  for (auto& th : threads) th.join();
  for (int i = 0; i < kOps; ++i) {
    EXPECT_EQ(errors[static_cast<size_t>(i)], "") << "op " << i;
    EXPECT_TRUE(w[static_cast<size_t>(i)]->is_completed());
    expect_all(t[static_cast<size_t>(i)], rank_sum(n, i + 1), "op " + std::to_string(i));
  }
}

TEST(DistProgress, TimeoutSurfacesInTheWaitingThreadNamingTheMissingRank) {
  auto& world = dist::world();
  const int n = world.size(), r = world.rank();
  auto g = copy_of_world("late", std::chrono::milliseconds(1000));
  if (r != n - 1) {             // the last rank never joins
    Tensor t = ones({kLarge});  // the ring: the driver polls it until the deadline
    auto w = g->all_reduce(t);
    std::string err;
    const Clock::time_point start = Clock::now();
    std::thread waiter([&] { err = error_of([&] { w->wait(); }); });
    waiter.join();
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_TRUE(contains(err, "all_reduce #0")) << err;
    EXPECT_TRUE(contains(err, "group 'late'")) << err;
    EXPECT_TRUE(contains(err, "timed out after 1000 ms")) << err;
    EXPECT_TRUE(contains(err, "ranks " + std::to_string(n - 1) + " of " + std::to_string(n) + " had not reached it"))
        << err;
    EXPECT_TRUE(contains(err, "[rank " + std::to_string(r) + "]")) << err;
    EXPECT_LT(secs, 5.0);
    EXPECT_TRUE(w->is_completed());
    err = error_of([&] { g->barrier(); });
    EXPECT_TRUE(contains(err, "unusable after an earlier failure")) << err;
  }
  world.barrier()->wait();
}

TEST(DistProgress, SynchronizeWithShortTimeoutLeavesTheOpToFinishLater) {
  auto& world = dist::world();
  const int n = world.size(), r = world.rank();
  Tensor t = full({kLarge}, static_cast<double>(r + 1));
  if (r != 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto w = world.all_reduce(t);
  if (r == 0) {
    std::string err = error_of([&] { w->synchronize(std::chrono::milliseconds(100)); });
    EXPECT_TRUE(contains(err, "all_reduce #")) << err;
    EXPECT_TRUE(contains(err, "not completed within 100 ms")) << err;
    EXPECT_TRUE(contains(err, "had not reached it")) << err;
    EXPECT_FALSE(w->is_completed());
  }
  w->wait();
  expect_all(t, rank_sum(n, 1), "all_reduce after a short synchronize");
}

TEST(DistProgress, OpsNobodyWaitsOnCompleteInTheBackground) {
  auto& world = dist::world();
  const int n = world.size(), r = world.rank();
  auto g = copy_of_world("background", std::chrono::seconds(30));
  // As DDP does: issue, compute (here: sleep), wait later. The worker must finish the ops
  // meanwhile: is_completed() turns true without any wait().
  Tensor big = full({kLarge}, static_cast<double>(r + 1));
  Tensor small = full({8}, static_cast<double>(r + 1));
  auto wa = world.all_reduce(big);
  auto wb = g->all_reduce(small);
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(20);
  while (!(wa->is_completed() && wb->is_completed()) && Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(wa->is_completed());
  EXPECT_TRUE(wb->is_completed());
  wa->wait();
  wb->wait();
  expect_all(big, rank_sum(n, 1), "background ring all_reduce");
  expect_all(small, rank_sum(n, 1), "background all_reduce");
}

TEST(DistProgress, WaitingForALatePeerDoesNotBurnACore) {
  auto& world = dist::world();
  const int n = world.size(), r = world.rank();
  Tensor t = full({kLarge}, static_cast<double>(r + 1));
  world.barrier()->wait();
  if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double cpu0 = process_cpu_seconds();
  const Clock::time_point t0 = Clock::now();
  world.all_reduce(t)->wait();
  const double cpu = process_cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  expect_all(t, rank_sum(n, 1), "all_reduce with a late peer");
  if (r == 0) {
    // The waiting caller hands back to the worker after ~1 ms without progress; the worker
    // naps. Driving for the whole wait would use about one core (cpu ~ wall).
    EXPECT_GT(wall, 0.3);
    EXPECT_LT(cpu, 0.3 * wall) << "rank 0 used " << cpu * 1e3 << " ms of CPU in " << wall * 1e3 << " ms";
  }
}

TEST(DistProgress, RawMpiCallsBetweenStrataOps) {
  auto& world = dist::world();
  const int n = world.size(), r = world.rank();
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED) GTEST_SKIP() << "MPI provides thread level " << level;
  // Strata ops (small and ring) interleaved with the application's own blocking MPI calls
  // on MPI_COMM_WORLD, as bench_collectives does. The application calls MPI only while none
  // of its strata ops is outstanding (the rule in docs/distributed.md).
  for (int i = 0; i < 50; ++i) {
    Tensor t = full({i % 5 == 0 ? kLarge : int64_t{32}}, static_cast<double>(r + 1));
    world.all_reduce(t)->wait();
    expect_all(t, rank_sum(n, 1), "strata all_reduce " + std::to_string(i));
    int mine = r + i, sum = 0;
    ASSERT_EQ(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(sum, n * (n - 1) / 2 + n * i);
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  }
}

}  // namespace
}  // namespace strata
