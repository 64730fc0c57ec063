#include "strata/core/random.h"

#include "strata_kernels/common/philox.h"

namespace strata {

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
