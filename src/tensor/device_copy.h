#pragma once
// Copy and fill on any device: the plain switch on the device (CPU loops or src/tensor/cuda).
#include "strata/tensor/tensor.h"

namespace strata::detail {
// dst = src element by element (equal shapes; dtypes and devices may differ).
void copy_any(const Tensor& dst, const Tensor& src);
void fill_any(const Tensor& dst, double value);
}  // namespace strata::detail
