#include "checkpoint/crash_point.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "strata/core/error.h"

namespace strata::checkpoint::detail {

void crash_point(const char* point) {
  const char* v = std::getenv("STRATA_TEST_CRASH_AT");
  if (v == nullptr) return;
  const std::string want = v;
  if (want == point) {
    std::fprintf(stderr, "STRATA_TEST_CRASH_AT: killing the process at %s\n", point);
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
  if (want == std::string(point) + ":throw") STRATA_FAIL("STRATA_TEST_CRASH_AT: injected failure at ", point);
}

}  // namespace strata::checkpoint::detail
