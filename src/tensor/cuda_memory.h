#pragma once
// The CUDA device memory the tensor layer's storage and allocators need. Declared here, below
// the backends; defined by src/backend/cuda/ (allocator.cpp, runtime.cpp) in CUDA builds and
// by src/backend/cuda/absent.cpp otherwise, so tensor/ includes no backend header.
#include <cstddef>
#include <string>

#include "strata/core/device.h"

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
// The stream strata's CUDA work of the calling thread runs on (a cudaStream_t).
void* current_stream(int device);

}  // namespace strata::cuda_detail
