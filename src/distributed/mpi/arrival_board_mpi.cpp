// The MPI arrival board (distributed/arrivals.h). It is a GroupState of its own whose `watch`
// communicator is duplicated (or split) from the bootstrap group's, and it reuses the
// engine's side channel: Engine::announce sends "I entered op #seq" to every peer and
// Engine::drain reads the peers' announcements into GroupState::entered (the engine's
// passes also drain it every millisecond, so announcements never pile up in MPI).
//
// Threading (engine.h): the board makes its MPI calls only from the stages of engine ops.
// Announcing and reading are unsequenced ops started at submit (Op::start_at_submit): they
// take no sequence number from any group and do not wait behind collectives in issue order,
// so a timeout message can still be built while the group's collectives are stuck.
#include <algorithm>
#include <thread>

#include "distributed/arrivals.h"
#include "distributed/backend.h"
#include "distributed/mpi/engine.h"
#include "distributed/mpi/process_group_mpi.h"
#include "strata/core/error.h"

namespace strata::dist::mpi {
namespace {

// The board's state over `comm` (takes ownership); progress-lock holder only (an op's finish).
std::shared_ptr<GroupState> make_board_state(MPI_Comm comm, std::string name, std::vector<int> global_ranks) {
  auto g = std::make_shared<GroupState>();
  g->name = std::move(name);
  g->watch = comm;  // no `comm` or `ring`: the board runs no collectives of the group kind
  STRATA_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  STRATA_MPI(MPI_Comm_rank(comm, &g->rank));
  STRATA_MPI(MPI_Comm_size(comm, &g->size));
  g->global_ranks = std::move(global_ranks);
  g->entered.assign(static_cast<size_t>(g->size), -1);
  if (Engine* e = Engine::get()) e->register_group(g);
  return g;
}

struct Outcome {
  bool done = false;
  std::string error;  // when done: "" on success
};

// Submits `op` and waits for it until `until` (the waiting thread may drive the engine).
Outcome run(std::unique_ptr<Op> op, Clock::time_point until) {
  Outcome out;
  Engine* e = Engine::get();
  if (e == nullptr) {
    out.done = true;
    out.error = Engine::finalized() ? "the distributed runtime is finalized" : "the distributed runtime is not running";
    return out;
  }
  std::shared_ptr<WorkState> work = op->work;
  try {
    e->submit(std::move(op));
  } catch (const std::exception& ex) {
    out.done = true;
    out.error = ex.what();
    return out;
  }
  e->wait(*work, until);
  std::lock_guard<std::mutex> lk(work->mu);
  out.done = work->done;
  out.error = work->error;
  return out;
}

// Turns an engine error into strata::Error, with the rank prefix that Work handles add.
[[noreturn]] void throw_engine_error(const std::string& error) {
  const int rank = error_rank();
  throw Error(rank >= 0 ? "[rank " + std::to_string(rank) + "] " + error : error);
}

class ArrivalBoardMPI final : public detail::ArrivalBoard {
 public:
  ArrivalBoardMPI(std::shared_ptr<GroupState> state, std::chrono::milliseconds timeout)
      : state_(std::move(state)), timeout_(timeout) {}

  ~ArrivalBoardMPI() override {
    Engine* e = Engine::get();
    if (e == nullptr) return;  // finalized: MPI_Finalize released the communicator
    auto op = make_op("free", false);
    op->stages.emplace_back([e](Op& o) {
      // Not freed at once: the peers' announcements may still be on the way to it
      // (Engine::retire_watch).
      e->retire_watch(*o.group);
    });
    try {
      e->submit(std::move(op));
    } catch (const std::exception&) {
      // Shutting down: MPI_Finalize releases it.
    }
  }

  void entered(int64_t seq) override {
    Engine* e = Engine::get();
    if (e == nullptr) return;
    auto op = make_op("announce", true);
    op->stages.emplace_back([e, seq](Op& o) { e->announce(*o.group, seq); });
    try {
      e->submit(std::move(op));
    } catch (const std::exception&) {
      // Shutting down: nobody is left to read it.
    }
  }

  detail::Laggards missing(int64_t seq, std::chrono::milliseconds budget) override {
    detail::Laggards out;
    const Clock::time_point until = Clock::now() + budget;
    auto pause = std::chrono::microseconds(200);
    bool read = false;  // a read completed during this call
    for (;;) {
      auto op = make_op("read", true);
      op->work = std::make_shared<WorkState>();
      op->stages.emplace_back([](Op& o) {
        STRATA_CHECK(Engine::get()->drain(*o.group), "an MPI call failed while reading the announcements");
      });
      Outcome r = run(std::move(op), until);
      if (!r.done) {
        // The budget ran out during a later read (the worker may take a moment to pick
        // it up): the view of the last read of this call is still fresh.
        if (read) {
          out.ranks = state_->missing(seq);
          out.fresh = true;
        } else {
          out.why = "the MPI engine did not read it within " + std::to_string(budget.count()) + " ms";
        }
        return out;
      }
      if (!r.error.empty()) {
        out.why = r.error;
        return out;
      }
      read = true;
      out.ranks = state_->missing(seq);
      const Clock::time_point now = Clock::now();
      // Announcements still in flight arrive within the budget; a rank that never reached
      // the op stays missing until it runs out.
      if (out.ranks.empty() || now >= until) {
        out.fresh = true;
        return out;
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, until - now));
      pause = std::min(pause * 2, std::chrono::microseconds(10000));
    }
  }

  int size() const override { return state_->size; }

  std::string describe(const std::vector<int>& ranks) const override { return state_->describe_ranks(ranks); }

  std::unique_ptr<ArrivalBoard> split(std::span<const int> ranks, const std::string& name) override {
    STRATA_CHECK(!ranks.empty(), "split of arrival board '", state_->name, "': the rank list is empty");
    STRATA_CHECK(std::find(ranks.begin(), ranks.end(), state_->rank) != ranks.end(), "split of arrival board '",
                 state_->name, "': rank ", state_->rank, " is not in its own list");
    std::vector<int> globals;
    for (int r : ranks) {
      STRATA_CHECK(r >= 0 && r < state_->size, "split of arrival board '", state_->name, "': rank ", r,
                   " is out of range for size ", state_->size);
      globals.push_back(state_->global_ranks[static_cast<size_t>(r)]);
    }
    const int color = ranks[0];
    auto result = std::make_shared<std::shared_ptr<GroupState>>();
    // In issue order (a collective on the board's communicator); the barrier first, so that
    // the blocking MPI_Comm_split is entered only once every member has reached it.
    auto op = make_op("split", false);
    op->detail = "new board 'arrivals(" + name + ")'";
    op->timeout = timeout_;
    op->work = std::make_shared<WorkState>();
    op->stages.emplace_back([](Op& o) { STRATA_MPI(MPI_Ibarrier(o.group->watch, &o.add_request())); });
    op->finish = [color, result, name, globals](Op& o) {
      MPI_Comm comm;
      STRATA_MPI(MPI_Comm_split(o.group->watch, color, o.group->rank, &comm));
      *result = make_board_state(comm, "arrivals(" + name + ")", globals);
    };
    Outcome r = run(std::move(op), Clock::time_point::max());
    if (!r.error.empty()) throw_engine_error(r.error);
    return std::make_unique<ArrivalBoardMPI>(*result, timeout_);
  }

 private:
  std::unique_ptr<Op> make_op(const char* kind, bool side_channel) {
    auto op = std::make_unique<Op>();
    op->kind = kind;
    op->sequenced = false;
    op->start_at_submit = side_channel;
    op->group = state_;
    return op;
  }

  std::shared_ptr<GroupState> state_;
  std::chrono::milliseconds timeout_;
};

}  // namespace
}  // namespace strata::dist::mpi

namespace strata::dist::detail {

std::unique_ptr<ArrivalBoard> make_mpi_arrival_board(ProcessGroup& bootstrap, const std::string& name) {
  auto* group = dynamic_cast<mpi::ProcessGroupMPI*>(&bootstrap);
  if (group == nullptr) return nullptr;
  using namespace mpi;
  STRATA_CHECK(Engine::get() != nullptr, "arrival board over group '", bootstrap.name(),
               "': the distributed runtime is ", Engine::finalized() ? "finalized" : "not running");
  // A collective on the bootstrap group's communicator: sequenced with its other ops, so
  // that every rank duplicates it at the same point. Non-blocking (MPI_Comm_idup).
  auto comm = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  auto result = std::make_shared<std::shared_ptr<GroupState>>();
  auto op = std::make_unique<Op>();
  op->kind = "arrival_board";
  op->detail = "for '" + name + "'";
  op->group = group->state();
  op->timeout = bootstrap.timeout();
  op->work = std::make_shared<WorkState>();
  op->stages.emplace_back([comm](Op& o) { STRATA_MPI(MPI_Comm_idup(o.group->comm, comm.get(), &o.add_request())); });
  op->finish = [comm, result, name](Op& o) {
    *result = make_board_state(*comm, "arrivals(" + name + ")", o.group->global_ranks);
  };
  Outcome r = run(std::move(op), Clock::time_point::max());
  if (!r.error.empty()) throw_engine_error(r.error);
  return std::make_unique<ArrivalBoardMPI>(*result, bootstrap.timeout());
}

}  // namespace strata::dist::detail
