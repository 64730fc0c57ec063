#pragma once
// The order of sort and argsort as unsigned radix keys, shared by the CPU sort (which
// compares the keys) and the CUDA segmented radix sort (which sorts them): both sort the same
// keys stably, so both return the same values and indices, bit for bit.
//
// The order is PyTorch's: numbers ascending, -0 equal to +0 (their order is the input's),
// every NaN (either sign, any payload) equal to every other and after +inf; a descending sort
// is the reverse order of keys with equal keys kept in input order, so NaN comes first.
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

// The unsigned key type of a sortable element type: its own width.
template <class T>
using SortKey = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

// An order-preserving key: key(a) < key(b) exactly when a sorts before b ascending, and
// key(a) == key(b) when they tie. Integers: the sign bit flipped. Floating point: NaN maps
// to the largest key; otherwise a non-negative value gets its sign bit set and a negative one
// all its bits inverted (the usual float radix transform), after -0 became +0.
template <class T>
STRATA_HD SortKey<T> sort_key(T v) {
  using K = SortKey<T>;
  static_assert(sizeof(T) == sizeof(K), "sort_key: 4- or 8-byte element types only");
  constexpr K kSign = K(1) << (sizeof(K) * 8 - 1);
  if constexpr (std::is_integral_v<T>) {
    K u;
    memcpy(&u, &v, sizeof u);
    return u ^ kSign;
  } else {
    if (v != v) return ~K(0);
    if (v == T(0)) v = T(0);
    K u;
    memcpy(&u, &v, sizeof u);
    return (u & kSign) ? K(~u) : K(u | kSign);
  }
}

// Whether the element with key ka at position ia comes before the one with key kb at ib in
// a stable sort (ascending, or descending): the key order, ties by position.
template <class K>
STRATA_HD bool sorts_before(K ka, int64_t ia, K kb, int64_t ib, bool descending) {
  if (ka != kb) return descending ? ka > kb : ka < kb;
  return ia < ib;
}

}  // namespace strata_kernels
