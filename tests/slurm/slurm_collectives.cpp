// strata's world group under `srun --mpi=pmix` (tests/slurm/run_slurm_test.sh): the ranks,
// the local rank from Slurm's variables, and all_reduce / all_gather / reduce_scatter
// results. A plain program rather than gtest so that it prints one line per rank ending in
// "OK" (the script's --expect) and exits non-zero on any failed check.
//   slurm_collectives [expected world size]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/distributed/init.h"
#include "strata/tensor/factory.h"

namespace {

namespace dist = strata::dist;

int failures = 0;

void check(bool ok, int rank, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "slurm_collectives: rank %d: %s\n", rank, what.c_str());
  ++failures;
}

// -1 when the variable is not set.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

void check_all_reduce(dist::ProcessGroup& g) {
  const int r = g.rank(), n = g.size();
  const int64_t m = 1000;
  // Element i of rank r is r + 1 + i: the sum over ranks is n(n+1)/2 + n*i, exact in float.
  std::vector<float> values(m);
  for (int64_t i = 0; i < m; ++i) values[i] = static_cast<float>(r + 1 + i);
  strata::Tensor t = strata::from_vector(values, {m});
  g.all_reduce(t)->wait();
  std::vector<float> got = t.to_vector<float>();
  int bad = 0;
  for (int64_t i = 0; i < m; ++i) bad += got[i] != static_cast<float>(n * (n + 1) / 2 + n * i);
  check(bad == 0, r, "all_reduce(sum, float32): " + std::to_string(bad) + " of 1000 elements wrong");

  strata::Tensor mx = strata::full({7}, static_cast<double>(r), {.dtype = strata::DType::Float64});
  g.all_reduce(mx, dist::ReduceOp::Max)->wait();
  for (double v : mx.to_vector<double>()) check(v == n - 1, r, "all_reduce(max, float64) = " + std::to_string(v));
}

void check_all_gather(dist::ProcessGroup& g) {
  const int r = g.rank(), n = g.size();
  // A total that does not divide by n: the last chunks are shorter (see process_group.h).
  const int64_t total = 10 * n + 3;
  const int64_t begin = g.chunk_begin(total, r), len = g.chunk_size(total, r);
  std::vector<float> mine(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) mine[i] = static_cast<float>(begin + i);
  strata::Tensor in = strata::from_vector(mine, {len});
  strata::Tensor out = strata::full({total}, -1.0);
  g.all_gather(out, in)->wait();
  std::vector<float> got = out.to_vector<float>();
  int bad = 0;
  for (int64_t i = 0; i < total; ++i) bad += got[i] != static_cast<float>(i);
  check(bad == 0, r, "all_gather of " + std::to_string(total) + " elements: " + std::to_string(bad) + " wrong");
}

void check_reduce_scatter(dist::ProcessGroup& g) {
  const int r = g.rank(), n = g.size();
  const int64_t total = 8 * n;
  // Rank q contributes q + i at element i: element i of the sum is n(n-1)/2 + n*i.
  std::vector<float> values(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) values[i] = static_cast<float>(r + i);
  strata::Tensor in = strata::from_vector(values, {total});
  const int64_t begin = g.chunk_begin(total, r), len = g.chunk_size(total, r);
  strata::Tensor out = strata::zeros({len});
  g.reduce_scatter(out, in)->wait();
  std::vector<float> got = out.to_vector<float>();
  int bad = 0;
  for (int64_t i = 0; i < len; ++i) bad += got[i] != static_cast<float>(n * (n - 1) / 2 + n * (begin + i));
  check(bad == 0, r, "reduce_scatter: " + std::to_string(bad) + " of " + std::to_string(len) + " wrong");
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    dist::ProcessGroup& world = dist::init();
    rank = world.rank();
    const int n = world.size();
    const int expected = argc > 1 ? std::atoi(argv[1]) : env_int("SLURM_NTASKS");
    if (expected > 0)
      check(n == expected, rank, "world size " + std::to_string(n) + ", expected " + std::to_string(expected));

    // Under srun the ranks and local ranks come from Slurm (Open MPI's
    // OMPI_COMM_WORLD_LOCAL_RANK is only set by mpirun).
    if (const int procid = env_int("SLURM_PROCID"); procid >= 0)
      check(rank == procid, rank, "SLURM_PROCID=" + std::to_string(procid));
    const int slurm_local = env_int("SLURM_LOCALID");
    if (slurm_local >= 0)
      check(dist::local_rank() == slurm_local, rank,
            "local_rank() " + std::to_string(dist::local_rank()) + ", SLURM_LOCALID " + std::to_string(slurm_local));
    if (env_int("SLURM_STEP_NUM_NODES") == 1 || env_int("SLURM_NNODES") == 1)
      check(dist::local_size() == n, rank,
            "local_size() " + std::to_string(dist::local_size()) + " on one node of " + std::to_string(n) + " ranks");

    check_all_reduce(world);
    check_all_gather(world);
    check_reduce_scatter(world);

    // Every rank reports only once all agree that every check passed.
    strata::Tensor ok = strata::full({1}, failures == 0 ? 1.0 : 0.0);
    world.all_reduce(ok, dist::ReduceOp::Min)->wait();
    const bool all_ok = ok.item() == 1.0;
    std::printf("slurm_collectives: rank %d of %d, local rank %d of %d (SLURM_LOCALID=%d): %s\n", rank, n,
                dist::local_rank(), dist::local_size(), slurm_local, all_ok ? "OK" : "FAILED");
    std::fflush(stdout);
    dist::finalize();
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "slurm_collectives: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
