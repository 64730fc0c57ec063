#pragma once
#include <cstdint>

namespace strata {

// A counter-based Philox stream: (seed, offset). Each random op uses the current offset as
// its subsequence and then advances it by one, so results do not depend on threads or on
// the device, and saving (seed, offset) is enough to resume the stream exactly.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Hands out a fresh subsequence for one random op.
  uint64_t next_offset() { return offset_++; }

  // Scalars, for data generation and sampling (each call uses one subsequence).
  float uniform();
  float normal();
  uint64_t random_u64();

 private:
  uint64_t seed_;
  uint64_t offset_;
};

// The process-wide default generator used when an op is not given one.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace strata
