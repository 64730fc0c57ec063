#include "strata/core/error.h"

#include <atomic>

namespace strata {
namespace {
std::atomic<int> g_error_rank{-1};
}

void set_error_rank(int rank) { g_error_rank.store(rank); }
int error_rank() { return g_error_rank.load(); }

namespace detail {
void throw_error(const char* file, int line, const std::string& message) {
  std::ostringstream os;
  int rank = error_rank();
  if (rank >= 0) os << "[rank " << rank << "] ";
  os << message << " (" << file << ":" << line << ")";
  throw Error(os.str());
}
}  // namespace detail
}  // namespace strata
