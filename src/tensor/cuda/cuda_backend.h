#pragma once
// The seam between device-generic tensor code (which never includes CUDA headers) and
// src/tensor/cuda/*.cpp. A build without CUDA compiles src/tensor/cuda_unavailable.cpp
// instead, whose definitions throw "strata was built without CUDA".
#include <cstddef>
#include <string>

#include "strata/tensor/tensor.h"

namespace strata::cuda_detail {

// Throws naming `device` and `what` when the device cannot be used: no CUDA build, no GPU
// or driver, or an index past the last GPU.
void check_device(Device device, const char* what);
// Marks a device unusable after a fatal communication error (an aborted NCCL group): from
// then on check_device, which every CUDA op, copy and allocation passes, refuses it naming
// `why`, so no later read returns a partial result silently.
void poison_device(int device, const std::string& why);
void* allocate(size_t nbytes, int device);
void deallocate(void* ptr, size_t nbytes, int device);
// The caching allocator's stream tracking (tensor/caching_allocator.h). record_stream marks
// that `stream` (a cudaStream_t) uses `block`, an in-use block of `device`'s allocator;
// false, doing nothing, for memory the allocator did not hand out. retire_stream must be
// called before `stream` is destroyed.
bool record_stream(void* block, int device, void* stream);
void retire_stream(int device, void* stream);
// dst = src element by element (shapes equal, dtypes may differ), at least one on CUDA.
// Synchronous for the host: when dst is on the CPU it holds the values on return.
void copy(const Tensor& dst, const Tensor& src);
// dst (on CUDA) = value, converted to dst's dtype.
void fill(const Tensor& dst, double value);
// The stream strata's CUDA work of the calling thread runs on (a cudaStream_t).
void* current_stream(int device);
// Multi-tensor operations (optim/multi_tensor.cpp builds the tables): `tensors` is a host
// array of the kernel's entries (strata_kernels::AdamTensor<T>, SgdTensor<T>, GradTensor<T>;
// T float for float32, double for float64) holding device pointers, `chunks` a host array of
// n_chunks strata_kernels::TensorChunk. Both are uploaded, then one launch on the current
// stream. A reduction also copies its n_chunks partials (partial_bytes each) into the host
// array `partials` and returns once they are there.
enum class MultiTensorKernel { Adam, Sgd, Scale };
enum class MultiTensorReduction { SumOfSquares, UnscaleCheck };
void multi_tensor_launch(MultiTensorKernel kernel, DType dtype, int device, const void* tensors, size_t tensors_bytes,
                         const void* chunks, int64_t n_chunks);
void multi_tensor_reduce(MultiTensorReduction reduction, DType dtype, int device, const void* tensors,
                         size_t tensors_bytes, const void* chunks, int64_t n_chunks, void* partials,
                         size_t partial_bytes);

}  // namespace strata::cuda_detail
