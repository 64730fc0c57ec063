// gtest main for tests run under mpirun: every rank runs every test; the job fails when any
// rank fails (the ranks agree on the outcome with a final all_reduce).
#include <gtest/gtest.h>

#include <cstdio>

#include "strata/distributed/init.h"
#include "strata/tensor/factory.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // A generous default: a test that forgets a collective fails instead of hanging ctest.
  auto& world = strata::dist::init({.timeout = std::chrono::seconds(30)});
  int rc = RUN_ALL_TESTS();
  if (!strata::dist::is_initialized()) return rc;  // a test finalized on purpose
  int any = rc != 0 ? 1 : 0;
  try {
    strata::Tensor flag = strata::full({1}, any, {.dtype = strata::DType::Int32});
    world.all_reduce(flag, strata::dist::ReduceOp::Max)->wait();
    any = static_cast<int>(flag.item());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: could not agree on the outcome: %s\n", world.rank(), e.what());
    any = 1;
  }
  strata::dist::finalize();
  if (any && rc == 0) std::fprintf(stderr, "rank %d: another rank failed\n", world.rank());
  return any ? 1 : 0;
}
