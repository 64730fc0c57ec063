#pragma once
// --device and --autocast for the example trainers: which device this rank trains on (checked
// before anything starts), the autocast dtype, the fp16 loss scaler's settings, and the
// banner's and progress line's notes about them.
#include <optional>
#include <string>

#include "common/train_options.h"
#include "strata/core/device.h"
#include "strata/core/dtype.h"

namespace strata::examples {

// "cpu", "cuda" (this rank's GPU: local rank % visible GPUs) or "cuda:N" (every rank on GPU
// N); nullopt for anything else. "cuda" parses as index -1.
std::optional<Device> parse_device_option(const std::string& text);

// Fails naming --device when the value is malformed, when strata was built without CUDA,
// when no GPU is visible, or when cuda:N names a GPU past the visible ones (the index and the
// count). No MPI is needed: it runs before the world starts, on every rank alike.
void check_device_option(const TrainOptions& o);

// After dist::init (which made cuda:(local rank % GPUs) current): the device this rank trains
// on; for cuda:N it makes N current.
Device training_device(const TrainOptions& o);

// --autocast: bf16 or fp16 (nullopt: none).
std::optional<DType> autocast_dtype(const TrainOptions& o);

// " on cuda:1 (process groups: MPI, CUDA tensors staged through the host); autocast bf16"
// for the banner; "" on the CPU without autocast.
std::string device_note(const TrainOptions& o, Device device, int world_size);

// " | peak GPU memory 1.23 GiB" (the caching allocator's peak of tensor memory since the
// start) on CUDA; "" on the CPU.
std::string peak_memory_note(Device device);

}  // namespace strata::examples
