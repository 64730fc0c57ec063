// dist::init across ranks that run different strata builds: rank 1 pretends to be another
// build (STRATA_TEST_BUILD_IDENTITY, set here before init on that rank only), and init must
// fail on every rank with a message that names rank 1, its host and both builds. Prints
// "BUILD_IDENTITY_OK rank R" per rank when that holds (ctest counts the lines); without the
// override (argument "same") init must succeed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "strata/distributed/init.h"

int main(int argc, char** argv) {
  const bool same = argc > 1 && std::strcmp(argv[1], "same") == 0;
  const char* rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  const int rank = rank_env ? std::atoi(rank_env) : 0;
  if (!same && rank == 1) setenv("STRATA_TEST_BUILD_IDENTITY", "strata 9.9.9 [a different build]", 1);
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  std::string error;
  try {
    strata::dist::init();
  } catch (const std::exception& e) {
    error = e.what();
  }
  bool ok = false;
  if (same) {
    ok = error.empty();
  } else {
    // Every rank sees rank 1's host; on one machine that is this host too.
    const std::string want_rank = "rank 1 on host " + std::string(host) + " runs 'strata 9.9.9 [a different build]'";
    ok = error.find("the ranks run different strata builds") != std::string::npos &&
         error.find(want_rank) != std::string::npos && error.find("but rank 0 on host") != std::string::npos &&
         error.find("runs 'strata 0.") != std::string::npos;
  }
  if (ok) std::printf("BUILD_IDENTITY_OK rank %d\n", rank);
  else std::fprintf(stderr, "rank %d: unexpected outcome of dist::init: '%s'\n", rank, error.c_str());
  std::fflush(stdout);
  if (same) strata::dist::finalize();
  return ok ? 0 : 1;
}
