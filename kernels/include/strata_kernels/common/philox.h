#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011):
// a counter-based generator, so element i of a random tensor depends only on
// (seed, offset, i) and is the same on every machine, thread count and device.
#include <math.h>
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

struct Philox4 {
  uint32_t v[4];
};

STRATA_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// Returns 4 random 32-bit words for the 128-bit counter (ctr_lo, ctr_hi) under a 64-bit key.
STRATA_HD Philox4 philox4x32_10(uint64_t ctr_lo, uint64_t ctr_hi, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(ctr_lo), c1 = static_cast<uint32_t>(ctr_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(ctr_hi), c3 = static_cast<uint32_t>(ctr_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, c0, &hi0, &lo0);
    philox_mulhilo(0xCD9E8D57u, c2, &hi1, &lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Uniform in (0, 1]: never 0, so log() in Box-Muller is finite. 24 bits of mantissa.
STRATA_HD float uint_to_unit_float(uint32_t x) { return (static_cast<float>(x >> 8) + 1.0f) * (1.0f / 16777216.0f); }
STRATA_HD double uint_to_unit_double(uint32_t hi, uint32_t lo) {
  uint64_t x = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);  // 53 bits
  x &= (1ull << 53) - 1;
  return (static_cast<double>(x) + 1.0) * (1.0 / 9007199254740992.0);
}

// Element i of a stream: counter i/4, word i%4 (uniform) ; normals pair words (0,1),(2,3)
// with Box-Muller so that element i needs only its own counter.
STRATA_HD float philox_uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4 r = philox4x32_10(i / 4, offset, seed);
  return uint_to_unit_float(r.v[i % 4]);
}

STRATA_HD float philox_normal(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4 r = philox4x32_10(i / 4, offset, seed);
  unsigned pair = static_cast<unsigned>(i % 4) / 2;
  float u1 = uint_to_unit_float(r.v[2 * pair]);
  float u2 = uint_to_unit_float(r.v[2 * pair + 1]);
  float radius = sqrtf(-2.0f * logf(u1));
  float theta = 6.2831853071795864f * u2;
  return (i % 2 == 0) ? radius * cosf(theta) : radius * sinf(theta);
}

}  // namespace strata_kernels
