#include "distributed/arrivals.h"

#include "distributed/backend.h"
#include "strata/distributed/process_group.h"

namespace strata::dist::detail {

std::unique_ptr<ArrivalBoard> make_arrival_board(ProcessGroup& bootstrap, const std::string& name) {
#ifdef STRATA_HAS_MPI
  return make_mpi_arrival_board(bootstrap, name);
#else
  (void)bootstrap;
  (void)name;
  return nullptr;
#endif
}

std::string describe_arrivals(ArrivalBoard* board, int64_t seq, std::chrono::milliseconds budget) {
  if (board == nullptr)
    return "which ranks had not reached it is unknown (NCCL reports no per-rank progress, and the group was "
           "not made over an MPI group, whose side channel would name them)";
  Laggards l = board->missing(seq, budget);
  if (!l.fresh)
    return "which ranks had not reached it is unknown (the side channel that reports arrivals could not be read" +
           (l.why.empty() ? std::string() : ": " + l.why) + ")";
  if (l.ranks.empty()) return "every rank had entered it (one may have died or stopped inside it)";
  return board->describe(l.ranks) + " of " + std::to_string(board->size()) + " had not reached it";
}

}  // namespace strata::dist::detail
