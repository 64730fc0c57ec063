#include "common/run_example.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "strata/distributed/init.h"

namespace strata::examples {

int run_example(const char* program, const std::function<int()>& body) {
  std::string error;
  try {
    return body();
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::fprintf(stderr, "%s: %s\n", program, error.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  if (dist::is_initialized() && dist::world().size() > 1) std::_Exit(1);
  return 1;
}

}  // namespace strata::examples
