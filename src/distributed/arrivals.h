#pragma once
// Which ranks have reached an op: a side channel for backends that cannot tell by
// themselves. NCCL reports no per-rank progress, so when an NCCL collective expires nothing
// in NCCL says who is late. An ArrivalBoard carries "I reached op #seq" between the ranks of
// a group over another transport (MPI: src/distributed/mpi/arrival_board_mpi.cpp), so that the
// timeout message can name the ranks that have not reached the op, as the MPI backend's does.
//
// Backend-neutral on purpose: the logic is tested over MPI alone (tests/distributed/
// distributed/test_arrival_board.cpp), on machines without a GPU.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata::dist {
class ProcessGroup;
}

namespace strata::dist::detail {

// The answer of ArrivalBoard::missing.
struct Laggards {
  std::vector<int> ranks;  // group ranks that have not announced the op, ascending
  // False when the answer could not be brought up to date (the MPI runtime is finalized or
  // failed, or it could not be read within the budget): `ranks` is then not to be trusted,
  // and messages say the ranks are unknown instead of guessing.
  bool fresh = false;
  std::string why;  // when !fresh: why
};

class ArrivalBoard {
 public:
  virtual ~ArrivalBoard() = default;
  // This rank has reached op `seq` of the group (seqs are announced in increasing order):
  // tells the peers without blocking. Best effort: never throws (a lost announcement only
  // makes a later message less precise).
  virtual void entered(int64_t seq) = 0;
  // The group ranks that have not announced `seq` yet. Reads the peers' announcements for at
  // most `budget` (returns as soon as every rank has announced it). Thread-safe.
  virtual Laggards missing(int64_t seq, std::chrono::milliseconds budget) = 0;
  virtual int size() const = 0;
  // "ranks 1, 2", or "group ranks 1 (world ranks 3)" where the two differ.
  virtual std::string describe(const std::vector<int>& ranks) const = 0;
  // A board for a sub-group, as ProcessGroup::split: collective over this board's ranks,
  // each passing the (ascending, partitioning) list of group ranks of its own sub-group; the
  // new board's ranks are the indices into that list. The caller has checked the lists.
  virtual std::unique_ptr<ArrivalBoard> split(std::span<const int> ranks, const std::string& name) = 0;
};

// How long a timeout message waits for the peers' announcements to arrive.
inline constexpr std::chrono::milliseconds kArrivalBudget{200};

// A board over the ranks of `bootstrap` (same ranks, same order); collective over it. Null
// when `bootstrap` is not an MPI group (a local world): then the ranks are unknown.
std::unique_ptr<ArrivalBoard> make_arrival_board(ProcessGroup& bootstrap, const std::string& name);

// The clause of a timeout message about op `seq`: "group ranks 1 (world ranks 3) of 2 had not
// reached it", "every rank had entered it (...)", or why the ranks are unknown (`board` null,
// or no fresh answer within `budget`).
std::string describe_arrivals(ArrivalBoard* board, int64_t seq, std::chrono::milliseconds budget = kArrivalBudget);

}  // namespace strata::dist::detail
