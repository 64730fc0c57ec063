#include "distributed/mpi/engine.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <sstream>

#include "distributed/env_settings.h"
#include "distributed/mpi/build_identity.h"
#include "distributed/mpi/hierarchy.h"
#include "distributed/mpi/shm_arena.h"
#include "distributed/mpi/topology.h"
#include "distributed/startup_watchdog.h"
#include "strata/core/error.h"

namespace strata::dist::mpi {
namespace {

Engine* g_engine = nullptr;   // owned; leaked at finalize on purpose (see finalize)
std::atomic<int> g_state{0};  // 0 not started, 1 running, 2 finalized

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, static_cast<size_t>(len));
}

std::string join(const std::vector<int>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os.str();
}

// STRATA_MPI_CALLER_SPIN_US: how long a waiting caller keeps driving without progress
// before it hands back to the worker and sleeps (0: callers never drive).
std::chrono::microseconds env_micros(const char* name, std::chrono::microseconds fallback) {
  return std::chrono::microseconds(detail::env_count(name, fallback.count(), "count of microseconds"));
}

}  // namespace

void check_mpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) STRATA_FAIL("MPI call failed: ", call, ": ", mpi_error_string(rc));
}

std::string GroupState::describe_ranks(const std::vector<int>& members) const {
  std::vector<int> world;
  bool same = true;
  for (int m : members) {
    world.push_back(global_ranks[static_cast<size_t>(m)]);
    same = same && world.back() == m;
  }
  if (same) return "ranks " + join(members);
  return "group ranks " + join(members) + " (world ranks " + join(world) + ")";
}

std::vector<int> GroupState::missing(int64_t seq) const {
  std::lock_guard<std::mutex> lk(mu);
  std::vector<int> out;
  for (int r = 0; r < size; ++r)
    if (entered[static_cast<size_t>(r)] < seq) out.push_back(r);
  return out;
}

std::string Op::title() const {
  // Plain concatenation: built for every op at submit, where an ostringstream cost ~1 us.
  std::string t = kind;
  if (seq >= 0) t += " #" + std::to_string(seq);
  if (!detail.empty()) t += " (" + detail + ")";
  if (group) t += " in group '" + group->name + "'";
  return t;
}

std::shared_ptr<GroupState> make_group(MPI_Comm comm, std::string name, std::vector<int> global_ranks) {
  auto g = std::make_shared<GroupState>();
  g->name = std::move(name);
  g->comm = comm;
  STRATA_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  STRATA_MPI(MPI_Comm_rank(comm, &g->rank));
  STRATA_MPI(MPI_Comm_size(comm, &g->size));
  STRATA_MPI(MPI_Comm_dup(comm, &g->watch));
  STRATA_MPI(MPI_Comm_set_errhandler(g->watch, MPI_ERRORS_RETURN));
  STRATA_MPI(MPI_Comm_dup(comm, &g->ring));
  STRATA_MPI(MPI_Comm_set_errhandler(g->ring, MPI_ERRORS_RETURN));
  int* tag_ub = nullptr;
  int has_tag_ub = 0;
  STRATA_MPI(MPI_Comm_get_attr(g->ring, MPI_TAG_UB, &tag_ub, &has_tag_ub));
  if (has_tag_ub && tag_ub) g->tag_ub = *tag_ub;
  g->global_ranks = std::move(global_ranks);
  g->entered.assign(static_cast<size_t>(g->size), -1);
  NodeSplit nodes = split_by_node(g->comm, g->rank);
  g->shm = ShmArena::create(g->comm, g->rank, g->size, nodes.size);
  if (!g->shm) g->hier = Hierarchy::create(g->comm, g->rank, g->size, nodes);
  STRATA_MPI(MPI_Comm_free(&nodes.comm));
  if (Engine* e = Engine::get()) e->register_group(g);
  return g;
}

// ---------------------------------------------------------------- lifecycle

Engine* Engine::get() { return g_state.load() == 1 ? g_engine : nullptr; }
bool Engine::finalized() { return g_state.load() == 2; }

InitResult Engine::start() {
  STRATA_CHECK(g_state.load() != 2,
               "dist::init: the distributed runtime was already finalized (MPI cannot be "
               "initialised twice in one process)");
  STRATA_CHECK(g_state.load() == 0, "dist::init: already initialised");
  auto* engine = new Engine();
  engine->debug_ = detail::debug_collectives_from_env();
  engine->caller_spin_ = env_micros("STRATA_MPI_CALLER_SPIN_US", engine->caller_spin_);
  engine->callers_drive_ = engine->caller_spin_.count() > 0;
  // Read here first so that a bad value fails init on this thread (make_group reads them
  // again on the worker, inside collectives that a throw on one rank would leave hanging).
  detail::hierarchical_mode();
  detail::env_count("STRATA_MPI_HIER_SEGMENT_BYTES", 0, "byte count");
  detail::test_node_size();
  InitResult result;
  std::string error;
  std::mutex m;
  std::condition_variable cv;
  bool ready = false;
  g_engine = engine;
  g_state.store(1);  // make_group registers with the engine during start
  engine->worker_ = std::thread([&] { engine->run(&result, &error, &m, &cv, &ready); });
  std::unique_lock<std::mutex> lk(m);
  cv.wait(lk, [&] { return ready; });
  lk.unlock();
  if (!error.empty()) {
    engine->worker_.join();
    g_state.store(0);
    g_engine = nullptr;
    delete engine;
    STRATA_FAIL(error);
  }
  return result;
}

void Engine::run(InitResult* result, std::string* init_error, std::mutex* m, std::condition_variable* cv, bool* ready) {
  bool ok = false;
  try {
    int initialised = 0;
    STRATA_MPI(MPI_Initialized(&initialised));
    int provided = 0;
    if (!initialised) {
      // SERIALIZED: waiting callers drive MPI themselves (engine.h), one thread at a time, and
      // an application may call MPI between our ops. With FUNNELED only, every MPI call
      // stays on this thread, which initialises MPI.
      STRATA_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
      we_initialised_mpi_ = true;
      STRATA_CHECK(provided >= MPI_THREAD_FUNNELED, "dist::init: MPI provides thread level ", provided,
                   " but strata needs at least MPI_THREAD_FUNNELED (", MPI_THREAD_FUNNELED, ")");
      if (provided < MPI_THREAD_SERIALIZED) callers_drive_ = false;
    } else {
      // The application initialised MPI on another thread; we call it from our worker.
      STRATA_MPI(MPI_Query_thread(&provided));
      STRATA_CHECK(provided >= MPI_THREAD_SERIALIZED,
                   "dist::init: MPI was initialised by the application with "
                   "thread level ",
                   provided,
                   "; strata calls MPI from its own worker thread and needs "
                   "MPI_THREAD_SERIALIZED (",
                   MPI_THREAD_SERIALIZED, ") or MPI_THREAD_MULTIPLE");
    }
    detail::startup_reached(detail::StartupPhase::WorldSetup);
    STRATA_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm world;
    STRATA_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &world));
    // Before any other collective: a different build may run a different sequence of them.
    check_build_identity(world);
    int size = 0;
    STRATA_MPI(MPI_Comm_size(world, &size));
    std::vector<int> ranks(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) ranks[static_cast<size_t>(i)] = i;
    result->world = make_group(world, "world", ranks);
    MPI_Comm node;
    STRATA_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    STRATA_MPI(MPI_Comm_rank(node, &result->local_rank));
    STRATA_MPI(MPI_Comm_size(node, &result->local_size));
    STRATA_MPI(MPI_Comm_free(&node));
    ok = true;
  } catch (const std::exception& e) {
    *init_error = e.what();
  }
  {
    std::lock_guard<std::mutex> lk(*m);
    *ready = true;
  }
  cv->notify_all();
  if (!ok) {
    if (we_initialised_mpi_) MPI_Finalize();
    return;
  }
  loop();
  // No caller may be inside MPI (or enter it) once we finalise.
  std::lock_guard<std::mutex> progress(progress_mu_);
  mpi_finalized_ = true;
  // Communicators with requests that will never complete (timed-out ops) are left to
  // MPI_Finalize. Every live rank reaches this point, so the finalize handshake completes;
  // a dead rank makes it hang or fail, which is why fault paths exit without finalize.
  groups_.clear();
  closing_.clear();  // watches still waiting for a peer's "closed": MPI_Finalize releases them
  // The application may have finalised MPI itself (a second MPI_Finalize aborts the job).
  int already = 0;
  MPI_Finalized(&already);
  if (we_initialised_mpi_ && !already) MPI_Finalize();
}

void Engine::finalize() {
  if (g_state.load() != 1) {
    return;
  }
  Engine* e = g_engine;
  {
    std::lock_guard<std::mutex> lk(e->mu_);
    e->stop_ = true;
  }
  e->cv_.notify_all();
  if (e->worker_.joinable()) e->worker_.join();
  g_state.store(2);
  // The engine stays allocated: a late Work handle or group facade may still reach it
  // through a stale pointer; every entry point checks g_state first.
}

void Engine::submit(std::unique_ptr<Op> op) {
  std::shared_ptr<WorkState> work = op->work;
  bool wake = false, start_here = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    STRATA_CHECK(!stop_, op->kind, ": the distributed runtime is shutting down (dist::finalize was called)");
    if (op->sequenced && op->group) {
      op->seq = op->group->next_seq++;
    }
    if (op->timeout.count() > 0) op->deadline = Clock::now() + op->timeout;
    if (work) {
      work->title = op->title();
      work->group = op->group;
      work->seq = op->seq;
    }
    incoming_.push_back(std::move(op));
    outstanding_.fetch_add(1);
    // A lingering worker (see loop()) looks for new ops by itself within linger_nap_;
    // waking it costs ~20 us of a shared core per op, which a caller that waits at once
    // (and drives) does not need. When callers never drive, the worker is the only one
    // that progresses: wake it.
    wake = worker_deep_asleep_ || (!callers_drive_ && worker_asleep_);
    start_here = callers_drive_ && !caller_driving_.load() && callers_wanting_ == 0;
  }
  if (wake) cv_.notify_all();
  // Start the op right away on this thread (issue order holds: the progress lock
  // serialises passes and each pass takes in every submitted op in order).
  if (start_here && progress_mu_.try_lock()) {
    pass(Clock::now());
    progress_mu_.unlock();
  }
}

// ---------------------------------------------------------------- waiting callers

void Engine::wait(WorkState& work, Clock::time_point until) {
  while (!work.done_flag.load()) {
    if (Clock::now() >= until) return;
    // Driving ends early when another caller drives, the worker would not let go, or
    // nothing moved for caller_spin_: then sleep until the op is published (the worker
    // enforces its deadline).
    if (callers_drive_ && drive(work, until)) continue;
    std::unique_lock<std::mutex> lk(work.mu);
    if (until == Clock::time_point::max()) work.cv.wait(lk, [&] { return work.done; });
    else work.cv.wait_until(lk, until, [&] { return work.done; });
    return;
  }
}

bool Engine::drive(WorkState& work, Clock::time_point until) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (caller_driving_.load() || stop_) return false;
    ++callers_wanting_;  // the worker lets go after its current pass and sleeps
  }
  bool got = false;
  const Clock::time_point give_up = Clock::now() + std::chrono::milliseconds(2);
  while (!(got = progress_mu_.try_lock())) {
    if (work.done_flag.load() || caller_driving_.load() || Clock::now() > give_up) break;
    std::this_thread::yield();
  }
  bool wake_worker = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    --callers_wanting_;
    if (got) caller_driving_.store(true);
    wake_worker = !got && worker_asleep_ && callers_wanting_ == 0 && !caller_driving_.load();
  }
  if (!got) {
    if (wake_worker) cv_.notify_all();
    return false;
  }
  bool stalled = false;
  if (!mpi_finalized_) {
    Clock::time_point last_progress = Clock::now();
    while (!work.done_flag.load()) {
      const Clock::time_point now = Clock::now();
      if (now >= until) break;
      if (pass(now)) {
        last_progress = now;
      } else if (now - last_progress > caller_spin_) {
        stalled = true;
        break;
      } else {
        std::this_thread::yield();
      }
    }
  }
  progress_mu_.unlock();
  {
    std::lock_guard<std::mutex> lk(mu_);
    caller_driving_.store(false);
    wake_worker = worker_asleep_ && (outstanding_.load() > 0 || stop_);
  }
  if (wake_worker) cv_.notify_all();
  return !stalled && !mpi_finalized_;
}

// ---------------------------------------------------------------- worker

void Engine::loop() {
  // Polling policy (measured in docs/performance.md): after the last progress the worker
  // keeps polling, yielding the core between polls, for spin_ (100 us); then it sleeps
  // between polls, 50 us at first, growing to 1 ms, so that an op waiting on a slow or absent peer
  // costs a few percent of a core. Idle (nothing outstanding) or while a caller drives, it
  // sleeps on the condition variable: spinning there would take the core from the ranks'
  // compute (2 ranks on 2 cores), and from the caller driving MPI.
  Clock::time_point last_progress = Clock::now();
  Clock::time_point last_busy = Clock::now();
  std::chrono::microseconds nap{50};
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      bool slept = false;
      for (;;) {
        const bool work = outstanding_.load() > 0;
        if (!work && stop_) return;
        const Clock::time_point now = Clock::now();
        if (work && !caller_driving_.load() && callers_wanting_ == 0) break;
        if (work) last_busy = now;
        // Idle (or a caller drives): no MPI call. For linger_ after the last op seen, nap
        // in steps of linger_nap_ and look again, so that submit need not wake us; then
        // block until woken. Nothing here calls MPI, so the application may call MPI itself
        // between our ops (MPI_THREAD_SERIALIZED). The peers' side-channel notifications
        // wait in MPI's queue; the next op drains them before it can need them.
        worker_asleep_ = true;
        if (now - last_busy < linger_) {
          cv_.wait_for(lk, linger_nap_);
        } else {
          worker_deep_asleep_ = true;
          cv_.wait(lk);
          worker_deep_asleep_ = false;
        }
        worker_asleep_ = false;
        slept = true;
      }
      if (slept) {
        last_progress = Clock::now();
        nap = std::chrono::microseconds(50);
      }
    }
    if (!progress_mu_.try_lock()) {  // a caller is taking over
      std::this_thread::yield();
      continue;
    }
    const bool progressed = pass(Clock::now());
    progress_mu_.unlock();
    const Clock::time_point now = Clock::now();
    last_busy = now;
    if (progressed) {
      last_progress = now;
      nap = std::chrono::microseconds(50);
    } else if (now - last_progress < spin_) {
      std::this_thread::yield();
    } else {
      // Waiting on the network or on a slow peer: do not burn a shared core. The naps
      // grow to 1 ms while nothing happens (a late peer costs ~1% of a core).
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(1000));
    }
  }
}

bool Engine::pass(Clock::time_point now) {
  if (mpi_finalized_) return false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    while (!incoming_.empty()) {
      queue_.push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
  }
  if (queue_.empty() && active_.empty()) return false;  // nothing outstanding: no MPI call
  bool progressed = false;
  try {
    progressed = step(now);
    // The side channel only feeds timeout reports: draining it every millisecond is enough
    // (time_out drains it itself).
    if (now - last_drain_ > std::chrono::milliseconds(1)) {
      drain_watch();
      last_drain_ = now;
    }
  } catch (const std::exception& e) {
    // step() catches per-op failures; anything here is an engine bug. Fail everything
    // rather than hang the callers.
    for (auto& op : active_) fail(*op, std::string("internal error: ") + e.what(), true);
    for (auto& op : queue_) fail(*op, std::string("internal error: ") + e.what(), true);
    active_.clear();
    queue_.clear();
    progressed = true;
  }
  publish();
  return progressed;
}

void Engine::publish() {
  // After this pass's last MPI call (see the threading rule in engine.h).
  for (auto& [work, error] : finished_) {
    {
      std::lock_guard<std::mutex> lk(work->mu);
      work->error = std::move(error);
      work->done = true;
      work->done_flag.store(true);
    }
    work->cv.notify_all();
  }
  finished_.clear();
  if (retired_ > 0) {
    outstanding_.fetch_sub(retired_);
    retired_ = 0;
  }
}

// One round over the queue and the started ops (progress lock held). The steps run in this
// order on every pass; each says whether anything moved.
bool Engine::step(Clock::time_point now) {
  bool progressed = start_side_ops();
  progressed |= start_in_order();
  progressed |= poll_active(now);
  progressed |= expire_queued(now);
  return progressed;
}

// Side-channel ops skip the issue order (Op::start_at_submit).
bool Engine::start_side_ops() {
  bool progressed = false;
  for (size_t i = 0; i < queue_.size();) {
    if (!queue_[i]->start_at_submit) {
      ++i;
      continue;
    }
    std::unique_ptr<Op> op = std::move(queue_[i]);
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    progressed = true;
    try {
      start_stage(*op);
    } catch (const std::exception& e) {
      fail(*op, e.what(), false);
      continue;
    }
    active_.push_back(std::move(op));
  }
  return progressed;
}

bool Engine::all_stages_posted() const {
  return std::all_of(active_.begin(), active_.end(),
                     [](const std::unique_ptr<Op>& o) { return o->next_stage >= o->stages.size(); });
}

// Starts queued ops in issue order, but only once every started op has posted its last
// stage: a multi-stage op (debug signature check, split) must not be overtaken.
bool Engine::start_in_order() {
  bool progressed = false;
  while (!queue_.empty() && all_stages_posted()) {
    std::unique_ptr<Op> op = std::move(queue_.front());
    queue_.pop_front();
    progressed = true;
    if (op->group && op->sequenced) {
      std::string broken;
      {
        std::lock_guard<std::mutex> lk(op->group->mu);
        broken = op->group->broken;
      }
      if (!broken.empty()) {
        fail(*op, "the group is unusable after an earlier failure: " + broken, false);
        continue;
      }
      publish_entered(*op);
    }
    try {
      start_stage(*op);
    } catch (const std::exception& e) {
      // Unless every rank fails alike, the group is unusable: see Op (engine.h).
      fail(*op, e.what(), !op->failure_is_collective || !op->requests.empty());
      if (!op->requests.empty()) zombies_.push_back(std::move(op));
      continue;
    }
    active_.push_back(std::move(op));
  }
  return progressed;
}

// Every started op: test its requests, move it on when they completed, expire it past its
// deadline. Ops that end leave active_ (failed ones with requests posted go to zombies_).
bool Engine::poll_active(Clock::time_point now) {
  bool progressed = false;
  for (size_t i = 0; i < active_.size();) {
    Op& op = *active_[i];
    Fate fate = Fate::Active;
    int flag = 1;
    if (!op.requests.empty()) fate = test_requests(op, flag);
    if (fate == Fate::Active && flag) fate = advance(op, progressed);
    if (fate == Fate::Active && (!flag || op.poll) && now > op.deadline) {
      time_out(op);
      fate = Fate::Zombie;  // its requests can never be cancelled: keep the buffers they write to alive
    }
    if (fate == Fate::Active) {
      ++i;
      continue;
    }
    if (fate == Fate::Zombie) zombies_.push_back(std::move(active_[i]));
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    progressed = true;
  }
  return progressed;
}

// MPI_Testall on the op's requests; `flag` says whether all completed. An MPI error fails
// the op and breaks the group.
Engine::Fate Engine::test_requests(Op& op, int& flag) {
  op.statuses.resize(op.requests.size());
  int rc = MPI_Testall(static_cast<int>(op.requests.size()), op.requests.data(), &flag, op.statuses.data());
  if (rc == MPI_SUCCESS) return Fate::Active;
  int code = rc;
  if (rc == MPI_ERR_IN_STATUS)
    for (auto& st : op.statuses)
      if (st.MPI_ERROR != MPI_SUCCESS && st.MPI_ERROR != MPI_ERR_PENDING) code = st.MPI_ERROR;
  std::string why = "MPI reported an error: " + mpi_error_string(code);
  if (op.group && op.seq >= 0) {
    std::vector<int> missing = op.group->missing(op.seq);
    if (!missing.empty()) why += "; " + op.group->describe_ranks(missing) + " had not reached it";
  }
  fail(op, why, true);
  return Fate::Zombie;
}

// The op's requests completed: start its next stage, or poll it (Op::poll) and finish it
// once done. A throw fails the op.
Engine::Fate Engine::advance(Op& op, bool& progressed) {
  op.requests.clear();  // all completed (MPI_REQUEST_NULL)
  op.request_peers.clear();
  bool polled = false;
  const bool finished_stages = op.next_stage >= op.stages.size();
  try {
    if (!finished_stages) {
      start_stage(op);
      progressed = true;
      return Fate::Active;
    }
    PollResult r = PollResult::Done;
    if (op.poll) {
      polled = true;
      r = op.poll(op);
    }
    if (r != PollResult::Waiting) progressed = true;
    if (r != PollResult::Done) return Fate::Active;
    if (op.finish) op.finish(op);
    complete(op);
    return Fate::Retired;
  } catch (const std::exception& e) {
    progressed = true;
    return fail_advanced(op, e.what(), polled, /*in_stage=*/!finished_stages);
  }
}

Engine::Fate Engine::fail_advanced(Op& op, std::string why, bool polled, bool in_stage) {
  // A poll-driven op may have requests posted that will now never be waited for.
  const bool pending = polled || !op.requests.empty();
  if (polled && op.group && op.seq >= 0) {
    drain_watch();  // the freshest view of who entered (a peer's notice may be in flight)
    std::vector<int> missing = op.group->missing(op.seq);
    if (!missing.empty()) why += "; " + op.group->describe_ranks(missing) + " had not reached it";
  }
  // A stage's failure breaks the group unless every rank fails alike (Op, engine.h);
  // finish runs after the collective completed everywhere.
  fail(op, why, pending || (in_stage && !op.failure_is_collective));
  return pending ? Fate::Zombie : Fate::Retired;
}

// A queued op can expire while it waits behind an earlier op (of another group).
bool Engine::expire_queued(Clock::time_point now) {
  bool progressed = false;
  for (size_t i = 0; i < queue_.size();) {
    Op& op = *queue_[i];
    if (now > op.deadline) {
      fail(op,
           "timed out after " + std::to_string(op.timeout.count()) +
               " ms before this rank could start it (an earlier op is still running)",
           true);
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      progressed = true;
      continue;
    }
    ++i;
  }
  return progressed;
}

void Engine::start_stage(Op& op) {
  auto& stage = op.stages[op.next_stage++];
  stage(op);
}

void Engine::time_out(Op& op) {
  std::string why = "timed out after " + std::to_string(op.timeout.count()) + " ms";
  if (op.group && op.seq >= 0) {
    drain_watch();  // the freshest view of who entered
    std::vector<int> missing = op.group->missing(op.seq);
    std::vector<int> stuck, silent;
    // Every member announced the op: ask them, since a member stopped inside it says no more
    // than one waiting in it. One that does not answer is the one at fault.
    if (missing.empty()) silent = roll_call(*op.group, op.seq, kRollCallBudget);
    if (missing.empty() && silent.empty()) stuck = stuck_on(op);
    if (!silent.empty())
      why += "; every rank had entered it, but " + op.group->describe_ranks(silent) + " of " +
             std::to_string(op.group->size) + " did not answer within " + std::to_string(kRollCallBudget.count()) +
             " ms (stopped, hung or dead inside it)";
    else if (missing.empty() && stuck.empty())
      why += "; every rank had entered it (one may have died or stopped inside it)";
    else if (missing.empty())
      // Every peer announced the op, so the op started everywhere; what is left is data that
      // never arrived or was never taken: the peer died inside the op or cannot be reached
      // (a link down drops its later traffic, and its announcement had crossed before).
      why += "; every rank had entered it, but this rank's transfers with " + op.group->describe_ranks(stuck) +
             " had not completed (unreachable, dead or stopped inside it)";
    else
      why += "; " + op.group->describe_ranks(missing) + " of " + std::to_string(op.group->size) + " had not reached it";
  }
  fail(op, why, true);
}

std::vector<int> Engine::stuck_on(Op& op) {
  std::vector<int> peers;
  if (op.waiting_on) {
    try {
      peers = op.waiting_on();
    } catch (const std::exception&) {
      peers.clear();  // only the message gets less precise
    }
  }
  // Point-to-point requests of the current stage: test each (MPI_Testall, above, changes
  // none while one is incomplete). A request completed here is freed; the op is failing
  // and keeps its buffers alive anyway.
  // MPI's own collectives do not tell which peers they wait on, except on 2 ranks: there
  // the other rank is the only one they talk to.
  for (size_t i = 0; i < op.requests.size() && i < op.request_peers.size(); ++i) {
    if (op.requests[i] == MPI_REQUEST_NULL) continue;
    int peer = op.request_peers[i];
    if (peer < 0 && op.group && op.group->size == 2) peer = 1 - op.group->rank;
    if (peer < 0) continue;
    int flag = 0;
    if (MPI_Test(&op.requests[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) peers.push_back(peer);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

void Engine::fail(Op& op, const std::string& why_in, bool break_group) {
  // The message carries the rank once: drop the prefix of an error thrown on this worker.
  std::string why = why_in;
  if (why.rfind("[rank ", 0) == 0 && why.find("] ") != std::string::npos) why = why.substr(why.find("] ") + 2);
  std::string msg = op.title() + ": " + why;
  if (break_group && op.group) {
    std::lock_guard<std::mutex> lk(op.group->mu);
    if (op.group->broken.empty()) op.group->broken = msg;
  }
  ++retired_;
  if (op.work) finished_.emplace_back(op.work, std::move(msg));
}

void Engine::complete(Op& op) {
  ++retired_;
  if (op.work) finished_.emplace_back(op.work, std::string());
}

void Engine::publish_entered(Op& op) { announce(*op.group, op.seq); }

void Engine::announce(GroupState& g, int64_t seq) {
  {
    std::lock_guard<std::mutex> lk(g.mu);
    auto& mine = g.entered[static_cast<size_t>(g.rank)];
    mine = std::max(mine, seq);
  }
  if (g.watch == MPI_COMM_NULL) return;
  // Best effort: a failed notification only makes a later timeout message less precise.
  for (int peer = 0; peer < g.size; ++peer)
    if (peer != g.rank) send_side(g.watch, peer, kTagEntered, {seq, 0, 0}, 1);
}

bool Engine::drain(GroupState& g) {
  if (g.watch == MPI_COMM_NULL) return true;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagEntered, g.watch, &flag, &st) != MPI_SUCCESS) return false;
    if (!flag) break;
    int64_t seq = -1;
    if (MPI_Recv(&seq, 1, MPI_INT64_T, st.MPI_SOURCE, kTagEntered, g.watch, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return false;
    std::lock_guard<std::mutex> lk(g.mu);
    auto& e = g.entered[static_cast<size_t>(st.MPI_SOURCE)];
    e = std::max(e, seq);
  }
  for (;;) {  // roll calls (rare: only on timeouts)
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagStatus, g.watch, &flag, &st) != MPI_SUCCESS) return false;
    if (!flag) return true;
    std::array<int64_t, 3> msg{};
    if (MPI_Recv(msg.data(), 3, MPI_INT64_T, st.MPI_SOURCE, kTagStatus, g.watch, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return false;
    on_status(g, st.MPI_SOURCE, msg);
  }
}

void Engine::retire_watch(GroupState& g) {
  if (g.watch == MPI_COMM_NULL) return;
  ClosingWatch c;
  c.comm = g.watch;
  g.watch = MPI_COMM_NULL;  // no more announcements or reads on it
  c.open.assign(static_cast<size_t>(g.size), true);
  c.open[static_cast<size_t>(g.rank)] = false;
  c.left = g.size - 1;
  // After this rank's last announcement on it (same communicator and destination: MPI
  // delivers them in order). Were this send to fail, the peer would keep its end until
  // MPI_Finalize, which is harmless.
  for (int peer = 0; peer < g.size; ++peer)
    if (peer != g.rank) send_side(c.comm, peer, kTagClosed, {-1, 0, 0}, 1);
  if (drain_closing(c)) {
    MPI_Comm_free(&c.comm);  // our "closed" sends still complete (MPI allows pending requests)
    return;
  }
  closing_.push_back(std::move(c));
}

bool Engine::drain_closing(ClosingWatch& c) {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c.comm, &flag, &st) != MPI_SUCCESS || !flag) break;
    std::array<int64_t, 3> msg{};
    if (MPI_Recv(msg.data(), 3, MPI_INT64_T, st.MPI_SOURCE, st.MPI_TAG, c.comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      break;
    // An announcement (kTagEntered) or a roll call (kTagStatus) for the destroyed group:
    // nobody reads it any more. A roll call goes unanswered: this rank has sent "closed"
    // already, and the asker may free its end once that arrives; the asker takes the
    // "closed" waiting on its own end for the answer (roll_call.cpp).
    if (st.MPI_TAG == kTagClosed && c.open[static_cast<size_t>(st.MPI_SOURCE)]) {
      c.open[static_cast<size_t>(st.MPI_SOURCE)] = false;
      --c.left;
    }
  }
  return c.left == 0;
}

void Engine::drain_watch() {
  for (size_t i = 0; i < groups_.size();) {
    std::shared_ptr<GroupState> g = groups_[i].lock();
    if (!g) {
      groups_.erase(groups_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    (void)drain(*g);
    ++i;
  }
  // Destroyed groups' watches: freed once every peer's announcements have all arrived.
  for (size_t i = 0; i < closing_.size();) {
    if (!drain_closing(closing_[i])) {
      ++i;
      continue;
    }
    MPI_Comm_free(&closing_[i].comm);
    closing_.erase(closing_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  // Retire completed notifications (in order; a dead peer's may stay pending).
  for (size_t n = 0; n < side_sends_.size() && n < 256;) {
    int flag = 0;
    if (MPI_Test(&side_sends_[n].request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) {
      ++n;
      continue;
    }
    side_sends_.erase(side_sends_.begin() + static_cast<std::ptrdiff_t>(n));
  }
}

}  // namespace strata::dist::mpi
