#pragma once
#include <cstdint>
#include <string_view>

namespace strata {

// One Philox subsequence addressed by element: element i depends only on (seed, subsequence,
// i), so any process can draw any part of a tensor (its tensor-parallel rows, one block of a
// pipeline stage) without drawing the rest.
struct PhiloxStream {
  uint64_t seed = 0;
  uint64_t subsequence = 0;
  float normal(uint64_t i) const;   // standard normal (Box-Muller over the element's counter)
  float uniform(uint64_t i) const;  // in (0, 1]
};

// The stream of the tensor named `name` (a parameter's full name, "h.0.attn.c_attn.weight")
// under `seed`: the subsequence is the name's FNV-1a hash, so each parameter has its own
// stream whatever else the process builds, in whatever order.
PhiloxStream named_stream(uint64_t seed, std::string_view name);

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
  // The same as an element-addressed stream (what randn/rand draw from for one op).
  PhiloxStream next_stream() { return {seed_, next_offset()}; }

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
