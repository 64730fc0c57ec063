#pragma once
// The per-process MPI engine. Callers enqueue ops; ops are *started* in global issue order
// (so two groups' ops start in the same relative order on every rank, which rules out
// cross-group deadlock; side-channel ops, Op::start_at_submit, skip ahead) and all started
// ops are progressed together with MPI_Test, so that a send and a recv issued back to back
// both make progress. An op past its deadline fails with a message naming the op, its
// sequence number, the group and the ranks that have not entered it.
//
// Threading rule (MPI_THREAD_SERIALIZED: any thread may call MPI, one at a time):
// - Only the holder of the *progress lock* (Engine::progress_mu_) makes MPI calls for strata
//   and touches the started-op state (queue_, active_, zombies_, groups_, closing_,
//   side_sends_).
// - A thread waiting in Work::wait()/synchronize() whose op is not done takes the progress
//   lock and runs the engine's passes itself until its op completes, its wait's limit
//   passes, or nothing has progressed for a while (spin_); then it hands back and sleeps.
//   This keeps the two thread wake-ups (caller -> worker, worker -> caller) off the path of
//   an op that is waited on at once.
// - The worker thread (started by Engine::start, which initialises MPI on it) progresses
//   ops nobody drives (DDP overlaps bucket all-reduces with backward through it); it steps
//   aside while a caller drives.
// - A pass publishes the ops it finished (Work done) only after its last MPI call, and a
//   thread takes no pass while no op is outstanding: once every op the application issued
//   has completed, no strata thread is in MPI or enters it before the next op is issued.
//   So the application may call MPI itself between strata ops, as before.
// With MPI_THREAD_FUNNELED only (an MPI without SERIALIZED), callers never drive: every
// MPI call stays on the worker, which initialised MPI.
#include <mpi.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "strata/distributed/types.h"

namespace strata::dist::mpi {

using Clock = std::chrono::steady_clock;
class ShmArena;    // shm_arena.h
struct Hierarchy;  // hierarchy.h

// Throws strata::Error naming the MPI call and the MPI error string (progress-lock holder only).
void check_mpi(int rc, const char* call);
#define STRATA_MPI(call) ::strata::dist::mpi::check_mpi((call), #call)

// What a group shares between its ProcessGroupMPI facade (caller thread) and the engine.
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
  // Shared memory for the collectives when every rank is on one node (shm_arena.h); null
  // otherwise. Set once by make_group.
  std::shared_ptr<ShmArena> shm;
  // Groups over several nodes with the same number of ranks on each: the node arena and the
  // sub-ring of the hierarchical collectives (hierarchy.h); null otherwise. Set by make_group.
  std::shared_ptr<Hierarchy> hier;
  int64_t next_seq = 0;  // issue side (under the engine lock)

  mutable std::mutex mu;         // guards the fields below
  std::string broken;            // non-empty once unusable: the reason
  std::vector<int64_t> entered;  // last op seq each member started (-1: none yet)
  // Per member, its last answer to a roll call (roll_call.cpp): {op seq, PeerState}; {-1, -1}
  // when none. Sized lazily.
  std::vector<std::array<int64_t, 2>> answers;
  std::set<std::string> logged_paths;  // STRATA_DEBUG_PATHS: "op kind/path" already reported

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
  std::atomic<bool> done_flag{false};  // `done`, readable without mu (the driver's loop)
  std::string error;                   // non-empty on failure
  // Set at submit, read by Work::synchronize(timeout) to name the op on expiry.
  std::string title;
  std::shared_ptr<GroupState> group;
  int64_t seq = -1;
};

// What an op's `poll` reports to the engine's pass.
enum class PollResult { Waiting, Progressed, Done };

// One enqueued op. `stages` are started one after the other (each may post MPI requests);
// `finish` runs (on the progress-lock holder) when the last stage's requests completed.
// Both may throw strata::Error, which fails the op. A throw from `finish` (the collective
// has completed on every rank) leaves the group usable; so does one from a stage that set
// `failure_is_collective` (every rank throws alike, e.g. from a check on gathered values).
// Any other stage throw breaks the group: only this rank failed, the peers may have posted
// the collective, and this rank's next op could match it.
// An op whose last stage sets `poll` drives its own requests instead (the ring, ring.h):
// once the stages' requests completed, the worker calls poll on every pass until it
// returns Done, then runs `finish`; the deadline applies as for any op. poll keeps its
// requests in its own state; if it throws, the op fails and breaks the group (its
// requests may still be posted), and the op is kept alive for good, like a timed-out one.
struct Op {
  std::string kind;       // "all_reduce", "split", ...
  bool sequenced = true;  // false for bookkeeping ops (freeing a communicator)
  // Started by the first pass after submit, ahead of ops queued before it (not in issue
  // order): for unsequenced side-channel ops (arrival boards, distributed/arrivals.h) whose one
  // stage only posts or reads point-to-point messages on a communicator of their own, and
  // which must not wait behind a collective's stages.
  bool start_at_submit = false;
  // Set by a stage just before it throws a failure that every rank reaches alike (the
  // debug signature check): the op fails without breaking the group.
  bool failure_is_collective = false;
  std::string detail;  // "float32, 12 elements"
  std::shared_ptr<GroupState> group;
  int64_t seq = -1;  // assigned by Engine::submit for sequenced ops
  Clock::time_point deadline = Clock::time_point::max();
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<WorkState> work;
  std::vector<std::function<void(Op&)>> stages;
  std::function<void(Op&)> finish;
  std::function<PollResult(Op&)> poll;
  // Set by a poll-driven op (the ring): the group ranks its incomplete transfers are with
  // (a receive not yet arrived, a send not yet delivered). A timeout whose every rank had
  // entered the op names them: the peers this rank was stuck on, e.g. across a dead link.
  std::function<std::vector<int>()> waiting_on;
  // Progress-side state (progress lock).
  size_t next_stage = 0;
  std::vector<MPI_Request> requests;
  std::vector<int> request_peers;  // per request: the group rank of a send/recv, -1 for a collective
  std::vector<MPI_Status> statuses;

  std::string title() const;  // "all_reduce #3 (float32, 4 elements) in group 'world'"
  // A request of the current stage; `peer` is the group rank a point-to-point request
  // talks to (-1: a collective, whose peers MPI does not tell).
  MPI_Request& add_request(int peer = -1) {
    requests.push_back(MPI_REQUEST_NULL);
    request_peers.push_back(peer);
    return requests.back();
  }
};

// Roll call (roll_call.cpp). When an op times out although every member announced it, the
// announcements cannot tell a member stopped or dead inside the op from one waiting in it
// like this rank. So the timing-out rank asks every member on the watch communicator
// (tag kTagStatus: {kStatusQuery, seq, 0}) and each member's engine answers from its passes
// ({kStatusAnswer, seq, PeerState}); a member that does not answer within the budget is not
// making progress at all (stopped, hung in a blocking call, dead). A query also tells its
// receiver that the sender is inside op #seq and has timed out there.
// The tags on a watch communicator:
inline constexpr int kTagEntered = 7;  // "I entered op #seq" (Engine::announce)
inline constexpr int kTagClosed = 8;   // the sender has retired its end (Engine::retire_watch)
inline constexpr int kTagStatus = 9;   // roll call: a query or an answer
inline constexpr int64_t kStatusQuery = 1;
inline constexpr int64_t kStatusAnswer = 2;
enum class PeerState : int64_t { Completed = 0, Inside = 1, Failed = 2, NotStarted = 3, Left = 4 };
inline constexpr std::chrono::milliseconds kRollCallBudget{500};

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
  // Blocks until `work` is done or `until` passes, driving the engine on this thread while
  // it can (see the threading rule above). Does not throw for the op's failure.
  void wait(WorkState& work, Clock::time_point until);
  bool debug_collectives() const { return debug_; }
  // Adds a group to the side channel's polling (progress-lock holder: called by make_group).
  void register_group(const std::shared_ptr<GroupState>& g) { groups_.push_back(g); }
  // Side channel (progress-lock holder only, i.e. from an op's stage): records that this
  // rank entered op `seq` of `g` and tells g's peers on g.watch (non-blocking, best effort).
  void announce(GroupState& g, int64_t seq);
  // Reads the peers' pending announcements on g.watch into g.entered; false when an MPI
  // call failed (the view may then be stale).
  bool drain(GroupState& g);
  // Takes g.watch out of use when its group (or arrival board) is destroyed (progress-lock
  // holder only, from the "free" op's stage); g.watch becomes MPI_COMM_NULL. The
  // communicator is not freed at once: a peer's announcements are unmatched sends that may
  // still be in flight to us, and a message reaching a communicator this rank has freed is
  // delivered to whatever communicator next gets its context id (Open MPI's ob1 then
  // crashes in MPI_Comm_dup/split, in mca_pml_ob1_add_comm). So it tells every peer "closed"
  // after its last announcement and keeps draining until every peer's "closed" has arrived
  // (MPI keeps the messages of one sender on one communicator in order); drain_watch frees
  // it then. A peer that never closes leaves it to MPI_Finalize.
  void retire_watch(GroupState& g);

 private:
  // A destroyed group's watch communicator, drained until every peer has closed its end.
  struct ClosingWatch {
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<bool> open;  // per group rank: no "closed" from it yet (false for this rank)
    int left = 0;            // peers still open
  };

  Engine() = default;
  void run(InitResult* result, std::string* init_error, std::mutex* m, std::condition_variable* cv, bool* ready);
  void loop();
  // One round of progress (progress lock held): takes in submitted ops, starts and tests
  // them, drains the side channel, then publishes what finished. No MPI call when nothing
  // is outstanding. Returns whether anything moved.
  bool pass(Clock::time_point now);
  bool drive(WorkState& work, Clock::time_point until);
  bool step(Clock::time_point now);
  // step()'s parts, in order.
  bool start_side_ops();
  bool start_in_order();
  bool poll_active(Clock::time_point now);
  bool expire_queued(Clock::time_point now);
  // What became of a started op in poll_active: still going, retired (published), or failed
  // with requests MPI may still complete (kept in zombies_ for good).
  enum class Fate { Active, Retired, Zombie };
  bool all_stages_posted() const;
  Fate test_requests(Op& op, int& flag);
  // On a timeout: the group ranks the op's incomplete transfers are with (Op::waiting_on,
  // the current stage's point-to-point requests, and on a 2-rank group the other rank for
  // an incomplete collective request), sorted, without repeats.
  std::vector<int> stuck_on(Op& op);
  Fate advance(Op& op, bool& progressed);
  Fate fail_advanced(Op& op, std::string why, bool polled, bool in_stage);
  void start_stage(Op& op);
  void time_out(Op& op);
  void fail(Op& op, const std::string& why, bool break_group);
  void complete(Op& op);
  void publish();
  void publish_entered(Op& op);
  void drain_watch();
  // Reads what arrived on a closing watch; true once every peer has closed it.
  bool drain_closing(ClosingWatch& c);
  // roll_call.cpp: the members of `g` (group ranks) that do not answer a roll call about op
  // `seq` within `budget`, answering the peers' own roll calls meanwhile.
  std::vector<int> roll_call(GroupState& g, int64_t seq, std::chrono::milliseconds budget);
  // A status message from group rank `from` of `g`: records an answer, or answers a query.
  void on_status(GroupState& g, int from, const std::array<int64_t, 3>& msg);
  // What became of this rank's op `seq` of `g`.
  PeerState op_state(const GroupState& g, int64_t seq) const;
  void send_side(MPI_Comm comm, int peer, int tag, std::array<int64_t, 3> msg, int count);

  // mu_ guards incoming_, stop_ and the hand-over flags; cv_ wakes the worker.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Op>> incoming_;
  bool stop_ = false;
  bool worker_asleep_ = false;               // the worker sleeps on cv_
  bool worker_deep_asleep_ = false;          // ... without a time limit: submit must wake it
  int callers_wanting_ = 0;                  // callers trying to take the progress lock
  std::atomic<bool> caller_driving_{false};  // a caller holds the progress lock (written under mu_)
  // Ops submitted and not yet published (done): a pass makes MPI calls only while > 0.
  std::atomic<int64_t> outstanding_{0};

  // The progress lock; it guards everything below (see the threading rule).
  std::mutex progress_mu_;
  std::deque<std::unique_ptr<Op>> queue_;    // not yet started
  std::vector<std::unique_ptr<Op>> active_;  // started
  // Ops that failed with requests still posted (timeouts): MPI may still write to their
  // buffers, so they are never destroyed.
  std::vector<std::unique_ptr<Op>> zombies_;
  std::vector<std::weak_ptr<GroupState>> groups_;  // for the watch channel
  // Watch communicators of destroyed groups, drained until every peer has closed its end
  // (retire_watch).
  std::vector<ClosingWatch> closing_;
  struct SideSend {
    std::unique_ptr<std::array<int64_t, 3>> value;  // the message, alive until sent
    MPI_Request request;
  };
  std::deque<SideSend> side_sends_;
  // Finished in this pass, published (done = true) at its end: work and error ("" = ok).
  std::vector<std::pair<std::shared_ptr<WorkState>, std::string>> finished_;
  int64_t retired_ = 0;  // ops finished in this pass (with or without a Work)
  Clock::time_point last_drain_{};
  bool mpi_finalized_ = false;

  std::thread worker_;
  bool debug_ = false;
  bool callers_drive_ = true;  // false when MPI provides only FUNNELED
  // How long the polling thread (worker or driving caller) keeps polling after the last
  // progress before it backs off (the worker) or hands back to the worker (a caller).
  std::chrono::microseconds spin_{100};
  std::chrono::microseconds caller_spin_{1000};
  // After the last op it saw, the idle worker naps (linger_nap_) and looks for ops for
  // linger_, then sleeps until submit wakes it.
  std::chrono::milliseconds linger_{50};
  std::chrono::microseconds linger_nap_{1000};
  bool we_initialised_mpi_ = false;
};

// Builds a GroupState for `comm` (takes ownership), with its watch communicator (progress-lock
// holder only).
std::shared_ptr<GroupState> make_group(MPI_Comm comm, std::string name, std::vector<int> global_ranks);

}  // namespace strata::dist::mpi
