#pragma once
// The dropout mask, shared by the CPU loops and the CUDA kernels so that a (seed, offset)
// pair drops the same elements on every device and thread count.
//
// Element i uses word i % 4 of the Philox block for counter i / 4 (the layout of
// philox_uniform) and is kept when that uniform in (0, 1] exceeds p: P(keep) = 1 - p up
// to the 2^-24 resolution of the uniform. Kept elements are scaled by 1 / (1 - p).
#include <stdint.h>

#include "strata_kernels/common/macros.h"
#include "strata_kernels/common/philox.h"

namespace strata_kernels {

STRATA_HD bool dropout_keep(uint32_t word, float p) { return uint_to_unit_float(word) > p; }

}  // namespace strata_kernels
