#pragma once
// Copy and fill on any device. The tensor layer (factories) needs them; the backends define
// them (src/backend/device_copy.cpp: the plain switch on the device), so tensor/ includes
// no backend header.
#include "strata/tensor/tensor.h"

namespace strata::detail {
// dst = src element by element (equal shapes; dtypes and devices may differ).
void copy_any(const Tensor& dst, const Tensor& src);
void fill_any(const Tensor& dst, double value);
}  // namespace strata::detail
