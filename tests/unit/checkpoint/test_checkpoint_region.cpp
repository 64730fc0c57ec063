// Regions of global tensors (checkpoint/region.h): runs of boxes and flat ranges, overlaps
// between two layouts, and the exactly-once coverage check, against a brute-force model
// that maps every element.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "strata/checkpoint/region.h"
#include "test_util.h"

namespace strata::checkpoint {
namespace {

// (Inside a test body, `Run` names gtest's Test::Run.)
using RunList = std::vector<checkpoint::Run>;

// Brute force: global flat index of every element of the piece, in piece order.
std::vector<int64_t> elements_of(const Region& r, const Shape& g) {
  std::vector<int64_t> out;
  const Strides st = contiguous_strides(g);
  for (int64_t i = r.begin; i < r.end; ++i) {
    int64_t rest = i, flat = 0;
    for (size_t d = g.size(); d-- > 0;) {
      const int64_t idx = rest % r.extents[d];
      rest /= r.extents[d];
      flat += (r.offsets[d] + idx) * st[d];
    }
    out.push_back(flat);
  }
  return out;
}

std::vector<int64_t> expand(const std::vector<Run>& runs, int64_t numel) {
  std::vector<int64_t> out(static_cast<size_t>(numel), -1);
  for (const Run& r : runs)
    for (int64_t k = 0; k < r.length; ++k) out[static_cast<size_t>(r.local + k)] = r.global + k;
  return out;
}

TEST(CheckpointRegion, WholeTensorIsOneRun) {
  const Shape g{4, 6};
  EXPECT_EQ(runs_of(Region::whole(g), g), (RunList{{0, 0, 24}}));
  EXPECT_EQ(runs_of(Region::whole(Shape{}), Shape{}), (RunList{{0, 0, 1}}));
  EXPECT_TRUE(runs_of(Region::flat(g, 5, 5), g).empty());
}

TEST(CheckpointRegion, ColumnBoxHasOneRunPerRow) {
  const Shape g{3, 8};
  const Region r = Region::box(Shape{0, 4}, Shape{3, 4});  // the right half (tensor-parallel rank 1)
  EXPECT_EQ(runs_of(r, g), (RunList{{4, 0, 4}, {12, 4, 4}, {20, 8, 4}}));
  // A row box is contiguous: its rows merge into one run.
  EXPECT_EQ(runs_of(Region::box(Shape{1, 0}, Shape{2, 8}), g), (RunList{{8, 0, 16}}));
}

TEST(CheckpointRegion, RunsMatchBruteForceOnRandomRegions) {
  std::mt19937 rng(7);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const size_t nd = static_cast<size_t>(uniform(1, 4));
    Shape g, off, ext;
    for (size_t d = 0; d < nd; ++d) {
      g.push_back(uniform(1, 5));
      off.push_back(uniform(0, g[d] - 1));
      ext.push_back(uniform(1, g[d] - off[d]));
    }
    Region r = Region::box(off, ext);
    const int64_t b = uniform(0, r.box_numel());
    r = r.sub_range(b, uniform(b, r.box_numel()));
    check_region(r, g, "trial");
    const RunList runs = runs_of(r, g);
    EXPECT_EQ(expand(runs, r.numel()), elements_of(r, g)) << "trial " << trial << " shape " << g;
    for (size_t i = 1; i < runs.size(); ++i) EXPECT_GT(runs[i].global, runs[i - 1].global);
  }
}

// Copying through for_each_overlap from a tensor-parallel layout (column halves) into a ZeRO
// layout (flat thirds) gives every element its own value.
TEST(CheckpointRegion, OverlapCopiesBetweenLayouts) {
  const Shape g{4, 6};
  std::vector<double> global(24);
  for (size_t i = 0; i < global.size(); ++i) global[i] = static_cast<double>(i) + 0.5;
  const std::vector<Region> saved{Region::box(Shape{0, 0}, Shape{4, 3}), Region::box(Shape{0, 3}, Shape{4, 3})};
  const std::vector<Region> wanted{Region::flat(g, 0, 8), Region::flat(g, 8, 16), Region::flat(g, 16, 24)};
  for (const Region& w : wanted) {
    std::vector<double> out(static_cast<size_t>(w.numel()), -1);
    int64_t filled = 0;
    for (const Region& s : saved) {
      std::vector<double> piece;
      for (int64_t e : elements_of(s, g)) piece.push_back(global[static_cast<size_t>(e)]);
      filled += for_each_overlap(runs_of(s, g), runs_of(w, g), [&](int64_t src, int64_t dst, int64_t n) {
        for (int64_t k = 0; k < n; ++k) out[static_cast<size_t>(dst + k)] = piece[static_cast<size_t>(src + k)];
      });
    }
    EXPECT_EQ(filled, w.numel());
    for (int64_t i = 0; i < w.numel(); ++i)
      EXPECT_EQ(out[static_cast<size_t>(i)], global[static_cast<size_t>(w.begin + i)]);
  }
}

TEST(CheckpointRegion, CoverageFindsGapsAndDoubles) {
  const Shape g{2, 4};
  auto runs = [&](const std::vector<Region>& rs) {
    std::vector<RunList> out;
    for (const Region& r : rs) out.push_back(runs_of(r, g));
    return out;
  };
  EXPECT_EQ(coverage_problem(runs({Region::box(Shape{0, 0}, Shape{2, 2}), Region::box(Shape{0, 2}, Shape{2, 2})}), 8),
            "");
  EXPECT_EQ(coverage_problem(runs({Region::flat(g, 0, 5), Region::flat(g, 4, 8)}), 8),
            "elements [4, 5) are written twice");
  EXPECT_EQ(coverage_problem(runs({Region::flat(g, 0, 3), Region::flat(g, 4, 8)}), 8),
            "elements [3, 4) are in no piece");
  EXPECT_EQ(coverage_problem(runs({Region::flat(g, 0, 6)}), 8), "elements [6, 8) are in no piece");
}

TEST(CheckpointRegion, BadRegionsAreNamed) {
  const Shape g{3, 4};
  testing::expect_error_mentions(
      [&] {
        check_region(Region::box(Shape{2, 0}, Shape{2, 4}), g, "tensor 'w'");
      },
      {"tensor 'w': the region at [2, 0] of extents [2, 4] lies outside the tensor's shape "
       "[3, 4] in dimension 0"});
  testing::expect_error_mentions([&] { check_region(Region::box(Shape{0}, Shape{3}), g, "tensor 'w'"); },
                                 {"does not match a tensor of shape [3, 4]"});
  Region r = Region::whole(g);
  r.end = 13;
  testing::expect_error_mentions([&] { check_region(r, g, "tensor 'w'"); },
                                 {"elements [0, 13) are outside the box of 12 elements"});
}

}  // namespace
}  // namespace strata::checkpoint
