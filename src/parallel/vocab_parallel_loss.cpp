// Cross-entropy over logits split along the vocabulary (Megatron's vocab-parallel loss).
// Device-neutral: each step runs on the logits' device (cpu/ or cuda/vocab_parallel, the
// same row functions of strata_kernels/common/vocab_parallel_rows.h), the collectives between them
// on the group (which takes CUDA tensors: MPI's host staging or CUDA-aware path, NCCL).
#include <algorithm>

#include "backend/dispatch/device_dispatch.h"
#include "parallel/vocab_parallel_rows.h"
#include "strata/autograd/function.h"
#include "strata/parallel/tp_layers.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

constexpr const char* kOp = "vocab_parallel_cross_entropy";

// Per-row statistics of the full (gathered) logits, reduced over the group, float64 [M] on
// the logits' device.
struct RowStats {
  Tensor max;      // the row maximum over the real vocabulary
  Tensor sum_exp;  // sum of exp(logit - max) over the real vocabulary
  Tensor target;   // the target's logit (0 for ignored rows)
};

RowStats row_stats(const Tensor& l, const Tensor& t, int64_t start, int64_t real_cols, int64_t ignore_index,
                   dist::ProcessGroup& group) {
  const Device device = l.device();
  RowStats s;
  s.max = detail::on_device(
      kOp, device, [&] { return vocab_cpu::vocab_parallel_row_max(l, real_cols); },
      [&] { return vocab_cuda::vocab_parallel_row_max(l, real_cols); });
  group.all_reduce(s.max, dist::ReduceOp::Max)->wait();
  VocabRowSums sums = detail::on_device(
      kOp, device, [&] { return vocab_cpu::vocab_parallel_row_sums(l, t, real_cols, start, ignore_index, s.max); },
      [&] { return vocab_cuda::vocab_parallel_row_sums(l, t, real_cols, start, ignore_index, s.max); });
  s.sum_exp = sums.sum_exp;
  s.target = sums.target_logit;
  group.all_reduce(s.sum_exp)->wait();
  group.all_reduce(s.target)->wait();
  return s;
}

}  // namespace

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                                    int64_t vocab_size, dist::ProcessGroup& group, int64_t ignore_index) {
  STRATA_CHECK(logits.defined() && targets.defined(), kOp, ": ", logits.defined() ? "targets" : "logits",
               " are undefined");
  STRATA_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
               "vocab_parallel_cross_entropy: logits must be [M, V_part] and targets [M], got ", logits.shape(),
               " and ", targets.shape());
  STRATA_CHECK(logits.dtype() == DType::Float32 || logits.dtype() == DType::Float64,
               "vocab_parallel_cross_entropy: logits must be float32 or float64, got ", logits.dtype());
  STRATA_CHECK(targets.dtype() == DType::Int64, "vocab_parallel_cross_entropy: targets must be int64, got ",
               targets.dtype());
  // A rank may hold only padding (vocab_start >= vocab_size): its columns take no part.
  STRATA_CHECK(vocab_start >= 0 && vocab_size > 0, "vocab_parallel_cross_entropy: vocab_start ", vocab_start,
               " and vocab_size ", vocab_size, " must be >= 0 and > 0");
  const Device device = detail::common_device(kOp, {{"logits", logits}, {"targets", targets}});
  Tensor l = logits.contiguous().detach();
  Tensor t = targets.contiguous();
  // Columns past the real vocabulary are padding: they take no part (probability zero).
  const int64_t real_cols = std::clamp<int64_t>(vocab_size - vocab_start, 0, l.size(1));
  // Before any collective: every rank holds the same targets, so all fail here together.
  const int64_t counted = detail::on_device(
      kOp, device, [&] { return vocab_cpu::vocab_parallel_check_targets(t, vocab_size, ignore_index); },
      [&] { return vocab_cuda::vocab_parallel_check_targets(t, vocab_size, ignore_index); });
  RowStats s = row_stats(l, t, vocab_start, real_cols, ignore_index, group);
  // No counted target: loss 0 and gradient 0, as strata's cross_entropy.
  Tensor loss = detail::on_device(
      kOp, device,
      [&] {
        return vocab_cpu::vocab_parallel_loss(t, vocab_size, ignore_index, s.max, s.sum_exp, s.target, counted,
                                              l.dtype());
      },
      [&] {
        return vocab_cuda::vocab_parallel_loss(t, vocab_size, ignore_index, s.max, s.sum_exp, s.target, counted,
                                               l.dtype());
      });
  if (autograd::needs_grad({logits}))
    autograd::record(
        "VocabParallelCrossEntropyBackward", {logits}, {loss}, {l, t, s.max, s.sum_exp},
        [l, t, s, vocab_start, vocab_size, real_cols, ignore_index, counted](autograd::BackwardContext& ctx) {
          // item() reads the incoming gradient back (one scalar) on a GPU.
          const double scale = counted > 0 ? ctx.grad().item() / static_cast<double>(counted) : 0.0;
          const char* op = "vocab_parallel_cross_entropy backward";
          Tensor g = detail::on_device(
              op, l.device(),
              [&] {
                return vocab_cpu::vocab_parallel_grad(l, t, real_cols, vocab_start, vocab_size, ignore_index, s.max,
                                                      s.sum_exp, scale);
              },
              [&] {
                return vocab_cuda::vocab_parallel_grad(l, t, real_cols, vocab_start, vocab_size, ignore_index, s.max,
                                                       s.sum_exp, scale);
              });
          return std::vector<Tensor>{g};
        });
  return loss;
}

}  // namespace strata::parallel
