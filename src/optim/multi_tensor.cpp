#include "optim/multi_tensor.h"

#include <algorithm>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>

#include "backend/cpu/multiversion.h"
#include "backend/cuda/cuda_backend.h"
#include "strata/core/error.h"
#include "strata/profiler/profiler.h"
#include "strata_kernels/common/chunk_reduce.h"
#include "strata_kernels/common/cpu_executor.h"
#include "strata_kernels/common/fused_adam.h"
#include "strata_kernels/common/fused_lion.h"
#include "strata_kernels/common/fused_sgd.h"
#include "strata_kernels/common/grad_ops.h"

namespace strata::optim::multi_tensor {
namespace {

using strata_kernels::LowPrecision;
using strata_kernels::TensorChunk;

// Chunks go to threads only when there is enough work to share.
constexpr int64_t kParallelThreshold = 32768;

// The kernels write through raw pointers: count each written tensor's in-place write, so a
// backward that saved a parameter before the step refuses to run (undefined ones skipped).
void bump_versions(std::span<const Tensor> tensors) {
  for (const Tensor& t : tensors)
    if (t.defined()) t.bump_version();
}
void bump_versions(std::initializer_list<Tensor> tensors) {
  bump_versions(std::span<const Tensor>(tensors.begin(), tensors.size()));
}

std::string who(const char* step, size_t index) { return std::string(step) + ": parameter " + std::to_string(index); }

void check_param(const std::string& who, const Tensor& param) {
  STRATA_CHECK(param.defined(), who, " is not given");
  STRATA_CHECK(param.dtype() == DType::Float32 || param.dtype() == DType::Float64, who, " is ", param.dtype(),
               "; the update runs in float32 or float64 (16-bit weights go in low_copy)");
  STRATA_CHECK(param.is_contiguous(), who, " ", param.shape(), " is not contiguous");
}

// `t` (the gradient or a state tensor) must match the parameter exactly.
void check_like(const std::string& who, const Tensor& param, const char* name, const Tensor& t) {
  STRATA_CHECK(t.defined(), who, ": its ", name, " is not given");
  STRATA_CHECK(t.dtype() == param.dtype() && t.shape() == param.shape() && t.device() == param.device(), who, ": ",
               name, " is ", t.dtype(), t.shape(), " on ", t.device(), ", the parameter ", param.dtype(), param.shape(),
               " on ", param.device());
  STRATA_CHECK(t.is_contiguous(), who, ": its ", name, " is not contiguous");
}

void check_low_copy(const std::string& who, const Tensor& param, const Tensor& low) {
  if (!low.defined()) return;
  STRATA_CHECK(low.dtype() == DType::BFloat16 || low.dtype() == DType::Float16, who, ": low_copy is ", low.dtype(),
               " (expected bfloat16 or float16)");
  STRATA_CHECK(low.numel() == param.numel() && low.is_contiguous() && low.device() == param.device(), who,
               ": low_copy ", low.shape(), " on ", low.device(), " must be contiguous with the parameter's ",
               param.numel(), " elements on ", param.device());
}

// The element pointer on the tensor's own device (data<T>() is for host memory only).
template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

uint16_t* low_bits(const Tensor& low) { return low.defined() ? static_cast<uint16_t*>(low.data_ptr()) : nullptr; }

LowPrecision low_kind(const Tensor& low) {
  if (!low.defined()) return LowPrecision::None;
  return low.dtype() == DType::BFloat16 ? LowPrecision::BFloat16 : LowPrecision::Float16;
}

// The arguments grouped by (device, dtype) of the tensor `key` picks, each group in the
// caller's order, the groups in order of first appearance.
template <class Args>
struct Batch {
  Device device;
  DType dtype;
  std::vector<const Args*> args;
};

template <class Args, class Key>
std::vector<Batch<Args>> batch_by_device_and_dtype(std::span<const Args> items, Key key) {
  std::vector<Batch<Args>> batches;
  for (const Args& a : items) {
    const Tensor& t = key(a);
    auto it = std::find_if(batches.begin(), batches.end(),
                           [&](const Batch<Args>& b) { return b.device == t.device() && b.dtype == t.dtype(); });
    if (it == batches.end()) it = batches.insert(batches.end(), Batch<Args>{t.device(), t.dtype(), {}});
    it->args.push_back(&a);
  }
  return batches;
}

template <class Args>
std::vector<Batch<Args>> batch_by_param(std::span<const Args> items) {
  return batch_by_device_and_dtype(items, [](const Args& a) -> const Tensor& { return a.param; });
}

// The CPU executor's thread loop, compiled per ISA level (the per-element square root and
// division dominate once vectorised).
template <class Entry, class Op>
STRATA_MULTIVERSION void run_cpu(const Entry* tensors, const TensorChunk* chunks, int64_t n_chunks, bool parallel) {
  const Op op{};
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < n_chunks; ++c) strata_kernels::run_chunk(tensors, chunks[c], op);
}

// The CPU executor of a reduction: chunks on threads, each replaying the GPU's order into
// its own partial, so the thread count cannot change the result.
template <class Entry, class Op>
STRATA_MULTIVERSION void reduce_cpu(const Entry* tensors, const TensorChunk* chunks, int64_t n_chunks,
                                    typename Op::Acc* partials, bool parallel) {
  const Op op{};
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < n_chunks; ++c) partials[c] = strata_kernels::reduce_chunk(tensors, chunks[c], op);
}

// The profiler's row names of the fused multi-tensor passes (they bypass on_device).
const char* profile_name(cuda_detail::MultiTensorKernel kernel) {
  switch (kernel) {
    case cuda_detail::MultiTensorKernel::Adam: return "multi_tensor adam";
    case cuda_detail::MultiTensorKernel::Sgd: return "multi_tensor sgd";
    case cuda_detail::MultiTensorKernel::Lion: return "multi_tensor lion";
    case cuda_detail::MultiTensorKernel::Scale: return "multi_tensor scale";
  }
  return "multi_tensor";
}

const char* profile_name(cuda_detail::MultiTensorReduction reduction) {
  return reduction == cuda_detail::MultiTensorReduction::SumOfSquares ? "multi_tensor sum of squares"
                                                                      : "multi_tensor unscale check";
}

// One launch over `entries` (host copies of the tensors' device pointers and constants).
template <class Entry, class Op>
void launch(Device device, DType dtype, cuda_detail::MultiTensorKernel kernel, const std::vector<Entry>& entries,
            const std::vector<int64_t>& sizes, int64_t chunk_elements) {
  profiler::Scope scope(profile_name(kernel), device);
  const std::vector<TensorChunk> chunks = plan_chunks(sizes, chunk_elements);
  if (device.is_cpu()) {
    int64_t total = 0;
    for (int64_t n : sizes) total += n;
    run_cpu<Entry, Op>(entries.data(), chunks.data(), static_cast<int64_t>(chunks.size()), total > kParallelThreshold);
  } else {
    cuda_detail::multi_tensor_launch(kernel, dtype, device.index, entries.data(), entries.size() * sizeof(Entry),
                                     chunks.data(), static_cast<int64_t>(chunks.size()));
  }
}

template <class T>
void adam_batch(const Batch<AdamTensorArgs>& batch, const AdamHyper& h, int64_t chunk_elements) {
  std::vector<strata_kernels::AdamTensor<T>> entries;
  std::vector<int64_t> sizes;
  for (const AdamTensorArgs* a : batch.args) {
    entries.push_back({.param = ptr<T>(a->param),
                       .exp_avg = ptr<T>(a->exp_avg),
                       .exp_avg_sq = ptr<T>(a->exp_avg_sq),
                       .grad = ptr<T>(a->grad),
                       .low_copy = low_bits(a->low_copy),
                       .low_kind = low_kind(a->low_copy),
                       .scalars = strata_kernels::adam_scalars<T>(a->lr, h.beta1, h.beta2, h.eps, a->weight_decay,
                                                                  h.decoupled_weight_decay, a->step)});
    sizes.push_back(a->param.numel());
  }
  launch<strata_kernels::AdamTensor<T>, strata_kernels::FusedAdamOp<T>>(
      batch.device, batch.dtype, cuda_detail::MultiTensorKernel::Adam, entries, sizes, chunk_elements);
}

template <class T>
void sgd_batch(const Batch<SgdTensorArgs>& batch, const SgdHyper& h, int64_t chunk_elements) {
  std::vector<strata_kernels::SgdTensor<T>> entries;
  std::vector<int64_t> sizes;
  for (const SgdTensorArgs* a : batch.args) {
    entries.push_back({.param = ptr<T>(a->param),
                       .momentum_buffer = h.momentum != 0 ? ptr<T>(a->momentum_buffer) : nullptr,
                       .grad = ptr<T>(a->grad),
                       .low_copy = low_bits(a->low_copy),
                       .low_kind = low_kind(a->low_copy),
                       .scalars = {.neg_lr = static_cast<T>(-a->lr),
                                   .weight_decay = static_cast<T>(a->weight_decay),
                                   .momentum = static_cast<T>(h.momentum),
                                   .one_minus_dampening = static_cast<T>(1.0 - h.dampening),
                                   .nesterov = h.nesterov,
                                   .init_buffer = a->init_buffer}});
    sizes.push_back(a->param.numel());
  }
  launch<strata_kernels::SgdTensor<T>, strata_kernels::FusedSgdOp<T>>(
      batch.device, batch.dtype, cuda_detail::MultiTensorKernel::Sgd, entries, sizes, chunk_elements);
}

template <class T>
void lion_batch(const Batch<LionTensorArgs>& batch, const LionHyper& h, int64_t chunk_elements) {
  std::vector<strata_kernels::LionTensor<T>> entries;
  std::vector<int64_t> sizes;
  for (const LionTensorArgs* a : batch.args) {
    entries.push_back({.param = ptr<T>(a->param),
                       .exp_avg = ptr<T>(a->exp_avg),
                       .grad = ptr<T>(a->grad),
                       .low_copy = low_bits(a->low_copy),
                       .low_kind = low_kind(a->low_copy),
                       .scalars = strata_kernels::lion_scalars<T>(a->lr, h.beta1, h.beta2, a->weight_decay)});
    sizes.push_back(a->param.numel());
  }
  launch<strata_kernels::LionTensor<T>, strata_kernels::FusedLionOp<T>>(
      batch.device, batch.dtype, cuda_detail::MultiTensorKernel::Lion, entries, sizes, chunk_elements);
}

// One reduction over `entries`; the chunks' partials, in chunk order.
template <class Entry, class Op>
std::vector<typename Op::Acc> reduce(Device device, DType dtype, cuda_detail::MultiTensorReduction reduction,
                                     const std::vector<Entry>& entries, const std::vector<int64_t>& sizes,
                                     int64_t chunk_elements) {
  profiler::Scope scope(profile_name(reduction), device);
  const std::vector<TensorChunk> chunks = plan_chunks(sizes, chunk_elements);
  std::vector<typename Op::Acc> partials(chunks.size());
  if (device.is_cpu()) {
    int64_t total = 0;
    for (int64_t n : sizes) total += n;
    reduce_cpu<Entry, Op>(entries.data(), chunks.data(), static_cast<int64_t>(chunks.size()), partials.data(),
                          total > kParallelThreshold);
  } else {
    cuda_detail::multi_tensor_reduce(reduction, dtype, device.index, entries.data(), entries.size() * sizeof(Entry),
                                     chunks.data(), static_cast<int64_t>(chunks.size()), partials.data(),
                                     sizeof(typename Op::Acc));
  }
  return partials;
}

void check_grad_tensor(const Tensor& t, size_t index, const char* what) {
  STRATA_CHECK(t.defined(), what, ": tensor ", index, " is not defined");
  STRATA_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, what, ": tensor ", index, " ", t.shape(),
               " is ", t.dtype(), " (float32 or float64)");
  STRATA_CHECK(t.is_contiguous(), what, ": tensor ", index, " ", t.shape(), " is not contiguous");
}

std::vector<Batch<Tensor>> checked_batches(std::span<const Tensor> tensors, const char* what) {
  for (size_t i = 0; i < tensors.size(); ++i) check_grad_tensor(tensors[i], i, what);
  return batch_by_device_and_dtype(tensors, [](const Tensor& t) -> const Tensor& { return t; });
}

template <class T>
std::vector<strata_kernels::GradTensor<T>> grad_entries(const Batch<Tensor>& batch, double factor,
                                                        std::vector<int64_t>& sizes) {
  std::vector<strata_kernels::GradTensor<T>> entries;
  for (const Tensor* t : batch.args) {
    entries.push_back({.data = ptr<T>(*t), .factor = static_cast<T>(factor)});
    sizes.push_back(t->numel());
  }
  return entries;
}

// Runs f.template operator()<T>() with T the batch's element type.
template <class F>
void for_dtype(DType dtype, F&& f) {
  if (dtype == DType::Float32) {
    f.template operator()<float>();
  } else {
    f.template operator()<double>();
  }
}

}  // namespace

double sum_of_squares(std::span<const Tensor> tensors, int64_t chunk_elements) {
  double total = 0.0;
  for (const Batch<Tensor>& batch : checked_batches(tensors, "sum_of_squares")) {
    for_dtype(batch.dtype, [&]<class T>() {
      std::vector<int64_t> sizes;
      const auto entries = grad_entries<T>(batch, 1.0, sizes);
      for (double p : reduce<strata_kernels::GradTensor<T>, strata_kernels::SumOfSquaresOp<T>>(
               batch.device, batch.dtype, cuda_detail::MultiTensorReduction::SumOfSquares, entries, sizes,
               chunk_elements))
        total += p;
    });
  }
  return total;
}

void scale(std::span<const Tensor> tensors, double factor, int64_t chunk_elements) {
  for (const Batch<Tensor>& batch : checked_batches(tensors, "scale")) {
    for_dtype(batch.dtype, [&]<class T>() {
      std::vector<int64_t> sizes;
      const auto entries = grad_entries<T>(batch, factor, sizes);
      launch<strata_kernels::GradTensor<T>, strata_kernels::ScaleOp<T>>(
          batch.device, batch.dtype, cuda_detail::MultiTensorKernel::Scale, entries, sizes, chunk_elements);
    });
  }
  bump_versions(tensors);
}

bool unscale_and_check(std::span<const Tensor> tensors, double factor, int64_t chunk_elements) {
  bool found = false;
  for (const Batch<Tensor>& batch : checked_batches(tensors, "unscale")) {
    for_dtype(batch.dtype, [&]<class T>() {
      std::vector<int64_t> sizes;
      const auto entries = grad_entries<T>(batch, factor, sizes);
      for (int32_t p : reduce<strata_kernels::GradTensor<T>, strata_kernels::UnscaleCheckOp<T>>(
               batch.device, batch.dtype, cuda_detail::MultiTensorReduction::UnscaleCheck, entries, sizes,
               chunk_elements))
        found = found || p != 0;
    });
  }
  bump_versions(tensors);
  return found;
}

std::vector<TensorChunk> plan_chunks(std::span<const int64_t> sizes, int64_t chunk_elements) {
  STRATA_CHECK(chunk_elements > 0, "plan_chunks: chunk_elements ", chunk_elements, " (expected > 0)");
  std::vector<TensorChunk> chunks;
  for (size_t t = 0; t < sizes.size(); ++t) {
    STRATA_CHECK(sizes[t] >= 0, "plan_chunks: tensor ", t, " has ", sizes[t], " elements");
    for (int64_t b = 0; b < sizes[t]; b += chunk_elements)
      chunks.push_back({static_cast<int64_t>(t), b, std::min(sizes[t], b + chunk_elements)});
  }
  return chunks;
}

void fused_adam_step(std::span<const AdamTensorArgs> tensors, const AdamHyper& hyper, int64_t chunk_elements) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const AdamTensorArgs& a = tensors[i];
    const std::string w = who("Adam step", i);
    check_param(w, a.param);
    check_like(w, a.param, "gradient", a.grad);
    check_like(w, a.param, "exp_avg", a.exp_avg);
    check_like(w, a.param, "exp_avg_sq", a.exp_avg_sq);
    check_low_copy(w, a.param, a.low_copy);
    STRATA_CHECK(a.step > 0, w, ": step count ", a.step, " (expected > 0)");
  }
  for (const auto& batch : batch_by_param(tensors)) {
    if (batch.dtype == DType::Float32) {
      adam_batch<float>(batch, hyper, chunk_elements);
    } else {
      adam_batch<double>(batch, hyper, chunk_elements);
    }
  }
  for (const AdamTensorArgs& a : tensors) bump_versions({a.param, a.exp_avg, a.exp_avg_sq, a.low_copy});
}

void fused_sgd_step(std::span<const SgdTensorArgs> tensors, const SgdHyper& hyper, int64_t chunk_elements) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SgdTensorArgs& a = tensors[i];
    const std::string w = who("SGD step", i);
    check_param(w, a.param);
    check_like(w, a.param, "gradient", a.grad);
    if (hyper.momentum != 0) check_like(w, a.param, "momentum buffer", a.momentum_buffer);
    check_low_copy(w, a.param, a.low_copy);
  }
  for (const auto& batch : batch_by_param(tensors)) {
    if (batch.dtype == DType::Float32) {
      sgd_batch<float>(batch, hyper, chunk_elements);
    } else {
      sgd_batch<double>(batch, hyper, chunk_elements);
    }
  }
  for (const SgdTensorArgs& a : tensors) bump_versions({a.param, a.momentum_buffer, a.low_copy});
}

void fused_lion_step(std::span<const LionTensorArgs> tensors, const LionHyper& hyper, int64_t chunk_elements) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const LionTensorArgs& a = tensors[i];
    const std::string w = who("Lion step", i);
    check_param(w, a.param);
    check_like(w, a.param, "gradient", a.grad);
    check_like(w, a.param, "exp_avg", a.exp_avg);
    check_low_copy(w, a.param, a.low_copy);
  }
  for (const auto& batch : batch_by_param(tensors)) {
    if (batch.dtype == DType::Float32) {
      lion_batch<float>(batch, hyper, chunk_elements);
    } else {
      lion_batch<double>(batch, hyper, chunk_elements);
    }
  }
  for (const LionTensorArgs& a : tensors) bump_versions({a.param, a.exp_avg, a.low_copy});
}

}  // namespace strata::optim::multi_tensor
