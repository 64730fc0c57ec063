// Roll call on a timeout (engine.h): which members of a group are still making progress.
#include <algorithm>
#include <thread>

#include "distributed/mpi/engine.h"

namespace strata::dist::mpi {
namespace {

void size_answers(GroupState& g) {
  if (g.answers.size() != static_cast<size_t>(g.size)) g.answers.assign(static_cast<size_t>(g.size), {-1, -1});
}

}  // namespace

void Engine::send_side(MPI_Comm comm, int peer, int tag, std::array<int64_t, 3> msg, int count) {
  SideSend s{std::make_unique<std::array<int64_t, 3>>(msg), MPI_REQUEST_NULL};
  // Best effort: a lost side message only makes a later timeout message less precise.
  if (MPI_Isend(s.value->data(), count, MPI_INT64_T, peer, tag, comm, &s.request) == MPI_SUCCESS)
    side_sends_.push_back(std::move(s));
}

PeerState Engine::op_state(const GroupState& g, int64_t seq) const {
  auto is_it = [&](const std::unique_ptr<Op>& o) { return o->group.get() == &g && o->seq == seq; };
  if (std::any_of(active_.begin(), active_.end(), is_it)) return PeerState::Inside;
  if (std::any_of(zombies_.begin(), zombies_.end(), is_it)) return PeerState::Failed;
  if (std::any_of(queue_.begin(), queue_.end(), is_it)) return PeerState::NotStarted;
  std::lock_guard<std::mutex> lk(g.mu);
  if (g.entered[static_cast<size_t>(g.rank)] < seq) return PeerState::NotStarted;
  // Retired: completed, or failed without requests left posted (the group then says so).
  return g.broken.empty() ? PeerState::Completed : PeerState::Failed;
}

void Engine::on_status(GroupState& g, int from, const std::array<int64_t, 3>& msg) {
  if (from < 0 || from >= g.size) return;
  const int64_t seq = msg[1];
  if (msg[0] == kStatusQuery) {
    // The asker is inside op #seq and has timed out there: that is its answer too.
    const PeerState mine = op_state(g, seq);
    {
      std::lock_guard<std::mutex> lk(g.mu);
      size_answers(g);
      g.answers[static_cast<size_t>(from)] = {seq, static_cast<int64_t>(PeerState::Failed)};
    }
    send_side(g.watch, from, kTagStatus, {kStatusAnswer, seq, static_cast<int64_t>(mine)}, 3);
  } else if (msg[0] == kStatusAnswer) {
    std::lock_guard<std::mutex> lk(g.mu);
    size_answers(g);
    g.answers[static_cast<size_t>(from)] = {seq, msg[2]};
  }
}

std::vector<int> Engine::roll_call(GroupState& g, int64_t seq, std::chrono::milliseconds budget) {
  if (g.watch == MPI_COMM_NULL || g.size <= 1) return {};
  auto unanswered = [&] {
    std::vector<int> out;
    {
      std::lock_guard<std::mutex> lk(g.mu);
      size_answers(g);
      for (int r = 0; r < g.size; ++r)
        if (r != g.rank && g.answers[static_cast<size_t>(r)][0] != seq) out.push_back(r);
    }
    // A peer that destroyed the group has sent "closed" (retire_watch) and answers no more:
    // it has left the op. Probed, not received: retire_watch counts it later.
    std::erase_if(out, [&](int r) {
      int flag = 0;
      return MPI_Iprobe(r, kTagClosed, g.watch, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag;
    });
    return out;
  };
  drain_watch();  // answers already on the way (a peer's own roll call about this op)
  for (int peer : unanswered()) send_side(g.watch, peer, kTagStatus, {kStatusQuery, seq, 0}, 3);
  // The progress lock is held: keep draining every group's watch, so that peers rolling
  // their own calls at the same moment (on any group) get this rank's answers.
  const Clock::time_point until = Clock::now() + budget;
  std::vector<int> silent = unanswered();
  while (!silent.empty() && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    drain_watch();
    silent = unanswered();
  }
  return silent;
}

}  // namespace strata::dist::mpi
