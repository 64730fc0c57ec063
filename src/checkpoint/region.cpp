// Regions of global tensors and their runs (see region.h).
#include "strata/checkpoint/region.h"

#include <algorithm>
#include <sstream>

#include "strata/core/error.h"

namespace strata::checkpoint {

Region Region::whole(const Shape& global) {
  return {
      .offsets = Shape(std::vector<int64_t>(global.size(), 0)), .extents = global, .begin = 0, .end = global.numel()};
}

Region Region::box(Shape offsets, Shape extents) {
  const int64_t n = extents.numel();
  return {.offsets = std::move(offsets), .extents = std::move(extents), .begin = 0, .end = n};
}

Region Region::flat(const Shape& global, int64_t begin, int64_t end) {
  Region r = whole(global);
  r.begin = begin;
  r.end = end;
  return r;
}

Region Region::sub_range(int64_t sub_begin, int64_t sub_end) const {
  STRATA_CHECK(0 <= sub_begin && sub_begin <= sub_end && sub_end <= box_numel(), "Region::sub_range: [", sub_begin,
               ", ", sub_end, ") is outside a box of ", box_numel(), " elements");
  Region r = *this;
  r.begin = sub_begin;
  r.end = sub_end;
  return r;
}

int64_t Region::box_numel() const { return extents.numel(); }

void check_region(const Region& region, const Shape& global, const std::string& what) {
  STRATA_CHECK(region.offsets.size() == global.size() && region.extents.size() == global.size(), what,
               ": a region with offsets ", region.offsets, " and extents ", region.extents,
               " does not match a tensor of shape ", global);
  for (size_t d = 0; d < global.size(); ++d)
    STRATA_CHECK(region.offsets[d] >= 0 && region.extents[d] >= 0 && region.offsets[d] + region.extents[d] <= global[d],
                 what, ": the region at ", region.offsets, " of extents ", region.extents,
                 " lies outside the tensor's shape ", global, " in dimension ", d);
  STRATA_CHECK(0 <= region.begin && region.begin <= region.end && region.end <= region.box_numel(), what,
               ": elements [", region.begin, ", ", region.end, ") are outside the box of ", region.box_numel(),
               " elements");
}

std::vector<Run> runs_of(const Region& region, const Shape& global) {
  std::vector<Run> runs;
  if (region.begin >= region.end) return runs;
  const size_t nd = global.size();
  if (nd == 0) return {Run{0, 0, 1}};
  const Strides stride = contiguous_strides(global);
  const int64_t row = region.extents[nd - 1];
  auto push = [&](int64_t global_start, int64_t local, int64_t length) {
    if (!runs.empty() && runs.back().global + runs.back().length == global_start &&
        runs.back().local + runs.back().length == local) {
      runs.back().length += length;
      return;
    }
    runs.push_back({global_start, local, length});
  };
  // The box index of element i's row, kept as a mixed-radix counter over dims 0..nd-2.
  std::vector<int64_t> index(nd, 0);
  int64_t i = region.begin;
  {
    int64_t r = i / row;
    for (size_t d = nd - 1; d-- > 0;) {
      index[d] = r % region.extents[d];
      r /= region.extents[d];
    }
  }
  while (i < region.end) {
    const int64_t col = i % row;
    const int64_t length = std::min(row - col, region.end - i);
    int64_t g = region.offsets[nd - 1] + col;
    for (size_t d = 0; d + 1 < nd; ++d) g += (region.offsets[d] + index[d]) * stride[d];
    push(g, i - region.begin, length);
    i += length;
    for (size_t d = nd - 1; d-- > 0;) {  // next row
      if (++index[d] < region.extents[d]) break;
      index[d] = 0;
    }
  }
  return runs;
}

std::string coverage_problem(const std::vector<std::vector<Run>>& pieces, int64_t numel) {
  std::vector<std::pair<int64_t, int64_t>> spans;  // [begin, end) in the global order
  for (const auto& runs : pieces)
    for (const Run& r : runs) spans.emplace_back(r.global, r.global + r.length);
  std::sort(spans.begin(), spans.end());
  std::ostringstream out;
  int64_t covered = 0;
  for (const auto& [b, e] : spans) {
    if (b < covered) {
      out << "elements [" << b << ", " << std::min(e, covered) << ") are written twice";
      return out.str();
    }
    if (b > covered) {
      out << "elements [" << covered << ", " << b << ") are in no piece";
      return out.str();
    }
    covered = e;
  }
  if (covered < numel) {
    out << "elements [" << covered << ", " << numel << ") are in no piece";
    return out.str();
  }
  if (covered > numel) {
    out << "pieces reach element " << covered << " of a tensor of " << numel;
    return out.str();
  }
  return "";
}

}  // namespace strata::checkpoint
