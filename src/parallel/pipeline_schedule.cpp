// Builds pipeline schedules in two passes: first each rank's steps (its computations in
// order, cut where a batch of transfers goes: the part that differs between GPipe, 1F1B and
// interleaved 1F1B), then the transfers every computation implies, placed into those batches
// by one rule shared by all schedules.
#include "strata/parallel/pipeline_schedule.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "strata/core/error.h"

namespace strata::parallel {
namespace {

using Kind = PipelineActionKind;

struct Compute {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;
};

// A rank's computations cut into steps; one batch of transfers runs between consecutive steps
// (and before the first, after the last).
using Steps = std::vector<std::vector<Compute>>;

// GPipe: every forward (in micro-batch order), then every backward (same order), one per step.
Steps gpipe_steps(const PipelineShape& s) {
  Steps steps;
  for (int pass = 0; pass < 2; ++pass)
    for (int mb = 0; mb < s.micro_batches; ++mb) steps.push_back({{pass == 0, mb, 0}});
  return steps;
}

// The k-th forward (or backward) of a rank in the 1F1B family. Micro-batches go in groups of
// p: a group passes through chunk 0, 1, ..., v-1 (backward: v-1, ..., 0) before the next
// group starts, so that stage s+1 always has p micro-batches' worth of work queued behind the
// first one. With v == 1 this is micro-batch k, chunk 0.
Compute one_f_one_b_unit(const PipelineShape& s, int k, bool forward) {
  const int per_group = s.ranks * s.chunks;
  const int in_group = k % per_group;
  const int chunk = in_group / s.ranks;
  return {forward, (k / per_group) * s.ranks + in_group % s.ranks, forward ? chunk : s.chunks - 1 - chunk};
}

// Forwards rank r runs before its first backward (w_r); steady step i then runs forward
// w_r+i and backward i. The warm-up makes every steady batch meet exactly one batch of each
// neighbour it talks to: a batch whose partners sit in two different batches of a neighbour
// holds the rank until the neighbour reaches the later one (sends wait for their receive).
//  - v == 1, a batch after every computation: rank r's batch after forward w_r+i (send it,
//    receive the gradient for backward i) meets rank r+1's batch after backward i (send that
//    gradient, receive the input of forward w_{r+1}+i+1), so w_r = w_{r+1} + 1; the last rank
//    runs forward 0 then backward 0, so w_r = p-r-1, PipeDream-flush's warm-up.
//  - v > 1, one batch after each forward+backward pair (send both outputs, receive the inputs
//    of forward w_r+i+1 and backward i+1): rank r's batch i meets rank r+1's batch i+1, so
//    w_r = w_{r+1} + 2, and across the wrap (rank p-1 chunk c to rank 0 chunk c+1, where the
//    forward index moves by p) rank p-1's batch i meets rank 0's batch i-p+1 under the same
//    formula. The last rank reaches micro-batch 0's last chunk after (v-1)p forwards, so
//    w_r = (v-1)p + 2(p-r-1), as in Narayanan et al. 2021. A batch after every computation
//    cannot pair up here: the wrap would need w_0 - w_{p-1} = 2p-1 while the links inside a
//    chunk add up to p-1 (the simulator then shows deadlocks, or bubbles several times the
//    theory).
// Capped at the m*v forwards of the step.
int warmup_forwards(const PipelineShape& s, int rank) {
  const int per_rank = s.chunks == 1 ? 1 : 2;
  return std::min((s.chunks - 1) * s.ranks + per_rank * (s.ranks - rank - 1), s.micro_batches * s.chunks);
}

// 1F1B and interleaved 1F1B: warm-up forwards, then forward k+w paired with backward k (one
// step each for v == 1, one step together for v > 1, see above), then the remaining backwards.
Steps one_f_one_b_steps(const PipelineShape& s, int rank) {
  const int total = s.micro_batches * s.chunks;
  const int warmup = warmup_forwards(s, rank);
  Steps steps;
  for (int k = 0; k < warmup; ++k) steps.push_back({one_f_one_b_unit(s, k, true)});
  for (int k = 0; k < total - warmup; ++k) {
    const Compute forward = one_f_one_b_unit(s, warmup + k, true), backward = one_f_one_b_unit(s, k, false);
    if (s.chunks == 1) {
      steps.push_back({forward});
      steps.push_back({backward});
    } else {
      steps.push_back({forward, backward});
    }
  }
  for (int k = std::max(total - warmup, 0); k < total; ++k) steps.push_back({one_f_one_b_unit(s, k, false)});
  return steps;
}

// One transfer, from the step of its producer on src to the step of its consumer on dst.
struct Message {
  bool activation = true;
  int src = 0, dst = 0;
  int micro_batch = 0;
  int src_chunk = 0, dst_chunk = 0;
  int send_batch = 0;  // on src: the batch right after the producer's step
  int recv_batch = 0;  // on dst: at the latest the batch right before the consumer's step
};

// Batch b of a rank runs before its step b (b == steps: after the last one). A tensor is sent
// in the batch right after the step that produced it, and received in the batch right before
// the step that consumes it, but no later than the next receive on the same channel (the
// matching rule: the receiver takes messages in the sender's order, so one that arrives early
// is received early and held), and a rank that sends to itself (p == 1) receives in the batch
// it sends in, since a send posted alone would wait for a receive the rank only posts later.
std::vector<Message> place_messages(const PipelineShape& s, const std::vector<Steps>& steps) {
  const int p = s.ranks, stages = p * s.chunks;
  // step_of[rank][(forward, micro-batch, chunk)] = index of the step that runs it.
  std::vector<std::map<std::tuple<bool, int, int>, int>> step_of(p);
  for (int r = 0; r < p; ++r)
    for (int i = 0; i < static_cast<int>(steps[r].size()); ++i)
      for (const Compute& c : steps[r][i]) step_of[r][{c.forward, c.micro_batch, c.chunk}] = i;
  // Per channel (src, dst), messages in send order (each rank's steps visited in order).
  std::map<std::pair<int, int>, std::vector<Message>> channels;
  for (int r = 0; r < p; ++r)
    for (int i = 0; i < static_cast<int>(steps[r].size()); ++i)
      for (const Compute& c : steps[r][i]) {
        const int stage = c.chunk * p + r;
        const int to = c.forward ? stage + 1 : stage - 1;
        if (to < 0 || to >= stages) continue;
        Message m{c.forward, r, to % p, c.micro_batch, c.chunk, to / p, i + 1, 0};
        m.recv_batch = step_of[m.dst].at({c.forward, c.micro_batch, m.dst_chunk});
        channels[{m.src, m.dst}].push_back(m);
      }
  std::vector<Message> messages;
  for (auto& [ends, channel] : channels) {
    const bool self = ends.first == ends.second;
    for (int j = static_cast<int>(channel.size()) - 1; j >= 0; --j) {
      Message& m = channel[j];
      if (self) m.recv_batch = m.send_batch;
      if (j + 1 < static_cast<int>(channel.size())) m.recv_batch = std::min(m.recv_batch, channel[j + 1].recv_batch);
    }
    messages.insert(messages.end(), channel.begin(), channel.end());
  }
  return messages;
}

// Interleaves each rank's steps with its transfers: every batch becomes one action (a single
// transfer, or a CommBatch of several): sends first, then receives in channel order per peer.
std::vector<PipelineAction> rank_actions(int rank, const Steps& steps, const std::vector<Message>& messages) {
  const int batches = static_cast<int>(steps.size()) + 1;
  std::vector<std::vector<PipelineAction>> sends(batches), recvs(batches);
  for (const Message& m : messages) {  // channel by channel, each in order
    const Kind send = m.activation ? Kind::SendActivation : Kind::SendGrad;
    const Kind recv = m.activation ? Kind::RecvActivation : Kind::RecvGrad;
    if (m.src == rank) sends[m.send_batch].push_back({send, m.micro_batch, m.src_chunk, m.dst});
    if (m.dst == rank) recvs[m.recv_batch].push_back({recv, m.micro_batch, m.dst_chunk, m.src});
  }
  const auto by_peer = [](const PipelineAction& x, const PipelineAction& y) { return x.peer < y.peer; };
  std::vector<PipelineAction> actions;
  for (int b = 0; b < batches; ++b) {
    // Stable sorts by peer keep each channel's own order.
    std::stable_sort(sends[b].begin(), sends[b].end(), by_peer);
    std::stable_sort(recvs[b].begin(), recvs[b].end(), by_peer);
    std::vector<PipelineAction> ops = std::move(sends[b]);
    ops.insert(ops.end(), recvs[b].begin(), recvs[b].end());
    if (ops.size() == 1) actions.push_back(std::move(ops.front()));
    if (ops.size() > 1) actions.push_back({Kind::CommBatch, -1, -1, -1, std::move(ops)});
    if (b == batches - 1) break;
    for (const Compute& c : steps[b])
      actions.push_back({c.forward ? Kind::Forward : Kind::Backward, c.micro_batch, c.chunk});
  }
  return actions;
}

void check_shape(PipelineScheduleKind kind, const PipelineShape& s) {
  STRATA_CHECK(s.ranks >= 1, "pipeline schedule: needs at least 1 rank (got ranks = ", s.ranks, ")");
  STRATA_CHECK(s.micro_batches >= 1,
               "pipeline schedule: needs at least 1 micro-batch (got micro_batches = ", s.micro_batches, ")");
  STRATA_CHECK(s.chunks >= 1, "pipeline schedule: needs at least 1 model chunk per rank (got chunks = ", s.chunks, ")");
  STRATA_CHECK(s.chunks == 1 || kind == PipelineScheduleKind::Interleaved1F1B, "pipeline schedule: ", to_string(kind),
               " runs one model chunk per rank (got chunks = ", s.chunks, "); use Interleaved1F1B for virtual stages");
  STRATA_CHECK(s.chunks == 1 || s.micro_batches % s.ranks == 0, "pipeline schedule: interleaved 1F1B with ", s.chunks,
               " chunks per rank needs the number of "
               "micro-batches to be a multiple of the number of ranks, as in Megatron-LM (got micro_batches = ",
               s.micro_batches, ", ranks = ", s.ranks, "); micro-batches advance through the chunks in groups of ",
               s.ranks);
}

}  // namespace

std::span<const PipelineAction> PipelineAction::transfers() const {
  if (kind == Kind::CommBatch) return batch;
  if (is_compute()) return {};
  return {this, 1};
}

PipelineSchedule make_pipeline_schedule(PipelineScheduleKind kind, const PipelineShape& shape) {
  check_shape(kind, shape);
  std::vector<Steps> steps(shape.ranks);
  for (int r = 0; r < shape.ranks; ++r)
    steps[r] = kind == PipelineScheduleKind::GPipe ? gpipe_steps(shape) : one_f_one_b_steps(shape, r);
  const std::vector<Message> messages = place_messages(shape, steps);
  PipelineSchedule schedule{kind, shape, {}};
  for (int r = 0; r < shape.ranks; ++r) schedule.actions.push_back(rank_actions(r, steps[r], messages));
  return schedule;
}

const char* to_string(PipelineScheduleKind kind) {
  switch (kind) {
    case PipelineScheduleKind::GPipe: return "GPipe";
    case PipelineScheduleKind::OneFOneB: return "1F1B";
    case PipelineScheduleKind::Interleaved1F1B: return "interleaved 1F1B";
  }
  return "unknown schedule";
}

std::string to_string(const PipelineAction& a) {
  if (a.kind == Kind::CommBatch) {
    std::string out = "batch[";
    for (size_t i = 0; i < a.batch.size(); ++i) out += (i ? "; " : "") + to_string(a.batch[i]);
    return out + "]";
  }
  const char* name = "unknown action";
  const char* direction = nullptr;
  switch (a.kind) {
    case Kind::Forward: name = "forward"; break;
    case Kind::Backward: name = "backward"; break;
    case Kind::SendActivation:
      name = "send activation";
      direction = " to rank ";
      break;
    case Kind::RecvActivation:
      name = "recv activation";
      direction = " from rank ";
      break;
    case Kind::SendGrad:
      name = "send grad";
      direction = " to rank ";
      break;
    case Kind::RecvGrad:
      name = "recv grad";
      direction = " from rank ";
      break;
    case Kind::CommBatch: break;
  }
  std::string out = detail::concat(name, "(micro-batch ", a.micro_batch, ", chunk ", a.chunk, ")");
  if (direction) out += detail::concat(direction, a.peer);
  return out;
}

}  // namespace strata::parallel
