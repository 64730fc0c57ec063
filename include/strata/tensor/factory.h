#pragma once
#include <cstdint>
#include <vector>

#include "strata/core/random.h"
#include "strata/tensor/tensor.h"

namespace strata {

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool requires_grad = false;
};

Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
// [start, end) in steps of step; int64 unless options say otherwise.
Tensor arange(int64_t start, int64_t end, int64_t step = 1, TensorOptions options = {.dtype = DType::Int64});
// Standard normal / uniform [0, 1) from a Philox generator (the default one when null).
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
// Integers uniform in [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = {.dtype = DType::Int64},
               Generator* gen = nullptr);

Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);

// A tensor over memory the caller owns (deleter empty) or hands over (deleter frees it).
Tensor from_blob(void* data, const Shape& shape, DType dtype, Storage::Deleter deleter = {},
                 Device device = Device::cpu());
// A contiguous copy of `values` with the given shape (numel must match).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options = {.dtype = dtype_v<T>});
// A one-element tensor of the given dtype, shape [].
Tensor scalar_tensor(double value, TensorOptions options = {});

}  // namespace strata
