#pragma once
// Multi-tensor optimizer steps: every parameter of a step in one pass per (device, dtype),
// through a chunk table (strata_kernels/common/multi_tensor.h). On CUDA one kernel launch, on the
// CPU the same functors (strata_kernels/common/fused_adam.h, fused_sgd.h, fused_lion.h) under
// OpenMP, so both round alike. optim::Adam/AdamW, optim::SGD and optim::Lion step through them.
#include <cstdint>
#include <span>
#include <vector>

#include "strata/tensor/tensor.h"
#include "strata_kernels/common/multi_tensor.h"

namespace strata::optim::multi_tensor {

// Rules every tensor of both steps follows: param, grad and the state tensors are
// contiguous, of one dtype (float32 or float64), one shape and one device. low_copy, when
// defined, is a contiguous bfloat16 or float16 tensor of the same numel on that device that
// receives the updated parameter rounded (the model's 16-bit weights beside fp32 masters).

struct AdamHyper {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool decoupled_weight_decay = false;  // AdamW
};

// step: this parameter's step count, already incremented for this step.
struct AdamTensorArgs {
  Tensor param{}, exp_avg{}, exp_avg_sq{}, grad{}, low_copy{};
  double lr = 0;
  double weight_decay = 0;
  int64_t step = 0;
};

struct SgdHyper {
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
};

// momentum_buffer: required when momentum != 0 (zero-filled on its first step, when
// init_buffer is set: the buffer then becomes the first direction, as torch does).
struct SgdTensorArgs {
  Tensor param{}, grad{}, momentum_buffer{}, low_copy{};
  double lr = 0;
  double weight_decay = 0;
  bool init_buffer = false;
};

struct LionHyper {
  double beta1 = 0.9;
  double beta2 = 0.99;
};

// exp_avg: zero-filled on the parameter's first step.
struct LionTensorArgs {
  Tensor param{}, exp_avg{}, grad{}, low_copy{};
  double lr = 0;
  double weight_decay = 0;  // decoupled: p *= 1 - lr * weight_decay
};

// Update every tensor; one launch per (device, dtype). Every argument is checked first: a
// bad one fails naming the tensor by its position, and nothing is updated.
void fused_adam_step(std::span<const AdamTensorArgs> tensors, const AdamHyper& hyper,
                     int64_t chunk_elements = strata_kernels::kDefaultChunkElements);
void fused_sgd_step(std::span<const SgdTensorArgs> tensors, const SgdHyper& hyper,
                    int64_t chunk_elements = strata_kernels::kDefaultChunkElements);
void fused_lion_step(std::span<const LionTensorArgs> tensors, const LionHyper& hyper,
                     int64_t chunk_elements = strata_kernels::kDefaultChunkElements);

// Gradient operations over many tensors (float32 or float64, contiguous; any mix of devices
// and dtypes, one launch per (device, dtype)). The reductions add in
// strata_kernels/common/chunk_reduce.h's fixed order, then the chunks' partials in order: the same
// bits on the CPU and a GPU, and for any number of CPU threads.
// The sum of the squares of every element, accumulated in double.
double sum_of_squares(std::span<const Tensor> tensors, int64_t chunk_elements = strata_kernels::kDefaultChunkElements);
// t *= factor for every element, in place.
void scale(std::span<const Tensor> tensors, double factor,
           int64_t chunk_elements = strata_kernels::kDefaultChunkElements);
// t *= factor in place (loss scaling's unscale); true when any element was inf or nan.
bool unscale_and_check(std::span<const Tensor> tensors, double factor,
                       int64_t chunk_elements = strata_kernels::kDefaultChunkElements);

// The chunk table of tensors of `sizes` elements: each tensor cut into [begin, end) ranges
// of at most chunk_elements, in order; empty tensors have none.
std::vector<strata_kernels::TensorChunk> plan_chunks(std::span<const int64_t> sizes, int64_t chunk_elements);

}  // namespace strata::optim::multi_tensor
