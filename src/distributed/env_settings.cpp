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

}  // namespace strata::dist::detail
