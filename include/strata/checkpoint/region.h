#pragma once
// Where a rank's piece of a tensor lies in the whole (global) tensor, so that a checkpoint
// written under one layout can be read under any other. One description covers every
// layout strata has:
//   - a box of the global tensor (tensor parallelism cuts one dimension: offsets/extents),
//   - then a flat range of that box's row-major elements (ZeRO cuts flattened buffers).
// A whole tensor is the full box and the full range; a ZeRO shard of a tensor-parallel part
// is a sub-range of a box. Pieces are compared and copied as runs: maximal stretches that
// are contiguous both in the global tensor and in the piece.
#include <cstdint>
#include <string>
#include <vector>

#include "strata/core/shape.h"

namespace strata::checkpoint {

struct Region {
  Shape offsets;      // per dimension, where the box starts in the global tensor
  Shape extents;      // per dimension, the box's size
  int64_t begin = 0;  // the piece: elements [begin, end) of the box in row-major order
  int64_t end = 0;

  // The whole of a tensor of shape `global`.
  static Region whole(const Shape& global);
  // A box, all of it.
  static Region box(Shape offsets, Shape extents);
  // Elements [begin, end) of the row-major flattening of the whole tensor.
  static Region flat(const Shape& global, int64_t begin, int64_t end);
  // Elements [begin, end) of this region's box (relative to the box, like begin/end).
  Region sub_range(int64_t sub_begin, int64_t sub_end) const;

  int64_t numel() const { return end - begin; }
  int64_t box_numel() const;
  bool operator==(const Region&) const = default;
};

// Throws strata::Error naming `what` when the region does not fit `global` (rank, bounds,
// negative sizes, a range outside the box).
void check_region(const Region& region, const Shape& global, const std::string& what);

// A stretch of `length` elements that starts at `global` in the global tensor's row-major
// order and at `local` in the piece.
struct Run {
  int64_t global = 0;
  int64_t local = 0;
  int64_t length = 0;
  bool operator==(const Run&) const = default;
};

// The piece's runs in increasing global order (adjacent stretches merged). A scalar
// (global shape []) is one run of one element.
std::vector<Run> runs_of(const Region& region, const Shape& global);

// Calls f(src_local, dst_local, length) for every stretch that both pieces hold (both run
// lists in increasing global order, as runs_of gives them). Returns the elements shared.
template <class F>
int64_t for_each_overlap(const std::vector<Run>& src, const std::vector<Run>& dst, F&& f) {
  int64_t shared = 0;
  size_t i = 0, j = 0;
  while (i < src.size() && j < dst.size()) {
    const Run& a = src[i];
    const Run& b = dst[j];
    const int64_t lo = a.global > b.global ? a.global : b.global;
    const int64_t a_end = a.global + a.length, b_end = b.global + b.length;
    const int64_t hi = a_end < b_end ? a_end : b_end;
    if (lo < hi) {
      f(a.local + (lo - a.global), b.local + (lo - b.global), hi - lo);
      shared += hi - lo;
    }
    if (a_end <= b_end) ++i;
    else ++j;
  }
  return shared;
}

// The first problem with a set of pieces meant to cover a tensor of `numel` elements exactly
// once ("elements [10, 12) are written twice", "elements [0, 4) are in no piece"), or ""
// when they do. `pieces` are runs_of() of each piece.
std::string coverage_problem(const std::vector<std::vector<Run>>& pieces, int64_t numel);

}  // namespace strata::checkpoint
