#pragma once
// The build identity check at dist::init: every rank all-gathers a description of the strata
// build it runs (version, compiler and its version, C++ standard library ABI, pointer and
// long sizes, byte order, the MPI library's version, build type and options) and its host
// name, and compares the description's hash with rank 0's. Hosts that run different builds
// would otherwise meet in collectives that do not match (a newer build may add a stage,
// change a message layout or a wire type) and hang or corrupt data far from the cause.
#include <mpi.h>

#include <string>

namespace strata::dist::mpi {

// This process's build description ("strata 0.1.0 [GNU 13.2.0, ...]"); the test-only
// STRATA_TEST_BUILD_IDENTITY replaces it.
std::string build_identity();

// Collective over `world` (blocking; called by init before any other collective). Throws
// strata::Error on every rank alike when any rank's build differs from rank 0's, naming each
// such rank with its host and both descriptions.
void check_build_identity(MPI_Comm world);

}  // namespace strata::dist::mpi
