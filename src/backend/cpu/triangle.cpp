#include "backend/cpu/triangle.h"

#include <cstdint>

#include "strata/tensor/factory.h"
#include "strata_kernels/common/triangle.h"
#include "tensor/dtype_dispatch.h"

namespace strata::cpu {
namespace {

constexpr int64_t kParallelElements = 32768;

// tril/triu copies elements without reading their values as numbers, so one loop per element
// size serves every dtype.
template <class U>
void triangle_loop(const void* in_raw, void* out_raw, int64_t total, int64_t rows, int64_t cols, int64_t diagonal,
                   bool lower) {
  const U* in = static_cast<const U*>(in_raw);
  U* out = static_cast<U*>(out_raw);
#pragma omp parallel for if (total > kParallelElements) schedule(static)
  for (int64_t i = 0; i < total; ++i) out[i] = strata_kernels::triangle_element(in, i, rows, cols, diagonal, lower);
}

}  // namespace

Tensor triangle(const Tensor& x_in, int64_t diagonal, bool lower) {
  const Tensor x = x_in.detach().contiguous();
  Tensor out = empty(x.shape(), {.dtype = x.dtype()});
  const int64_t total = x.numel();
  if (total == 0) return out;
  const int64_t rows = x.size(-2), cols = x.size(-1);
  const char* op = lower ? "tril" : "triu";
  detail::CpuOpScope scope(op);
  const void* in = x.raw_data();
  void* o = out.raw_data();
  switch (dtype_size(x.dtype())) {
    case 1: triangle_loop<uint8_t>(in, o, total, rows, cols, diagonal, lower); break;
    case 2: triangle_loop<uint16_t>(in, o, total, rows, cols, diagonal, lower); break;
    case 4: triangle_loop<uint32_t>(in, o, total, rows, cols, diagonal, lower); break;
    case 8: triangle_loop<uint64_t>(in, o, total, rows, cols, diagonal, lower); break;
    default: STRATA_FAIL(op, ": dtype ", x.dtype(), " has an element size this kernel does not copy");
  }
  return out;
}

Tensor one_hot(const Tensor& indices_in, int64_t classes) {
  const Tensor indices = indices_in.contiguous();
  Shape out_shape = indices.shape();
  out_shape.push_back(classes);
  Tensor out = empty(out_shape, {.dtype = DType::Int64});
  const int64_t total = out.numel();
  if (total == 0) return out;
  detail::CpuOpScope scope("one_hot");
  const int64_t* index = indices.data<int64_t>();
  int64_t* o = out.data<int64_t>();
#pragma omp parallel for if (total > kParallelElements) schedule(static)
  for (int64_t i = 0; i < total; ++i) o[i] = strata_kernels::one_hot_element(index, i, classes);
  return out;
}

}  // namespace strata::cpu
