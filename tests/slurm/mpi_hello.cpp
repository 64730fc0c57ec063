// A plain MPI program for tests/slurm/run_slurm_test.sh: checks that the ranks started by
// `srun --mpi=pmix` (or mpirun) form one world and can reduce, and prints how the launcher
// described each rank (Slurm's and Open MPI's local-rank variables, the PMIx namespace).
// Prints one line per rank ending in "OK" and exits 0 only when every check passed.
#include <mpi.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::string env_or(const char* name, const char* fallback = "-") {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string(fallback);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // An optional argument: the world size the launcher was asked for.
  int expected_size = argc > 1 ? std::atoi(argv[1]) : size;
  bool ok = size == expected_size;
  if (!ok) std::fprintf(stderr, "mpi_hello: rank %d: world size %d, expected %d\n", rank, size, expected_size);

  // Sum of the ranks in two dtypes, and a max: every rank must see the same results.
  long long sum = 0, mine = rank;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  const long long want = static_cast<long long>(size) * (size - 1) / 2;
  if (sum != want) {
    std::fprintf(stderr, "mpi_hello: rank %d: allreduce sum %lld, expected %lld\n", rank, sum, want);
    ok = false;
  }
  float fsum = 0.f, fmine = 0.5f * static_cast<float>(rank + 1);
  MPI_Allreduce(&fmine, &fsum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const float fwant = 0.25f * static_cast<float>(size) * static_cast<float>(size + 1);
  if (fsum != fwant) {
    std::fprintf(stderr, "mpi_hello: rank %d: float allreduce %g, expected %g\n", rank, fsum, fwant);
    ok = false;
  }
  int max_rank = -1;
  MPI_Allreduce(&rank, &max_rank, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (max_rank != size - 1) {
    std::fprintf(stderr, "mpi_hello: rank %d: max rank %d, expected %d\n", rank, max_rank, size - 1);
    ok = false;
  }

  // Under srun, Slurm's view of the rank must agree with MPI's.
  const std::string slurm_procid = env_or("SLURM_PROCID");
  if (slurm_procid != "-" && std::atoi(slurm_procid.c_str()) != rank) {
    std::fprintf(stderr, "mpi_hello: rank %d: SLURM_PROCID=%s\n", rank, slurm_procid.c_str());
    ok = false;
  }

  // Every rank agrees that all passed before anyone reports success.
  int all_ok = 0, my_ok = ok ? 1 : 0;
  MPI_Allreduce(&my_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::printf(
      "mpi_hello: rank %d of %d on %s: sum %lld; SLURM_PROCID=%s SLURM_LOCALID=%s "
      "OMPI_COMM_WORLD_LOCAL_RANK=%s PMIX_NAMESPACE=%s PMIX_RANK=%s %s\n",
      rank, size, host, sum, slurm_procid.c_str(), env_or("SLURM_LOCALID").c_str(),
      env_or("OMPI_COMM_WORLD_LOCAL_RANK").c_str(), env_or("PMIX_NAMESPACE").c_str(), env_or("PMIX_RANK").c_str(),
      all_ok ? "OK" : "FAILED");
  std::fflush(stdout);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
