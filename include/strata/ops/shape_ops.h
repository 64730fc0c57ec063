#pragma once
// Joining and splitting tensors. Differentiable. (Views such as view, narrow, transpose and
// permute are methods of Tensor.)
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata {

// Copies into a fresh contiguous tensor; all dtypes. Sizes must match except along dim.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
// All shapes equal; the new dimension is inserted at dim (in [-(rank+1), rank]).
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// The lower (tril) or upper (triu) triangle of the matrices in the last two dimensions
// (rank >= 2, any dtype; batched over the leading ones), zero elsewhere: tril keeps
// col - row <= diagonal, triu col - row >= diagonal (0 the main diagonal, positive above,
// negative below), as torch. Kept elements are copied bit for bit (NaN, -0.0); the
// gradient is masked the same way.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// Pieces of `split_size` along dim (the last may be smaller); views of x.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
// Pieces of the given sizes (which must sum to x.size(dim)); views of x.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// As torch.chunk: split(x, ceil(size / chunks), dim), so there may be fewer than `chunks`
// pieces; an empty dimension gives `chunks` empty pieces. Views of x.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);

}  // namespace strata
