#pragma once
// Rotary position embedding (Hugging Face LLaMA layout) shared by the CPU loops and the CUDA
// kernels. Element j < D/2 of a head vector is paired with element j + D/2; with cos/sin the
// values of the [T, D] tables at those two columns:
//   y1 = x1 * c1 - x2 * s1,   y2 = x2 * c2 + x1 * s2
// i.e. x * cos + rotate_half(x) * sin with rotate_half(x) = [-x2, x1], without building it.
// The map is linear in x; its transpose gives the gradient:
//   d1 = g1 * c1 + g2 * s2,   d2 = g2 * c2 - g1 * s1
// (the inverse rotation when c1 = c2 and s1 = s2, as in the tables rotary_tables builds).
#include <math.h>
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// The angle of column i (and i + D/2) at position pos: pos * theta^(-2i/D), i < D/2.
STRATA_HD double rotary_angle(int64_t pos, int64_t i, int64_t d, double theta) {
  return static_cast<double>(pos) * pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
}

template <class T>
struct RotaryPair {
  T first, second;
};

template <class T>
STRATA_HD RotaryPair<T> rotary_forward(T x1, T x2, T c1, T s1, T c2, T s2) {
  return {x1 * c1 - x2 * s1, x2 * c2 + x1 * s2};
}

template <class T>
STRATA_HD RotaryPair<T> rotary_backward(T g1, T g2, T c1, T s1, T c2, T s2) {
  return {g1 * c1 + g2 * s2, g2 * c2 - g1 * s1};
}

}  // namespace strata_kernels
