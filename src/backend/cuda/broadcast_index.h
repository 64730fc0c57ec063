#pragma once
// The strided index (strata_kernels/common/strided_index.h) that the elementwise kernels read their
// inputs through: the output's shape and each input's strides as if broadcast to it.
#include <cstring>

#include "backend/cpu/broadcast_map.h"
#include "strata/core/error.h"
#include "strata/tensor/tensor.h"
#include "strata_kernels/common/strided_index.h"

namespace strata::cuda_detail {

template <int N>
strata_kernels::StridedIndex<N> broadcast_index(const Shape& shape, const Tensor* const (&inputs)[N],
                                                const char* name) {
  STRATA_CHECK(shape.size() <= static_cast<size_t>(strata_kernels::kMaxDims), name, ": ", shape.size(),
               " dimensions; CUDA elementwise ops take at most ", strata_kernels::kMaxDims);
  strata_kernels::StridedIndex<N> index;
  std::memset(&index, 0, sizeof index);
  index.ndim = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) index.sizes[d] = shape[d];
  for (int k = 0; k < N; ++k) {
    const Strides s = cpu::broadcast_strides(*inputs[k], shape);
    for (size_t d = 0; d < shape.size(); ++d) index.strides[k][d] = s[d];
  }
  return index;
}

}  // namespace strata::cuda_detail
