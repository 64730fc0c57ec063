#pragma once
// A contiguous tensor seen as [outer, n, inner] around one dimension: the layout of every
// CPU loop that works along a dimension without transposing.
#include <cstdint>

#include "strata/core/shape.h"

namespace strata::cpu {

struct Layout {
  int64_t outer, n, inner;
};

inline Layout layout_of(const Shape& shape, int64_t dim) {
  Layout l{1, shape[static_cast<size_t>(dim)], 1};
  for (int64_t d = 0; d < dim; ++d) l.outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < shape.size(); ++d) l.inner *= shape[d];
  return l;
}

}  // namespace strata::cpu
