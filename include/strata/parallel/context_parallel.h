#pragma once
// Context parallelism: one sequence split over the ranks of a CP group, each rank holding a
// 1/CP share of every activation, with attention computed across the split.
//
// The split is load-balanced for causal attention: the T tokens form 2*CP equal chunks and
// rank r holds chunks r and 2*CP-1-r, in that order (an early chunk, which attends to little,
// beside a late one, which attends to much), so every rank does the same attention work.
// Tokens, targets and positions are split alike (take_local_sequence, local_positions).
//
// Attention runs over the global causal order of the local queries against every rank's
// keys and values, in one of two ways:
//   Ring:      key/value blocks travel around the ring (rank r sends to r+1); the transfer of
//              the next block overlaps the computation of the current one; partial results
//              merge with their log-sum-exp (online softmax). Backward sends the blocks around
//              again, with their key/value gradients travelling beside them and returning to
//              the owner after a full circle.
//   AllGather: every rank gathers all keys and values (again in backward, rather than keep
//              them) and backward reduce-scatters their gradients to their owners. Fewer,
//              larger messages; the gathered blocks live only during the call.
// The result equals attention(q, k, v, {.causal = true}) over the whole sequence, restricted
// to this rank's tokens (in float64 to rounding; tests/distributed/parallel).
//
// Communication per call, per rank, with kv = 2 * B * Hkv * (T/CP) * D elements (this rank's
// keys and values, in the compute dtype: float32 for 16-bit inputs):
//   Ring      forward: CP-1 sends of kv;   backward: CP-1 sends of kv and CP sends of their
//             gradients (the last one returns the gradients to their owner).
//   AllGather forward: one all_gather of kv; backward: one all_gather of kv and one
//             reduce_scatter of CP * kv.
// Saved for backward (activation memory), elements: B*H*(T/CP)*(2*D + 1) (queries, output and
// log-sum-exp) + kv: exactly 1/CP of the same function over the unsplit sequence (CP = 1),
// where the composed attention keeps the B*H*T*T probabilities.
#include <cstdint>
#include <optional>
#include <vector>

#include "strata/distributed/process_group.h"
#include "strata/nn/context_split.h"
#include "strata/tensor/tensor.h"

namespace strata::parallel {

// Where this rank's tokens sit in a sequence of `sequence` tokens split over `degree` ranks.
struct ContextParallelSplit {
  int64_t sequence = 0;  // T, the whole sequence
  int degree = 1;        // CP
  int rank = 0;          // this rank in the CP group

  int64_t chunk() const { return sequence / (2 * static_cast<int64_t>(degree)); }
  int64_t local_length() const { return 2 * chunk(); }  // T / CP
  // The global index of this rank's chunk 0 or 1 (r and 2*CP-1-r).
  int64_t chunk_index(int which) const { return which == 0 ? rank : 2 * static_cast<int64_t>(degree) - 1 - rank; }
  int64_t chunk_begin(int which) const { return chunk_index(which) * chunk(); }
};

// The split of a `sequence`-token sequence over `group`. Refuses a sequence that does not
// divide into 2 * group.size() equal chunks, naming the length, the degree and the rule.
ContextParallelSplit context_parallel_split(int64_t sequence, const dist::ProcessGroup& group);

// This rank's tokens of x along `dim` (chunk r, then chunk 2*CP-1-r): a contiguous copy,
// differentiable (backward scatters the gradient into a zero tensor of x's shape).
Tensor take_local_sequence(const Tensor& x, int64_t dim, const ContextParallelSplit& split);
// The global positions of this rank's tokens, in local order.
std::vector<int64_t> local_positions(const ContextParallelSplit& split);

enum class ContextParallelAttention : uint8_t { Ring, AllGather };

struct ContextParallelOptions {
  ContextParallelAttention variant = ContextParallelAttention::Ring;
  std::optional<double> scale = std::nullopt;  // multiplies q.k; default 1/sqrt(D)
};

// Causal attention of this rank's queries over the whole sequence.
//   q [B, H, T/CP, D], k and v [B, Hkv, T/CP, D] (H % Hkv == 0), this rank's tokens in the
//   order of take_local_sequence -> [B, H, T/CP, D] (contiguous), of q's dtype.
// float32 and float64 compute in their own dtype; bfloat16 and float16 in float32, rounded
// once at the end. Every rank of `group` calls it in the same order, forward and backward.
Tensor context_parallel_attention(const Tensor& q, const Tensor& k, const Tensor& v, dist::ProcessGroup& group,
                                  const ContextParallelOptions& options = {});

// A model's context split over `group` (nn::CausalLM::set_context_split): the load-balanced
// split above and context_parallel_attention with `options`.
//   auto cp = std::make_shared<parallel::ContextParallel>(mesh_or_group);
//   model.set_context_split(cp);
//   Tensor loss = model.loss(cp->local(tokens, 1), cp->local(targets, 1));
// Every rank of the group holds the same parameters: sum (average) their gradients over the
// group, e.g. with DDP or ZeRO over a group that includes it.
class ContextParallel : public nn::ContextSplit {
 public:
  explicit ContextParallel(dist::ProcessGroup& group, ContextParallelOptions options = {})
      : group_(group), options_(options) {}
  int64_t degree() const override { return group_.size(); }
  Tensor local(const Tensor& x, int64_t dim) const override;
  Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v) override {
    return context_parallel_attention(q, k, v, group_, options_);
  }
  Tensor global_mean(const Tensor& local_mean, const Tensor& local_count) override;
  Tensor sum_over_ranks(const Tensor& x) override;
  dist::ProcessGroup& group() const { return group_; }

 private:
  dist::ProcessGroup& group_;
  ContextParallelOptions options_;
};

// What the calls on this thread have done since the last reset: asserted exactly in tests.
struct ContextParallelStats {
  int64_t forward_calls = 0;
  int64_t backward_calls = 0;
  int64_t ring_steps = 0;      // block steps (CP per ring call, forward and backward)
  int64_t bytes_sent = 0;      // by this rank: ring sends, or its share of gather/scatter
  int64_t saved_bytes = 0;     // kept for backward by the latest forward
  int64_t block_products = 0;  // (query chunk, key chunk) pairs computed, forward and backward
};
ContextParallelStats context_parallel_stats();
void reset_context_parallel_stats();

}  // namespace strata::parallel
