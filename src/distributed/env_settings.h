#pragma once
// Reading strata's STRATA_* settings from the environment, with errors that name the
// variable and its value (a typo must not silently fall back to a default).
#include <cstdint>

namespace strata::dist::detail {

// A non-negative integer: `fallback` when unset or empty; strata::Error naming the variable
// and `unit` ("byte count", "count of microseconds") when it is not one.
int64_t env_count(const char* name, int64_t fallback, const char* unit);

// 0 or 1; -1 when unset or empty; strata::Error otherwise.
int env_switch(const char* name);

// STRATA_DEBUG_COLLECTIVES: set to anything but "" or "0".
bool debug_collectives_from_env();

}  // namespace strata::dist::detail
