// What only the MPI backend's shared-memory collectives (src/distributed/mpi/shm_collectives.h) have:
// slots reused op after op, and direct reads (CMA) the kernel refuses. Built into dist_shm
// beside test_collective_paths.cpp (the behaviour every path shares) and run under the same
// environments: STRATA_MPI_SHM_MIN_BYTES=0 and 4 KiB slots, on 2, 3 and 4 ranks, and with
// direct reads forced on and off (tests/CMakeLists.txt).
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "distributed/distributed/collective_check_util.h"

namespace strata {
namespace {

using test::make;
using test::same_bytes;

TEST(DistShm, ManyOpsInARowReuseTheSlots) {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  for (int i = 0; i < 50; ++i) {
    const int64_t len = 1000 + 977 * i;
    Tensor t = full({len}, static_cast<double>(me + i));
    world.all_reduce(t)->wait();
    ASSERT_TRUE(same_bytes(t, full({len}, n * (n - 1) / 2.0 + n * i))) << "op " << i;
  }
}

// Ranks that pass different sizes would put the slot streams out of step (one rank
// publishes more pieces than its peers read) and feed a later op stale pieces. Every piece
// carries its op's signature, so the first piece read from a rank with another size fails
// the op on that reader, naming both ops; the group is unusable afterwards.
TEST(DistShm, SizeMismatchAcrossRanksFailsNamingBothOps) {
  const char* cma = std::getenv("STRATA_MPI_SHM_CMA");
  if (cma != nullptr && std::string(cma) == "1") GTEST_SKIP() << "direct reads exchange no pieces";
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  std::vector<int> everyone;
  for (int r = 0; r < n; ++r) everyone.push_back(r);
  auto g = world.split(everyone, "mismatch");
  g->set_timeout(std::chrono::seconds(5));
  Tensor t = full({5000 + 1500 * me}, 1.0);  // several 4 KiB pieces; another size on every rank
  std::string err = test::error_of([&] { g->all_reduce(t)->wait(); });
  EXPECT_NE(err.find("issued a different op than this rank"), std::string::npos) << err;
  EXPECT_NE(err.find(std::to_string(5000 + 1500 * me) + " elements"), std::string::npos) << err;
  err = test::error_of([&] { g->barrier()->wait(); });
  EXPECT_NE(err.find("unusable after an earlier failure"), std::string::npos) << err;
  world.barrier()->wait();
  // Other groups are unaffected.
  Tensor u = full({5000}, 1.0);
  world.all_reduce(u)->wait();
  EXPECT_TRUE(same_bytes(u, full({5000}, static_cast<double>(n))));
}

// Where the kernel refuses direct reads (here: every rank non-dumpable and without
// CAP_SYS_PTRACE, as under ptrace restrictions), a group made afterwards with CMA forced
// on finds out at creation and uses the slots on every rank; an op reading a peer directly
// would fail with EPERM. The world (made with CMA on) runs no shared-memory op until the
// process is restored.
class RefuseDirectReads {
 public:
  RefuseDirectReads() {
    EXPECT_EQ(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), 0);
    EXPECT_EQ(syscall(SYS_capget, &header_, saved_), 0);
    __user_cap_data_struct caps[2] = {saved_[0], saved_[1]};
    caps[0].effective &= ~(1u << CAP_SYS_PTRACE);
    EXPECT_EQ(syscall(SYS_capset, &header_, caps), 0);
  }
  ~RefuseDirectReads() {
    syscall(SYS_capset, &header_, saved_);
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  }

 private:
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2] = {};
};

// Whether every rank's read of its right neighbour is refused (pids and addresses through
// all_to_all, which is MPI's own collective).
bool direct_reads_refused() {
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  static int64_t probe = 42;
  std::vector<double> mine;
  for (int r = 0; r < n; ++r) {
    mine.push_back(static_cast<double>(getpid()));
    mine.push_back(static_cast<double>(reinterpret_cast<uintptr_t>(&probe)));
  }
  Tensor in = make(mine, DType::Int64), all = zeros({2 * n}, {.dtype = DType::Int64});
  world.all_to_all(all, in)->wait();
  const std::vector<int64_t> v = all.to_vector<int64_t>();
  const int peer = (me + 1) % n;
  int64_t got = 0;
  iovec local{&got, sizeof(got)};
  iovec remote{reinterpret_cast<void*>(v[static_cast<size_t>(2 * peer + 1)]), sizeof(got)};
  const pid_t pid = static_cast<pid_t>(v[static_cast<size_t>(2 * peer)]);
  const bool refused = process_vm_readv(pid, &local, 1, &remote, 1, 0) < 0 && errno == EPERM;
  Tensor flags = full({n}, refused ? 1.0 : 0.0, {.dtype = DType::Int32});
  Tensor every = zeros({n}, {.dtype = DType::Int32});
  world.all_to_all(every, flags)->wait();
  for (int32_t f : every.to_vector<int32_t>())
    if (f == 0) return false;
  return true;
}

TEST(DistShm, DirectReadsRefusedByTheKernelFallBackToSlots) {
  const char* cma = std::getenv("STRATA_MPI_SHM_CMA");
  if (cma == nullptr || std::string(cma) != "1") GTEST_SKIP() << "runs with STRATA_MPI_SHM_CMA=1";
  auto& world = dist::world();
  const int n = world.size(), me = world.rank();
  bool refused = false;
  {
    RefuseDirectReads refuse;
    refused = direct_reads_refused();
    if (refused) {
      std::vector<int> members;
      for (int r = 0; r < n; ++r) members.push_back(r);
      auto g = world.split(members, "cma_refused");
      const int64_t m = 100003;
      Tensor t = full({m}, me + 1.0);
      g->all_reduce(t)->wait();
      EXPECT_TRUE(same_bytes(t, full({m}, n * (n + 1) / 2.0)));
      Tensor out = zeros({g->chunk_size(m, me)});
      g->reduce_scatter(out, full({m}, 2.0 * me))->wait();
      EXPECT_TRUE(same_bytes(out, full({g->chunk_size(m, me)}, n * (n - 1) * 1.0)));
      Tensor gathered = zeros({m});
      g->all_gather(gathered, full({g->chunk_size(m, me)}, 5.0))->wait();
      EXPECT_TRUE(same_bytes(gathered, full({m}, 5.0)));
    }
    world.barrier()->wait();  // every rank done with the refused state
  }
  world.barrier()->wait();  // every rank restored before the world's next op reads it
  if (!refused) GTEST_SKIP() << "the kernel still allows direct reads here";
}

}  // namespace
}  // namespace strata
