#pragma once
// The seam between device-generic tensor code (which never includes CUDA headers) and
// src/backend/cuda/*.cpp. A build without CUDA compiles src/backend/cuda/absent.cpp
// instead, whose definitions throw "strata was built without CUDA".
#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/tensor/tensor.h"
#include "tensor/cuda_memory.h"

namespace strata::cuda_detail {

// dst = src element by element (shapes equal, dtypes may differ), at least one on CUDA.
// Synchronous for the host: when dst is on the CPU it holds the values on return.
void copy(const Tensor& dst, const Tensor& src);
// How many copies with both sides on one GPU went through host memory (a conversion or
// layout the device kernels do not take): each waits for the device, so a training step
// should make none (tests/gpu/test_copy_gpu.cpp counts them).
int64_t same_device_host_round_trips();
// dst (on CUDA) = value, converted to dst's dtype.
void fill(const Tensor& dst, double value);
// Multi-tensor operations (optim/multi_tensor.cpp builds the tables): `tensors` is a host
// array of the kernel's entries (strata_kernels::AdamTensor<T>, SgdTensor<T>, LionTensor<T>,
// GradTensor<T>; T float for float32, double for float64) holding device pointers, `chunks`
// a host array of n_chunks strata_kernels::TensorChunk. Both are uploaded, then one launch on the current
// stream. A reduction also copies its n_chunks partials (partial_bytes each) into the host
// array `partials` and returns once they are there.
enum class MultiTensorKernel { Adam, Sgd, Lion, Scale };
enum class MultiTensorReduction { SumOfSquares, UnscaleCheck };
void multi_tensor_launch(MultiTensorKernel kernel, DType dtype, int device, const void* tensors, size_t tensors_bytes,
                         const void* chunks, int64_t n_chunks);
void multi_tensor_reduce(MultiTensorReduction reduction, DType dtype, int device, const void* tensors,
                         size_t tensors_bytes, const void* chunks, int64_t n_chunks, void* partials,
                         size_t partial_bytes);

}  // namespace strata::cuda_detail
