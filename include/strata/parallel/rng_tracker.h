#pragma once
// Named random streams for model parallelism (as Megatron's RNG tracker): the default
// generator, seeded alike on every tensor-parallel rank, draws what all ranks must draw
// identically (dropout on activations every rank holds whole); named generators draw what
// must differ (dropout on a rank's own heads, features or sequence piece). Each is a Philox
// (seed, offset) pair, so saving states() and restoring them with set_states() resumes every
// stream exactly.
#include <cstdint>
#include <map>
#include <string>

#include "strata/core/random.h"

namespace strata::parallel {

class RngTracker {
 public:
  // The name tensor-parallel layers and models use for per-rank randomness.
  static constexpr const char* kTensorParallel = "tensor-parallel";

  // Adds a stream; adding a name twice is an error naming it.
  Generator& add(const std::string& name, uint64_t seed);
  Generator& get(const std::string& name);  // an error names a missing stream and the known ones
  bool contains(const std::string& name) const { return streams_.count(name) != 0; }

  // (seed, offset) of every stream, by name.
  std::map<std::string, std::pair<uint64_t, uint64_t>> states() const;
  // Restores streams saved by states(); every saved name must exist here.
  void set_states(const std::map<std::string, std::pair<uint64_t, uint64_t>>& states);

 private:
  std::map<std::string, Generator> streams_;  // node-based: references stay valid
};

// The seed of the tensor-parallel stream of TP rank `tp_rank`: distinct for every rank and
// from `seed` itself (a 64-bit mix, so neighbouring seeds do not give overlapping streams).
uint64_t tensor_parallel_seed(uint64_t seed, int tp_rank);

}  // namespace strata::parallel
