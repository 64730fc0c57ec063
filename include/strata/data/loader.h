#pragma once
// Which examples each rank trains on at each step: a deterministic, resumable, sharded
// batch sampler over a dataset of N examples (or of N token windows, see TokenFile).
//
// Epoch e visits the examples in the order of a pseudo-random permutation of [0, N) keyed
// by (seed, e): a Feistel network over Philox rounds, computed per index, so it costs no
// memory for any N and is the same on every machine. Step s of an epoch takes the global
// batch at positions [s*G, (s+1)*G) of that order, G = batch_size * world_size, and rank r
// gets the slice [r*B, (r+1)*B) of it. Hence W ranks with batch B together see exactly the
// examples, in the same order, that one rank with batch W*B sees (what a DDP-equivalence
// test compares), and the ranks' slices are disjoint. Each epoch has N / G steps; the N % G
// examples left over are skipped in that epoch (a different set each epoch when shuffled).
//
// The position is {epoch, step} in global batches, so a run resumed from state() continues
// with the same batches, even at another world size if the global batch size is unchanged.
#include <cstdint>
#include <vector>

#include "strata/tensor/state_dict.h"

namespace strata::data {

struct SamplerOptions {
  int64_t dataset_size = 0;  // N
  int64_t batch_size = 1;    // per rank
  uint64_t seed = 0;
  bool shuffle = true;  // false: epoch order is 0, 1, ..., N-1
  int rank = 0;
  int world_size = 1;
};

struct SamplerState {
  int64_t epoch = 0;
  int64_t step = 0;  // in [0, steps_per_epoch)
  bool operator==(const SamplerState&) const = default;
};

class BatchSampler {
 public:
  explicit BatchSampler(SamplerOptions options);

  const SamplerOptions& options() const { return options_; }
  int64_t global_batch_size() const { return options_.batch_size * options_.world_size; }
  int64_t steps_per_epoch() const { return options_.dataset_size / global_batch_size(); }

  // This rank's batch_size indices at the current position; then moves to the next step.
  std::vector<int64_t> next();
  // Without moving: this rank's slice, and the whole global batch, at `at`.
  std::vector<int64_t> indices_at(SamplerState at) const;
  std::vector<int64_t> global_indices_at(SamplerState at) const;
  // The example at `position` of epoch `epoch`'s order.
  int64_t example_at(int64_t epoch, int64_t position) const;

  SamplerState state() const { return state_; }
  void set_state(SamplerState state);  // throws unless epoch >= 0 and step in [0, steps_per_epoch)

  // For checkpoints: "epoch", "step", and "seed", "dataset_size", "global_batch_size", which
  // load_state_dict checks against this sampler's options (a mismatch would silently change
  // which batches follow).
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);

 private:
  void check_state(SamplerState state) const;
  SamplerOptions options_;
  SamplerState state_;
};

// A bijection of [0, n) keyed by (seed, epoch): position -> index. Deterministic everywhere.
int64_t permute_index(int64_t position, int64_t n, uint64_t seed, int64_t epoch);

}  // namespace strata::data
