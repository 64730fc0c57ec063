// strata_kernels/common/strided_index.h, the offsets every CUDA elementwise thread computes: checked
// here against the strides of broadcast and transposed CPU tensors, element by element.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cpu/broadcast_map.h"
#include "strata/strata.h"
#include "strata_kernels/common/strided_index.h"

using namespace strata;

TEST(StridedIndex, OffsetsMatchTheTensorsCoordinates) {
  // out [2, 3, 4]; a: a transposed [4, 3, 2] view read as [2, 3, 4]; b: [3, 1] broadcast.
  const Shape shape{2, 3, 4};
  const Tensor a = arange(0, 24, 1, {.dtype = DType::Float32}).view({4, 3, 2}).permute({2, 1, 0});
  const Tensor b = arange(0, 3, 1, {.dtype = DType::Float32}).view({3, 1});
  strata_kernels::StridedIndex<2> index;
  std::memset(&index, 0, sizeof index);
  index.ndim = 3;
  const Strides sa = cpu::broadcast_strides(a, shape), sb = cpu::broadcast_strides(b, shape);
  for (int d = 0; d < 3; ++d) {
    index.sizes[d] = shape[d];
    index.strides[0][d] = sa[d];
    index.strides[1][d] = sb[d];
  }
  const float* pa = a.data<float>();  // the view's first element; offsets are from it
  const float* pb = b.data<float>();
  int64_t linear = 0;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k, ++linear) {
        int64_t off[2];
        index.offsets(linear, off);
        EXPECT_EQ(pa[off[0]], a.narrow(0, i, 1).narrow(1, j, 1).narrow(2, k, 1).item()) << linear;
        EXPECT_EQ(pb[off[1]], static_cast<float>(j)) << linear;  // b[j, 0] whatever i and k
      }
}
