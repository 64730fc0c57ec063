#include "backend/cpu/embedding.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "strata/tensor/factory.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

constexpr int64_t kParallelThreshold = 32768;  // elements
constexpr int64_t kMinColumnsPerThread = 16;   // a cache line of floats at least

// "[1, 5]": the multi-index of flat position `flat` in `shape`.
std::string position(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::ostringstream os;
  os << '[';
  for (size_t d = 0; d < idx.size(); ++d) os << (d ? ", " : "") << idx[d];
  os << ']';
  return os.str();
}

template <class F>
decltype(auto) dispatch_index(const Tensor& indices, F&& f) {
  if (indices.dtype() == DType::Int32) return f(indices.data<int32_t>());
  return f(indices.data<int64_t>());
}

}  // namespace

void check_embedding_indices(const Tensor& indices, const Shape& weight_shape) {
  const int64_t vocab = weight_shape[0], n = indices.numel();
  dispatch_index(indices, [&](const auto* idx) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = static_cast<int64_t>(idx[i]);
      STRATA_CHECK(v >= 0 && v < vocab, "embedding: index ", v, " at position ", position(indices.shape(), i),
                   " of indices with shape ", indices.shape(), " is out of range for a weight of ", vocab,
                   " rows (shape ", weight_shape, ")");
    }
  });
}

Tensor embedding_forward(const Tensor& indices, const Tensor& weight) {
  const int64_t dim = weight.size(1), n = indices.numel();
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);
  Tensor out = empty(out_shape, {.dtype = weight.dtype()});
  check_embedding_indices(indices, weight.shape());
  dispatch_index(indices, [&](const auto* idx) {
    const size_t row_bytes = static_cast<size_t>(dim) * dtype_size(weight.dtype());
    const char* w = static_cast<const char*>(weight.raw_data());
    char* o = static_cast<char*>(out.raw_data());
#pragma omp parallel for if (n * dim > kParallelThreshold) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(o + static_cast<size_t>(i) * row_bytes, w + static_cast<size_t>(idx[i]) * row_bytes, row_bytes);
    }
  });
  return out;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t vocab) {
  const int64_t n = indices.numel();
  const int64_t dim = grad.numel() / std::max<int64_t>(n, 1);
  Tensor dw = zeros({vocab, dim}, {.dtype = grad.dtype()});
  if (n == 0 || dim == 0) return dw;
  const int64_t max_threads =
      std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), dim / kMinColumnsPerThread));
  const int threads = n * dim > kParallelThreshold ? static_cast<int>(max_threads) : 1;
  detail::dispatch_floating(grad.dtype(), "embedding backward", [&]<class T>() {
    const T* pg = grad.data<T>();
    T* pw = dw.data<T>();
    dispatch_index(indices, [&](const auto* idx) {
#pragma omp parallel num_threads(threads)
      {
        const int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t c0 = dim * tid / nt, c1 = dim * (tid + 1) / nt;
        for (int64_t i = 0; i < n; ++i) {
          const T* g = pg + i * dim;
          T* w = pw + static_cast<int64_t>(idx[i]) * dim;
#pragma omp simd
          for (int64_t c = c0; c < c1; ++c) w[c] += g[c];
        }
      }
    });
  });
  return dw;
}

}  // namespace strata::cpu
