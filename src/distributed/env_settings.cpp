#include "distributed/env_settings.h"

#include <cstdlib>
#include <cstring>

#include "strata/core/error.h"

namespace strata::dist::detail {

int64_t env_count(const char* name, int64_t fallback, const char* unit) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  STRATA_CHECK(end != nullptr && *end == '\0' && x >= 0, name, "='", v, "' is not a non-negative ", unit);
  return x;
}

int env_switch(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  STRATA_CHECK(std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0, name, "='", v, "' must be 0 or 1");
  return v[0] == '1' ? 1 : 0;
}

bool debug_collectives_from_env() {
  const char* v = std::getenv("STRATA_DEBUG_COLLECTIVES");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

int hierarchical_mode() { return env_switch("STRATA_MPI_HIERARCHICAL"); }

int64_t test_node_size() {
  static const int64_t v = env_count("STRATA_TEST_NODE_SIZE", 0, "rank count");
  return v;
}

bool debug_paths() {
  static const bool v = [] {
    const char* e = std::getenv("STRATA_DEBUG_PATHS");
    return e != nullptr && *e != '\0' && std::strcmp(e, "0") != 0;
  }();
  return v;
}

const char* test_build_identity() {
  const char* v = std::getenv("STRATA_TEST_BUILD_IDENTITY");
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::string startup_board_base_dir() {
  const char* v = std::getenv("STRATA_STARTUP_BOARD_DIR");
  return v != nullptr ? v : "";
}

int test_stop_rank_at_init() { return static_cast<int>(env_count("STRATA_TEST_STOP_RANK_AT_INIT", -1, "rank number")); }

}  // namespace strata::dist::detail
