// A rank killed mid-run (run with mpirun --enable-recovery, which keeps the survivors
// alive): the survivors' next collective fails within its timeout naming the dead rank.
// Each survivor prints SURVIVOR_OK when its assertions passed; the CMake driver counts them.
#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>

#include "distributed/dist_test_util.h"

namespace strata {
namespace {

TEST(DistKill, SurvivorsNameTheDeadRank) {
  auto& world = dist::world();
  ASSERT_EQ(world.size(), 3);
  world.set_timeout(std::chrono::milliseconds(1500));
  Tensor t = ones({4});
  world.all_reduce(t)->wait();  // #0: everyone alive
  EXPECT_EQ(t.to_vector<double>()[0], 3);
  if (world.rank() == 1) raise(SIGKILL);
  auto start = std::chrono::steady_clock::now();
  std::string err = test::error_of([&] { world.all_reduce(t)->wait(); });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(err.find("all_reduce #1"), std::string::npos) << err;
  EXPECT_NE(err.find("group 'world'"), std::string::npos) << err;
  EXPECT_NE(err.find("ranks 1 of 3 had not reached it"), std::string::npos) << err;
  EXPECT_LT(secs, 5.0);
  std::printf("rank %d saw: %s\n", world.rank(), err.c_str());
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  strata::dist::init({.timeout = std::chrono::seconds(30)});
  int rc = RUN_ALL_TESTS();
  if (rc == 0) std::printf("SURVIVOR_OK rank %d\n", strata::dist::world().rank());
  std::fflush(stdout);
  // No MPI_Finalize: its handshake would wait for the dead rank.
  _exit(rc);
}
