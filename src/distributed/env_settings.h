#pragma once
// Reading strata's STRATA_* settings from the environment, with errors that name the
// variable and its value (a typo must not silently fall back to a default).
#include <cstdint>
#include <string>

namespace strata::dist::detail {

// A non-negative integer: `fallback` when unset or empty; strata::Error naming the variable
// and `unit` ("byte count", "count of microseconds") when it is not one.
int64_t env_count(const char* name, int64_t fallback, const char* unit);

// 0 or 1; -1 when unset or empty; strata::Error otherwise.
int env_switch(const char* name);

// STRATA_DEBUG_COLLECTIVES: set to anything but "" or "0".
bool debug_collectives_from_env();

// STRATA_MPI_HIERARCHICAL (hierarchy.h): -1 unset (automatic), 0 flat, 1 hierarchical at
// every size. Read each time a group is made (benchmarks set it between splits); Engine::start
// reads it once first, so that a bad value fails at init.
int hierarchical_mode();

// STRATA_TEST_NODE_SIZE (topology.h, tests only): pretend nodes of this many consecutive world
// ranks; 0 when unset. Read once.
int64_t test_node_size();

// STRATA_DEBUG_PATHS: set to anything but "" or "0": group rank 0 prints which algorithm
// (shm, hierarchical, ring, mpi) each kind of collective of a group takes, the first time.
bool debug_paths();

// STRATA_TEST_BUILD_IDENTITY (build_identity.h, tests only): replaces this process's build
// description; null when unset.
const char* test_build_identity();

// STRATA_STARTUP_BOARD_DIR (startup_board.h): where the startup board lives; "" when unset.
std::string startup_board_base_dir();

// STRATA_TEST_STOP_RANK_AT_INIT (tests only): the world rank that stops itself (SIGSTOP)
// just before MPI initialisation; -1 when unset. strata::Error when not a rank number.
int test_stop_rank_at_init();

}  // namespace strata::dist::detail
