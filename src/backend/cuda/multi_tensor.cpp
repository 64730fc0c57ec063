// CUDA glue of the multi-tensor optimizer steps and gradient operations
// (optim/multi_tensor.cpp builds the tables).
#include <array>
#include <cstring>
#include <mutex>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "strata_kernels/common/multi_tensor.h"
#include "strata_kernels/multi_tensor_grad.h"
#include "strata_kernels/multi_tensor_optim.h"

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
using ReduceLauncher = cudaError_t (*)(const void*, const void*, int64_t, void*, cudaStream_t);

void check_dtype(DType dtype) {
  STRATA_CHECK(dtype == DType::Float32 || dtype == DType::Float64, "multi-tensor operation: dtype ", dtype,
               " (expected float32 or float64)");
}

Launcher launcher(MultiTensorKernel kernel, DType dtype) {
  check_dtype(dtype);
  const bool f32 = dtype == DType::Float32;
  switch (kernel) {
    case MultiTensorKernel::Adam: return f32 ? strata_fused_adam_f32 : strata_fused_adam_f64;
    case MultiTensorKernel::Sgd: return f32 ? strata_fused_sgd_f32 : strata_fused_sgd_f64;
    case MultiTensorKernel::Lion: return f32 ? strata_fused_lion_f32 : strata_fused_lion_f64;
    case MultiTensorKernel::Scale: return f32 ? strata_scale_f32 : strata_scale_f64;
  }
  STRATA_FAIL("multi-tensor operation: unknown kernel");
}

ReduceLauncher reduce_launcher(MultiTensorReduction reduction, DType dtype) {
  check_dtype(dtype);
  const bool f32 = dtype == DType::Float32;
  switch (reduction) {
    case MultiTensorReduction::SumOfSquares: return f32 ? strata_sum_of_squares_f32 : strata_sum_of_squares_f64;
    case MultiTensorReduction::UnscaleCheck: return f32 ? strata_unscale_check_f32 : strata_unscale_check_f64;
  }
  STRATA_FAIL("multi-tensor operation: unknown reduction");
}

// Device copies of both tables (and `extra_bytes` of device scratch after them), uploaded
// on `stream` from a pinned slot. Called with the buffer's mutex held.
struct DeviceTables {
  const unsigned char* tensors;
  const unsigned char* chunks;
  unsigned char* extra;
};

DeviceTables upload_tables(TableBuffer& buffer, cudaStream_t stream, const void* tensors, size_t tensors_bytes,
                           const void* chunks, int64_t n_chunks, size_t extra_bytes) {
  const auto round_up = [](size_t n) { return (n + 255) / 256 * 256; };
  const size_t chunks_offset = round_up(tensors_bytes);
  const size_t chunks_bytes = static_cast<size_t>(n_chunks) * sizeof(strata_kernels::TensorChunk);
  const size_t extra_offset = round_up(chunks_offset + chunks_bytes);
  const size_t upload_bytes = chunks_offset + chunks_bytes;
  const size_t bytes = extra_offset + extra_bytes;
  if (buffer.device_capacity < bytes) {
    if (buffer.device != nullptr) {
      STRATA_CUDA(cudaStreamSynchronize(stream));  // the last launch may still read it
      STRATA_CUDA(cudaFree(buffer.device));
      buffer.device = nullptr;
      buffer.device_capacity = 0;
    }
    STRATA_CUDA(cudaMalloc(&buffer.device, bytes));
    buffer.device_capacity = bytes;
  }
  TableBuffer::Slot& slot = pinned_slot(buffer, upload_bytes);
  auto* staged = static_cast<unsigned char*>(slot.host);
  std::memcpy(staged, tensors, tensors_bytes);
  std::memcpy(staged + chunks_offset, chunks, chunks_bytes);
  auto* base = static_cast<unsigned char*>(buffer.device);
  STRATA_CUDA(cudaMemcpyAsync(base, staged, upload_bytes, cudaMemcpyHostToDevice, stream));
  STRATA_CUDA(cudaEventRecord(slot.copied, stream));
  return {base, base + chunks_offset, base + extra_offset};
}

TableBuffer& checked_buffer(int device, const char* what) {
  check_device(Device::cuda(device), what);
  STRATA_CHECK(device < kMaxDevices, what, ": ", Device::cuda(device), " (at most ", kMaxDevices, " devices)");
  return table_buffer(device);
}

}  // namespace

void multi_tensor_launch(MultiTensorKernel kernel, DType dtype, int device, const void* tensors, size_t tensors_bytes,
                         const void* chunks, int64_t n_chunks) {
  if (n_chunks == 0) return;
  TableBuffer& buffer = checked_buffer(device, "multi-tensor operation");
  const Launcher run = launcher(kernel, dtype);
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(device);
  std::lock_guard<std::mutex> lock(buffer.mutex);
  const DeviceTables d = upload_tables(buffer, stream, tensors, tensors_bytes, chunks, n_chunks, 0);
  STRATA_LAUNCH(run(d.tensors, d.chunks, n_chunks, stream));
}

void multi_tensor_reduce(MultiTensorReduction reduction, DType dtype, int device, const void* tensors,
                         size_t tensors_bytes, const void* chunks, int64_t n_chunks, void* partials,
                         size_t partial_bytes) {
  if (n_chunks == 0) return;
  TableBuffer& buffer = checked_buffer(device, "multi-tensor reduction");
  const ReduceLauncher run = reduce_launcher(reduction, dtype);
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(device);
  std::lock_guard<std::mutex> lock(buffer.mutex);
  const size_t bytes = static_cast<size_t>(n_chunks) * partial_bytes;
  const DeviceTables d = upload_tables(buffer, stream, tensors, tensors_bytes, chunks, n_chunks, bytes);
  STRATA_LAUNCH(run(d.tensors, d.chunks, n_chunks, d.extra, stream));
  // The caller needs the value now: wait for it (a pageable destination makes this copy
  // synchronous anyway).
  STRATA_CUDA(cudaMemcpyAsync(partials, d.extra, bytes, cudaMemcpyDeviceToHost, stream));
  STRATA_CUDA(cudaStreamSynchronize(stream));
}

}  // namespace strata::cuda_detail
