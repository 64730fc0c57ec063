#pragma once
// The seam between init.cpp (no MPI headers) and the backends.
#include <memory>
#include <string>

#include "strata/distributed/process_group.h"

namespace strata::dist::detail {

struct Backend {
  std::unique_ptr<ProcessGroup> world;
  int local_rank = 0;
  int local_size = 1;
};

#ifdef STRATA_HAS_MPI
Backend start_mpi();  // src/distributed/mpi/runtime.cpp
void stop_mpi();
class ArrivalBoard;
// Null when `bootstrap` is not an MPI group (src/distributed/mpi/arrival_board_mpi.cpp).
std::unique_ptr<ArrivalBoard> make_mpi_arrival_board(ProcessGroup& bootstrap, const std::string& name);
#endif
#ifdef STRATA_HAS_NCCL
std::unique_ptr<ProcessGroup> make_nccl_group(ProcessGroup& bootstrap,
                                              const std::string& name);  // src/distributed/nccl
#endif
// A world of one process without MPI (src/distributed/local/process_group_local.cpp).
std::unique_ptr<ProcessGroup> make_local_world();

}  // namespace strata::dist::detail
