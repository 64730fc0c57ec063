#include "backend/cpu/indexing.h"

#include <cstring>
#include <vector>

#include "backend/cpu/dim_layout.h"
#include "strata/tensor/factory.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

constexpr int64_t kParallelThreshold = 32768;  // elements

// The multi-index of flat position `flat` in `shape`, e.g. [1, 2].
Shape position(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return Shape(std::move(idx));
}

// Runs f<U>() with U an unsigned type of the element size: gather and index_select only
// move elements, so one instantiation per width serves every dtype.
template <class F>
void dispatch_width(DType dtype, const char* op, F&& f) {
  detail::CpuOpScope scope(op);
  switch (dtype_size(dtype)) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    case 8: return f.template operator()<uint64_t>();
  }
  STRATA_FAIL(op, ": unsupported element size ", dtype_size(dtype));
}

// Offset of row `r` (a flat position over every dimension of `shape` but the last) in a
// tensor with `strides`.
int64_t row_offset(int64_t r, const Shape& shape, const Strides& strides) {
  int64_t off = 0;
  for (size_t d = shape.size() - 1; d-- > 0;) {
    off += (r % shape[d]) * strides[d];
    r /= shape[d];
  }
  return off;
}

}  // namespace

void check_index_range(const char* op, const Tensor& index, int64_t dim, const Shape& input_shape) {
  const int64_t size = input_shape[static_cast<size_t>(dim)];
  const int64_t* idx = index.data<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i) {
    if (idx[i] >= 0 && idx[i] < size) [[likely]]
      continue;
    STRATA_FAIL(op, ": index ", idx[i], " at position ", position(index.shape(), i), " of index (shape ", index.shape(),
                ") is out of range for dimension ", dim, " of size ", size, " (input shape ", input_shape, ")");
  }
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Shape out_shape = x.shape();
  const int64_t n = x.size(dim), m = index.numel();
  out_shape[static_cast<size_t>(dim)] = m;
  Tensor out = empty(out_shape, {.dtype = x.dtype()});
  const Layout s = layout_of(x.shape(), dim);
  const size_t row_bytes = static_cast<size_t>(s.inner) * dtype_size(x.dtype());
  const char* px = static_cast<const char*>(x.raw_data());
  char* po = static_cast<char*>(out.raw_data());
  const int64_t* idx = index.data<int64_t>();
  // One memcpy per selected row of `inner` elements.
#pragma omp parallel for if (out.numel() > kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < s.outer * m; ++r) {
    const int64_t o = r / m, j = r % m;
    std::memcpy(po + static_cast<size_t>(r) * row_bytes, px + static_cast<size_t>(o * n + idx[j]) * row_bytes,
                row_bytes);
  }
  return out;
}

void index_add_(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t n = out.size(dim), m = index.numel();
  const Layout s = layout_of(out.shape(), dim);
  const int64_t* idx = index.data<int64_t>();
  detail::dispatch_arith(out.dtype(), "index_add", [&]<class T>() {
    T* po = out.data<T>();
    const T* ps = src.data<T>();
    // Slabs of different `o` never overlap; repeated indices within one slab accumulate in order.
#pragma omp parallel for if (src.numel() > kParallelThreshold && s.outer > 1) schedule(static)
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t j = 0; j < m; ++j) {
        T* dst = po + (o * n + idx[j]) * s.inner;
        const T* from = ps + (o * m + j) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) dst[i] += from[i];
      }
    }
  });
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = empty(index.shape(), {.dtype = x.dtype()});
  const Shape& shape = index.shape();
  const int64_t cols = shape.back(), rows = cols == 0 ? 0 : index.numel() / cols;
  Strides xs = x.strides();
  const int64_t dim_stride = xs[static_cast<size_t>(dim)];
  xs[static_cast<size_t>(dim)] = 0;  // that coordinate comes from the index
  const int64_t step = xs.back();
  const int64_t* idx = index.data<int64_t>();
  dispatch_width(x.dtype(), "gather", [&]<class U>() {
    const U* px = static_cast<const U*>(x.raw_data());
    U* po = static_cast<U*>(out.raw_data());
#pragma omp parallel for if (index.numel() > kParallelThreshold) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const U* base = px + row_offset(r, shape, xs);
      const int64_t* ir = idx + r * cols;
      U* o = po + r * cols;
      for (int64_t c = 0; c < cols; ++c) o[c] = base[c * step + ir[c] * dim_stride];
    }
  });
  return out;
}

void scatter_add_(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const Shape& shape = index.shape();
  const int64_t cols = shape.back(), rows = cols == 0 ? 0 : index.numel() / cols;
  Strides os = out.strides();
  const int64_t dim_stride = os[static_cast<size_t>(dim)];
  os[static_cast<size_t>(dim)] = 0;
  const int64_t out_step = os.back(), src_step = src.strides().back();
  const int64_t* idx = index.data<int64_t>();
  detail::dispatch_arith(out.dtype(), "scatter_add", [&]<class T>() {
    T* po = out.data<T>();
    const T* ps = src.data<T>();
    // Serial: two positions may name the same destination.
    for (int64_t r = 0; r < rows; ++r) {
      T* base = po + row_offset(r, shape, os);
      const T* from = ps + row_offset(r, shape, src.strides());
      const int64_t* ir = idx + r * cols;
      for (int64_t c = 0; c < cols; ++c) base[c * out_step + ir[c] * dim_stride] += from[c * src_step];
    }
  });
}

}  // namespace strata::cpu
