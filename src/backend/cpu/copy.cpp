#include "backend/cpu/copy.h"

#include <cstring>
#include <vector>

#include "strata/tensor/factory.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

// Visits every element of `shape` as (outer index -> offsets) with an inner contiguous run
// along the last dimension; the callback gets the two base offsets and the run length.
template <class F>
void for_each_row(const Shape& shape, const Strides& sa, const Strides& sb, F&& f) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (nd == 0) {
    f(int64_t{0}, int64_t{0}, int64_t{1}, int64_t{1}, int64_t{1});
    return;
  }
  const int64_t inner = shape[nd - 1];
  int64_t rows = 1;
  for (int64_t d = 0; d < nd - 1; ++d) rows *= shape[d];
  if (inner == 0 || rows == 0) return;
#pragma omp parallel for if (rows * inner > 65536) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, oa = 0, ob = 0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      int64_t i = rem % shape[d];
      rem /= shape[d];
      oa += i * sa[d];
      ob += i * sb[d];
    }
    f(oa, ob, inner, sa[nd - 1], sb[nd - 1]);
  }
}

}  // namespace

void copy_strided(const Tensor& dst, const Tensor& src) {
  STRATA_CHECK(dst.shape() == src.shape(), "copy: destination shape ", dst.shape(), " differs from source shape ",
               src.shape());
  if (dst.numel() == 0) return;  // an empty tensor may have no storage: nothing to read or write
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(dst.raw_data(), src.raw_data(), dst.nbytes());
    return;
  }
  detail::dispatch_all(dst.dtype(), [&]<class D>() {
    detail::dispatch_all(src.dtype(), [&]<class S>() {
      D* d = static_cast<D*>(dst.raw_data());
      const S* s = static_cast<const S*>(src.raw_data());
      for_each_row(dst.shape(), dst.strides(), src.strides(),
                   [&](int64_t od, int64_t os, int64_t n, int64_t sd, int64_t ss) {
                     for (int64_t i = 0; i < n; ++i) d[od + i * sd] = detail::convert<D>(s[os + i * ss]);
                   });
    });
  });
}

void fill(const Tensor& dst, double value) {
  detail::dispatch_all(dst.dtype(), [&]<class D>() {
    D* d = static_cast<D*>(dst.raw_data());
    const D v = detail::convert<D>(value);
    for_each_row(dst.shape(), dst.strides(), dst.strides(), [&](int64_t od, int64_t, int64_t n, int64_t sd, int64_t) {
      for (int64_t i = 0; i < n; ++i) d[od + i * sd] = v;
    });
  });
}

Tensor cat(const std::vector<Tensor>& ts, size_t d, const Shape& out_shape) {
  Tensor out = empty(out_shape, {.dtype = ts[0].dtype()});
  if (out.numel() == 0) return out;
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < d; ++k) outer *= out_shape[k];
  for (size_t k = d + 1; k < out_shape.size(); ++k) inner *= out_shape[k];
  const size_t elem = dtype_size(out.dtype());
  const int64_t out_row = out_shape[d] * inner;  // elements of out per outer index
  char* o = static_cast<char*>(out.raw_data());
  int64_t start = 0;
  for (const Tensor& t : ts) {
    const int64_t len = t.shape()[d];
    if (len == 0) continue;
    if (t.is_contiguous()) {
      // Each outer index holds one contiguous run of len * inner elements in both tensors.
      const int64_t run = len * inner;
      const char* s = static_cast<const char*>(t.raw_data());
#pragma omp parallel for if (outer > 1 && outer * run > 65536) schedule(static)
      for (int64_t r = 0; r < outer; ++r) {
        std::memcpy(o + static_cast<size_t>(r * out_row + start * inner) * elem,
                    s + static_cast<size_t>(r * run) * elem, static_cast<size_t>(run) * elem);
      }
    } else {
      copy_strided(out.narrow(static_cast<int64_t>(d), start, len), t);
    }
    start += len;
  }
  return out;
}

}  // namespace strata::cpu
