#include "parallel/pipeline_simulator.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include "strata/core/error.h"

namespace strata::parallel {
namespace {

using Kind = PipelineActionKind;

// A transfer some rank has posted.
struct Posted {
  int rank = 0;
  size_t action = 0;  // index in that rank's list
  const PipelineAction* op = nullptr;
  int64_t posted = 0;
  int64_t met = -1;  // when it met its partner; -1 while it waits
  int number = 0;    // its position among the channel's sends (or receives), for messages
};

// Transfers from one rank to another, met first come first served on each side.
struct Channel {
  std::deque<size_t> sends, recvs;  // posted and still waiting; one of the two is always empty
  int sent = 0, received = 0;
};

// What one rank has done for one (micro-batch, chunk).
struct Unit {
  bool forward = false, backward = false;
  bool activation_in = false, grad_in = false, activation_out = false, grad_out = false;
};

struct RankState {
  size_t pc = 0;
  int64_t time = 0;
  std::vector<size_t> waiting;  // the posted transfers of the action at pc; empty: not posted
  std::vector<Unit> units;      // by micro_batch * chunks + chunk
  int in_flight = 0;
};

class Simulator {
 public:
  Simulator(const PipelineSchedule& s, SimulationCosts costs) : s_(s), costs_(costs), p_(s.shape.ranks) {
    STRATA_CHECK(s.shape.ranks >= 1 && s.shape.micro_batches >= 1 && s.shape.chunks >= 1, label(),
                 ": ranks, micro_batches and chunks must all be at least 1");
    STRATA_CHECK(static_cast<int>(s.actions.size()) == p_, label(), ": has action lists for ", s.actions.size(),
                 " ranks, needs ", p_);
    ranks_.resize(p_);
    for (auto& r : ranks_) r.units.resize(static_cast<size_t>(s.shape.micro_batches) * s.shape.chunks);
    out_.busy.assign(p_, 0);
    out_.peak_in_flight.assign(p_, 0);
    out_.timeline.resize(p_);
  }

  PipelineSimulation run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < p_; ++r)
        while (step(r)) progress = true;
    }
    bool stuck = false;
    for (int r = 0; r < p_; ++r) stuck |= ranks_[r].pc < s_.actions[r].size();
    if (stuck) deadlock();
    check_complete();
    for (int r = 0; r < p_; ++r) out_.makespan = std::max(out_.makespan, ranks_[r].time);
    return std::move(out_);
  }

 private:
  std::string label() const {
    return detail::concat("pipeline schedule (", to_string(s_.kind), ", ranks ", s_.shape.ranks, ", micro-batches ",
                          s_.shape.micro_batches, ", chunks ", s_.shape.chunks, ")");
  }
  std::string at(int rank, size_t action) const {
    return detail::concat("rank ", rank, " at action #", action, " (", to_string(s_.actions[rank][action]), ")");
  }
  Unit& unit(int rank, const PipelineAction& a) {
    return ranks_[rank].units[static_cast<size_t>(a.micro_batch) * s_.shape.chunks + a.chunk];
  }

  // Runs or advances the action at the rank's pc; false when the rank is done or waits.
  bool step(int r) {
    RankState& st = ranks_[r];
    if (st.pc >= s_.actions[r].size()) return false;
    const PipelineAction& a = s_.actions[r][st.pc];
    check_fields(r, a);
    if (a.is_compute()) {
      compute(r, a);
    } else if (st.waiting.empty()) {
      STRATA_CHECK(!a.transfers().empty(), label(), ": ", at(r, st.pc), " is an empty batch");
      for (const PipelineAction& op : a.transfers()) post(r, op);
      return true;
    } else {
      int64_t done = st.time;
      for (size_t i : st.waiting) {
        if (posted_[i].met < 0) return false;
        done = std::max(done, posted_[i].met);
      }
      for (size_t i : st.waiting) {
        const PipelineAction& op = *posted_[i].op;
        if (op.kind == Kind::RecvActivation) unit(r, op).activation_in = true;
        if (op.kind == Kind::RecvGrad) unit(r, op).grad_in = true;
      }
      st.waiting.clear();
      st.time = done;
    }
    ++st.pc;
    return true;
  }

  void check_fields(int r, const PipelineAction& a) const {
    if (a.kind == Kind::CommBatch) {
      for (const PipelineAction& op : a.batch)
        STRATA_CHECK(op.kind != Kind::CommBatch && !op.is_compute(), label(), ": ", at(r, ranks_[r].pc),
                     " may hold only single transfers");
      for (const PipelineAction& op : a.batch) check_fields(r, op);
      return;
    }
    STRATA_CHECK(
        a.micro_batch >= 0 && a.micro_batch < s_.shape.micro_batches && a.chunk >= 0 && a.chunk < s_.shape.chunks,
        label(), ": ", at(r, ranks_[r].pc), " names a micro-batch or chunk out of range");
    if (a.is_compute()) return;
    const int stage = s_.stage(r, a.chunk), last = s_.num_stages() - 1;
    const bool to_next = a.kind == Kind::SendActivation || a.kind == Kind::RecvGrad;
    const int other = to_next ? stage + 1 : stage - 1;
    STRATA_CHECK(other >= 0 && other <= last, label(), ": ", at(r, ranks_[r].pc), ": stage ", stage, " is the ",
                 to_next ? "last" : "first", " stage, it has no ", to_next ? "next" : "previous", " stage");
    STRATA_CHECK(a.peer == other % p_, label(), ": ", at(r, ranks_[r].pc), ": the ", to_next ? "next" : "previous",
                 " stage (", other, ") is on rank ", other % p_);
  }

  void compute(int r, const PipelineAction& a) {
    RankState& st = ranks_[r];
    Unit& u = unit(r, a);
    const int stage = s_.stage(r, a.chunk);
    const bool forward = a.kind == Kind::Forward;
    if (forward) {
      STRATA_CHECK(!u.forward, label(), ": ", at(r, st.pc), " runs a second time");
      STRATA_CHECK(stage == 0 || u.activation_in, label(), ": ", at(r, st.pc),
                   " before its input activation was received");
      u.forward = true;
      out_.peak_in_flight[r] = std::max(out_.peak_in_flight[r], ++st.in_flight);
    } else {
      STRATA_CHECK(!u.backward, label(), ": ", at(r, st.pc), " runs a second time");
      STRATA_CHECK(u.forward, label(), ": ", at(r, st.pc), " before its forward");
      STRATA_CHECK(stage == s_.num_stages() - 1 || u.grad_in, label(), ": ", at(r, st.pc),
                   " before its output gradient was received");
      u.backward = true;
      --st.in_flight;
    }
    const int64_t cost = forward ? costs_.forward : costs_.backward;
    out_.timeline[r].push_back({forward, a.micro_batch, a.chunk, st.time, st.time + cost});
    out_.busy[r] += cost;
    st.time += cost;
  }

  void post(int r, const PipelineAction& op) {
    RankState& st = ranks_[r];
    Unit& u = unit(r, op);
    const bool send = op.is_send();
    switch (op.kind) {
      case Kind::SendActivation:
        STRATA_CHECK(u.forward, label(), ": ", at(r, st.pc), " sends an activation before its forward");
        STRATA_CHECK(!u.activation_out, label(), ": ", at(r, st.pc), " sends an activation a second time");
        u.activation_out = true;
        break;
      case Kind::SendGrad:
        STRATA_CHECK(u.backward, label(), ": ", at(r, st.pc), " sends a gradient before its backward");
        STRATA_CHECK(!u.grad_out, label(), ": ", at(r, st.pc), " sends a gradient a second time");
        u.grad_out = true;
        break;
      default: break;
    }
    const int src = send ? r : op.peer, dst = send ? op.peer : r;
    Channel& ch = channels_[{src, dst}];
    posted_.push_back({r, st.pc, &op, st.time, -1, send ? ch.sent++ : ch.received++});
    const size_t me = posted_.size() - 1;
    st.waiting.push_back(me);
    std::deque<size_t>& partners = send ? ch.recvs : ch.sends;
    if (partners.empty()) {
      (send ? ch.sends : ch.recvs).push_back(me);
      return;
    }
    const size_t other = partners.front();
    partners.pop_front();
    meet(send ? me : other, send ? other : me);
  }

  void meet(size_t send_id, size_t recv_id) {
    Posted& snd = posted_[send_id];
    Posted& rcv = posted_[recv_id];
    const PipelineAction& s = *snd.op;
    const PipelineAction& r = *rcv.op;
    const bool activation = s.kind == Kind::SendActivation;
    const bool same = (r.kind == (activation ? Kind::RecvActivation : Kind::RecvGrad)) &&
                      r.micro_batch == s.micro_batch &&
                      s_.stage(rcv.rank, r.chunk) == s_.stage(snd.rank, s.chunk) + (activation ? 1 : -1);
    STRATA_CHECK(same, label(), ": rank ", snd.rank, "'s send #", snd.number, " to rank ", rcv.rank, ", ", to_string(s),
                 " (action #", snd.action, "), meets rank ", rcv.rank, "'s receive #", rcv.number, " from rank ",
                 snd.rank, ", ", to_string(r), " (action #", rcv.action,
                 "): transfers between two ranks meet in issue order, so both ranks must list them in the same order");
    snd.met = rcv.met = std::max(snd.posted, rcv.posted);
  }

  [[noreturn]] void deadlock() const {
    std::string report;
    for (int r = 0; r < p_; ++r) {
      const RankState& st = ranks_[r];
      if (st.pc >= s_.actions[r].size()) continue;
      std::string unmet;
      for (size_t i : st.waiting)
        if (posted_[i].met < 0) unmet += (unmet.empty() ? "" : ", ") + to_string(*posted_[i].op);
      report += detail::concat("; ", at(r, st.pc), " waits for ", unmet);
    }
    std::string finished;
    for (int r = 0; r < p_; ++r)
      if (ranks_[r].pc >= s_.actions[r].size()) finished += detail::concat(finished.empty() ? "" : ", ", r);
    STRATA_FAIL(label(), " deadlocks: no rank can progress", report,
                finished.empty() ? "" : "; finished: rank(s) " + finished);
  }

  void check_complete() const {
    for (int r = 0; r < p_; ++r)
      for (int mb = 0; mb < s_.shape.micro_batches; ++mb)
        for (int c = 0; c < s_.shape.chunks; ++c) {
          const Unit& u = ranks_[r].units[static_cast<size_t>(mb) * s_.shape.chunks + c];
          for (bool forward : {true, false})
            STRATA_CHECK(forward ? u.forward : u.backward, label(), ": rank ", r, " never runs ",
                         forward ? "forward" : "backward", "(micro-batch ", mb, ", chunk ", c, ")");
        }
  }

  const PipelineSchedule& s_;
  SimulationCosts costs_;
  int p_;
  std::vector<RankState> ranks_;
  std::vector<Posted> posted_;
  std::map<std::pair<int, int>, Channel> channels_;
  PipelineSimulation out_;
};

}  // namespace

double PipelineSimulation::bubble_fraction(int rank) const {
  const int64_t work = busy.at(rank);
  return work == 0 ? 0.0 : static_cast<double>(makespan - work) / static_cast<double>(work);
}

double PipelineSimulation::bubble_fraction() const {
  double worst = 0;
  for (size_t r = 0; r < busy.size(); ++r) worst = std::max(worst, bubble_fraction(static_cast<int>(r)));
  return worst;
}

PipelineSimulation simulate_pipeline(const PipelineSchedule& schedule, SimulationCosts costs) {
  return Simulator(schedule, costs).run();
}

}  // namespace strata::parallel
