#pragma once
// The end of an example's main(): failures become one line on stderr and exit status 1.
#include <functional>

namespace strata::examples {

// Runs `body`; an exception prints "<program>: <message>" and returns 1. With several ranks
// the process exits at once without MPI_Finalize: a failed collective leaves the group
// unusable and a peer may be dead or stuck, so finalize (which runs at exit) would wait for
// it forever (docs/distributed.md); mpirun then ends the other ranks.
int run_example(const char* program, const std::function<int()>& body);

}  // namespace strata::examples
