#pragma once
// Pipeline-parallel schedules as data: for p ranks, m micro-batches and v model chunks per
// rank, the ordered list of computations and point-to-point transfers each rank performs in
// one training step. Pure logic (no tensors, no process group), so a schedule can be checked
// by simulation (src/parallel/pipeline_simulator.h) before an executor runs it.
//
// Layout (Megatron's interleaved layout): the model is cut into p*v consecutive global stages;
// chunk c of rank r is global stage c*p + r. With v = 1 rank r holds stage r. Activations go
// from stage s to s+1, gradients from s+1 to s; the last chunk of rank p-1 feeds chunk c+1 of
// rank 0. Only when p == 1 is a transfer's peer the rank itself (chunk c to c+1 of rank 0).
//
// Matching rule (tag-free, as ProcessGroup send/recv and batch_send_recv are): a transfer is
// identified by its position, not by a tag. For every ordered pair of ranks (src, dst), the
// sends src lists to dst and the receives dst lists from src are in the same order, whatever
// their kind (activations and gradients share the channel, so this is stricter than "the same
// order per kind", and implies it). Inside a CommBatch the ops are listed in that order too.
//
// Batching rule (why no executor deadlocks): transfers are posted in batches at the points
// between computations, each batch with ProcessGroup::batch_send_recv and waited for as a
// whole: the sends of what the rank just computed together with the receives its next
// computations need. Two neighbours that both send first and receive second would each wait
// for the other to receive when sends block until matched (large MPI messages, NCCL); posted
// together they cannot, and merging transfers that would otherwise run one after the other
// never makes any rank wait longer. GPipe and 1F1B have a batch after every computation; in
// steady-state 1F1B these are Megatron's pairs "send my forward output + receive the gradient
// for my next backward" and "send my input gradient + receive the input of my next forward".
// Interleaved 1F1B's steady state has one batch after each forward+backward pair (both
// outputs out, both next inputs in), since only then can every batch meet exactly one batch
// of each neighbour (src/parallel/pipeline_schedule.cpp, warmup_forwards, says why). A tensor
// that arrives before it is needed is received early and held, to keep the matching order.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace strata::parallel {

enum class PipelineScheduleKind : uint8_t {
  // All forwards, then all backwards (Huang et al. 2019). Any m >= 1; every rank holds the
  // activations of all m micro-batches at its peak.
  GPipe,
  // PipeDream-flush 1F1B (Narayanan et al. 2021): rank r runs min(m, p-r-1) warm-up forwards,
  // then alternates one forward and one backward, then drains the remaining backwards. Any
  // m >= 1; rank r holds at most min(m, p-r) micro-batches' activations. Same bubble as GPipe.
  OneFOneB,
  // Interleaved 1F1B (Narayanan et al. 2021) with v chunks per rank: micro-batches advance in
  // groups of p through chunk 0, 1, ..., v-1 (backwards in reverse chunk order), which divides
  // the bubble by v at the price of v times more transfers and a longer warm-up: rank r holds
  // at most min(m*v, (v-1)p + 2(p-r-1) + 1) chunks' activations (a chunk is 1/v of the rank's
  // layers). Needs m % p == 0 when v > 1 (the groups must be full, as in Megatron-LM); v == 1
  // is exactly OneFOneB (any m).
  Interleaved1F1B,
};

struct PipelineShape {
  int ranks = 1;          // p: ranks of the pipeline group
  int micro_batches = 1;  // m: micro-batches per training step
  int chunks = 1;         // v: model chunks per rank (virtual stages); > 1 only for Interleaved1F1B
};

enum class PipelineActionKind : uint8_t {
  Forward,         // run chunk `chunk` forward on micro-batch `micro_batch`
  Backward,        // run its backward (needs that forward's saved activations)
  SendActivation,  // send the output of forward(micro_batch, chunk) to `peer` (the next stage)
  RecvActivation,  // receive the input of forward(micro_batch, chunk) from `peer` (the previous stage)
  SendGrad,        // send the input gradient of backward(micro_batch, chunk) to `peer` (previous stage)
  RecvGrad,        // receive the output gradient for backward(micro_batch, chunk) from `peer` (next stage)
  CommBatch,       // several of the four above, posted together (`batch`), complete when all are
};

struct PipelineAction {
  PipelineActionKind kind = PipelineActionKind::Forward;
  int micro_batch = -1;  // every kind but CommBatch
  // This rank's chunk: the one computing, producing a sent tensor or consuming a received one
  // (the peer's chunk follows from the layout: its stage is this one's +-1).
  int chunk = -1;
  int peer = -1;                           // transfers: pipeline-group rank of the other side
  std::vector<PipelineAction> batch = {};  // CommBatch: its single transfers, in posting order

  bool is_compute() const { return kind == PipelineActionKind::Forward || kind == PipelineActionKind::Backward; }
  bool is_send() const { return kind == PipelineActionKind::SendActivation || kind == PipelineActionKind::SendGrad; }
  // The transfers this action posts together: the batch's, itself for a single transfer, none
  // for a computation. An executor maps each to a dist::P2POp and posts them in one call.
  std::span<const PipelineAction> transfers() const;
};

struct PipelineSchedule {
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  PipelineShape shape;
  std::vector<std::vector<PipelineAction>> actions;  // by pipeline rank, in execution order

  int num_stages() const { return shape.ranks * shape.chunks; }
  int stage(int rank, int chunk) const { return chunk * shape.ranks + rank; }
};

// The schedule of every rank (each rank's list depends on its neighbours' orders through the
// matching rule, so they are built together; O(p*m*v)). Throws strata::Error, naming the
// requirement, for p, m or v < 1, v > 1 with GPipe or OneFOneB, and Interleaved1F1B with
// v > 1 and m not a multiple of p.
PipelineSchedule make_pipeline_schedule(PipelineScheduleKind kind, const PipelineShape& shape);

const char* to_string(PipelineScheduleKind kind);  // "GPipe", "1F1B", "interleaved 1F1B"
// "forward(micro-batch 2, chunk 0)", "send activation(micro-batch 2, chunk 0) to rank 1",
// "batch[...; ...]": for error messages and debugging.
std::string to_string(const PipelineAction& action);

}  // namespace strata::parallel
