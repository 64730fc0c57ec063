#include "strata/core/random.h"

#include "strata/core/hash.h"
#include "strata_kernels/common/philox.h"

namespace strata {

float PhiloxStream::normal(uint64_t i) const { return strata_kernels::philox_normal(seed, subsequence, i); }
float PhiloxStream::uniform(uint64_t i) const { return strata_kernels::philox_uniform(seed, subsequence, i); }

PhiloxStream named_stream(uint64_t seed, std::string_view name) { return {seed, fnv1a(name)}; }

float Generator::uniform() { return strata_kernels::philox_uniform(seed_, next_offset(), 0); }
float Generator::normal() { return strata_kernels::philox_normal(seed_, next_offset(), 0); }
uint64_t Generator::random_u64() {
  auto r = strata_kernels::philox4x32_10(0, next_offset(), seed_);
  return (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

}  // namespace strata
