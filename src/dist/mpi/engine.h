#pragma once
// The per-process MPI engine: one worker thread makes every MPI call of the process
// (MPI_Init_thread included, so MPI_THREAD_FUNNELED suffices). Callers enqueue ops; the
// worker *starts* them in global issue order (so two groups' ops start in the same relative
// order on every rank, which rules out cross-group deadlock) and progresses all started ops
// together with MPI_Test, so that a send and a recv issued back to back both make progress.
// The worker is also the watchdog: an op past its deadline fails with a message naming the
// op, its sequence number, the group and the ranks that have not entered it.
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/dist/types.h"

namespace strata::dist::mpi {

using Clock = std::chrono::steady_clock;

// Throws strata::Error naming the MPI call and the MPI error string (worker thread only).
void check_mpi(int rc, const char* call);
#define STRATA_MPI(call) ::strata::dist::mpi::check_mpi((call), #call)

// What a group shares between its ProcessGroupMPI facade (caller thread) and the worker.
struct GroupState {
  std::string name;
  int rank = 0;
  int size = 1;
  std::vector<int> global_ranks;
  MPI_Comm comm = MPI_COMM_NULL;   // collectives and point-to-point
  MPI_Comm watch = MPI_COMM_NULL;  // side channel: "I entered op #seq" notifications
  // Our own collectives' point-to-point traffic (ring.h): a communicator of its own, so
  // that it can never match the user's send/recv; the tag is the op's sequence number.
  MPI_Comm ring = MPI_COMM_NULL;
  int tag_ub = 32767;  // MPI_TAG_UB of `ring`
  int64_t next_seq = 0;            // issue side (under the engine lock)

  mutable std::mutex mu;       // guards the fields below
  std::string broken;          // non-empty once unusable: the reason
  std::vector<int64_t> entered;  // last op seq each member started (-1: none yet)
  CommStats stats;

  // "group 'dp(ranks 0,2)'" plus the ranks (group and world) of `members`.
  std::string describe_ranks(const std::vector<int>& members) const;
  // Group ranks whose last entered op is below `seq`.
  std::vector<int> missing(int64_t seq) const;
};

// The completion state shared by a Work handle and the engine.
struct WorkState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string error;  // non-empty on failure
  // Set at submit, read by Work::synchronize(timeout) to name the op on expiry.
  std::string title;
  std::shared_ptr<GroupState> group;
  int64_t seq = -1;
};

// What an op's `poll` reports to the worker loop.
enum class PollResult { Waiting, Progressed, Done };

// One enqueued op. `stages` are started one after the other (each may post MPI requests);
// `finish` runs on the worker when the last stage's requests completed. Both may throw
// strata::Error, which fails the op without breaking the group (every rank sees the same
// data when they throw from a check on gathered values).
// An op whose last stage sets `poll` drives its own requests instead (the ring, ring.h):
// once the stages' requests completed, the worker calls poll on every pass until it
// returns Done, then runs `finish`; the deadline applies as for any op. poll keeps its
// requests in its own state; if it throws, the op fails and breaks the group (its
// requests may still be posted), and the op is kept alive for good, like a timed-out one.
struct Op {
  std::string kind;  // "all_reduce", "split", ...
  bool sequenced = true;  // false for bookkeeping ops (freeing a communicator)
  std::string detail;  // "float32, 12 elements"
  std::shared_ptr<GroupState> group;
  int64_t seq = -1;  // assigned by Engine::submit for sequenced ops
  Clock::time_point deadline = Clock::time_point::max();
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<WorkState> work;
  std::vector<std::function<void(Op&)>> stages;
  std::function<void(Op&)> finish;
  std::function<PollResult(Op&)> poll;
  // Worker-side state.
  size_t next_stage = 0;
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;

  std::string title() const;  // "all_reduce #3 (float32, 4 elements) in group 'world'"
  MPI_Request& add_request() {
    requests.push_back(MPI_REQUEST_NULL);
    return requests.back();
  }
};

struct InitResult {
  std::shared_ptr<GroupState> world;
  int local_rank = 0;
  int local_size = 1;
};

class Engine {
 public:
  // Starts the worker, initialises MPI on it and builds the world group.
  static InitResult start();
  static Engine* get();  // null before start and after finalize
  static bool finalized();
  // Waits for queued work, frees communicators, finalises MPI, joins the worker.
  static void finalize();

  void submit(std::unique_ptr<Op> op);
  bool debug_collectives() const { return debug_; }
  // Adds a group to the side channel's polling (worker only: called by make_group).
  void register_group(const std::shared_ptr<GroupState>& g) { groups_.push_back(g); }
  std::mutex& mutex() { return mu_; }

 private:
  Engine() = default;
  void run(InitResult* result, std::string* init_error, std::mutex* m, std::condition_variable* cv, bool* ready);
  void loop();
  bool step(Clock::time_point now);
  void start_stage(Op& op);
  void time_out(Op& op);
  void fail(Op& op, const std::string& why, bool break_group);
  void complete(Op& op);
  void publish_entered(Op& op);
  void drain_watch();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Op>> incoming_;  // guarded by mu_
  bool stop_ = false;                          // guarded by mu_
  std::deque<std::unique_ptr<Op>> queue_;      // worker only: not yet started
  std::vector<std::unique_ptr<Op>> active_;    // worker only: started
  // Ops that failed with requests still posted (timeouts): MPI may still write to their
  // buffers, so they are never destroyed.
  std::vector<std::unique_ptr<Op>> zombies_;
  std::vector<std::weak_ptr<GroupState>> groups_;  // worker only: for the watch channel
  struct SideSend {
    std::unique_ptr<int64_t> value;
    MPI_Request request;
  };
  std::deque<SideSend> side_sends_;
  std::thread worker_;
  bool debug_ = false;
  std::chrono::microseconds spin_{100};  // see loop()
  bool we_initialised_mpi_ = false;
};

// Builds a GroupState for `comm` (takes ownership), with its watch communicator (worker only).
std::shared_ptr<GroupState> make_group(MPI_Comm comm, std::string name, std::vector<int> global_ranks);

}  // namespace strata::dist::mpi
