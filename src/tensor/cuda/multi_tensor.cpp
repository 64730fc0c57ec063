// CUDA glue of the multi-tensor optimizer steps (optim/multi_tensor.cpp builds the tables).
#include <array>
#include <cstring>
#include <mutex>

#include "common/multi_tensor.h"
#include "strata_kernels/multi_tensor_optim.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/cuda_check.h"

namespace strata::cuda_detail {
namespace {

// The tables' device copy, one per device, reused by every step: the upload of step k+1
// and its kernel run on the same stream after step k's kernel, so no step overwrites a
// table still being read. The upload comes from pinned memory: from pageable memory
// cudaMemcpyAsync would first wait for all queued work (the backward pass), stalling the
// host every step. Two pinned slots, each reused once the copy that last read it is done.
// Buffers only grow; one being replaced is freed after the work that reads it.
struct TableBuffer {
  std::mutex mutex;
  void* device = nullptr;
  size_t device_capacity = 0;
  struct Slot {
    void* host = nullptr;
    size_t capacity = 0;
    cudaEvent_t copied = nullptr;  // recorded after the upload that read this slot
  };
  std::array<Slot, 2> slots;
  size_t next = 0;
};

constexpr int kMaxDevices = 64;

TableBuffer& table_buffer(int device) {
  static std::array<TableBuffer, kMaxDevices> buffers;
  return buffers[static_cast<size_t>(device)];
}

// A pinned slot of at least `bytes`, free to overwrite.
TableBuffer::Slot& pinned_slot(TableBuffer& buffer, size_t bytes) {
  TableBuffer::Slot& slot = buffer.slots[buffer.next];
  buffer.next = (buffer.next + 1) % buffer.slots.size();
  if (slot.copied == nullptr) STRATA_CUDA(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
  STRATA_CUDA(cudaEventSynchronize(slot.copied));  // its last upload has read it
  if (slot.capacity < bytes) {
    if (slot.host != nullptr) STRATA_CUDA(cudaFreeHost(slot.host));
    slot.host = nullptr;
    slot.capacity = 0;
    STRATA_CUDA(cudaHostAlloc(&slot.host, bytes, cudaHostAllocDefault));
    slot.capacity = bytes;
  }
  return slot;
}

using Launcher = cudaError_t (*)(const void*, const void*, int64_t, cudaStream_t);

Launcher launcher(MultiTensorKernel kernel, DType dtype) {
  STRATA_CHECK(dtype == DType::Float32 || dtype == DType::Float64, "multi-tensor optimizer step: dtype ", dtype,
               " (expected float32 or float64)");
  const bool f32 = dtype == DType::Float32;
  switch (kernel) {
    case MultiTensorKernel::Adam: return f32 ? strata_fused_adam_f32 : strata_fused_adam_f64;
    case MultiTensorKernel::Sgd: return f32 ? strata_fused_sgd_f32 : strata_fused_sgd_f64;
  }
  STRATA_FAIL("multi-tensor optimizer step: unknown kernel");
}

}  // namespace

void multi_tensor_launch(MultiTensorKernel kernel, DType dtype, int device, const void* tensors, size_t tensors_bytes,
                         const void* chunks, int64_t n_chunks) {
  if (n_chunks == 0) return;
  check_device(Device::cuda(device), "multi-tensor optimizer step");
  STRATA_CHECK(device < kMaxDevices, "multi-tensor optimizer step: ", Device::cuda(device), " (at most ",
               kMaxDevices, " devices)");
  const Launcher run = launcher(kernel, dtype);
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(device);
  const size_t chunks_offset = (tensors_bytes + 255) / 256 * 256;
  const size_t chunks_bytes = static_cast<size_t>(n_chunks) * sizeof(strata_kernels::TensorChunk);
  const size_t bytes = chunks_offset + chunks_bytes;
  TableBuffer& buffer = table_buffer(device);
  std::lock_guard<std::mutex> lock(buffer.mutex);
  if (buffer.device_capacity < bytes) {
    if (buffer.device != nullptr) {
      STRATA_CUDA(cudaStreamSynchronize(stream));  // the last step's kernel may still read it
      STRATA_CUDA(cudaFree(buffer.device));
      buffer.device = nullptr;
      buffer.device_capacity = 0;
    }
    STRATA_CUDA(cudaMalloc(&buffer.device, bytes));
    buffer.device_capacity = bytes;
  }
  TableBuffer::Slot& slot = pinned_slot(buffer, bytes);
  auto* staged = static_cast<unsigned char*>(slot.host);
  std::memcpy(staged, tensors, tensors_bytes);
  std::memcpy(staged + chunks_offset, chunks, chunks_bytes);
  auto* base = static_cast<unsigned char*>(buffer.device);
  STRATA_CUDA(cudaMemcpyAsync(base, staged, bytes, cudaMemcpyHostToDevice, stream));
  STRATA_CUDA(cudaEventRecord(slot.copied, stream));
  STRATA_CUDA(run(base, base + chunks_offset, n_chunks, stream));
}

}  // namespace strata::cuda_detail
