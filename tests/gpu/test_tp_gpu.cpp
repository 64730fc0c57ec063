// Tensor parallelism on CUDA tensors (label gpu, 2 ranks over the MPI world, which stages
// CUDA tensors through the host so both ranks may share one GPU): the vocab-parallel loss
// and its gradient, VocabParallelEmbedding forward and backward, and a TP GPT training step
// on the GPU must equal the same computation on the CPU over the same group.
// Bounds: the loss kernels run the CPU's row functions (strata_kernels/common/vocab_parallel_rows.h)
// in the same order, with double statistics; only exp of a double (glibc's or CUDA's, each
// within an ulp) differs, so float64 agrees to 1e-13 relative and float32, rounded once from
// those doubles, to 1 ulp. The embedding gathers and adds zeros: the same bits. The GPT step
// adds cuBLAS's summation order (float64: 1e-10 relative after two AdamW steps).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "distributed/model_equivalence_util.h"
#include "gpu/gpu_test.h"
#include "strata/parallel/tp_factory.h"
#include "strata/parallel/tp_layers.h"
#include "strata/tensor/cuda.h"
#include "test_util.h"

namespace strata {
namespace {

using strata::testing::max_ulps;

class TpGpu : public strata::testing::GpuTest {
 protected:
  Device here() const { return Device::cuda(cuda::current_device()); }
};

constexpr int64_t kIgnore = -100;

// max |a - b| / max |b| over two tensors (any devices).
double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return diff / std::max(scale, 1e-300);
}

struct LossRun {
  Tensor loss, grad;  // on the CPU
};

LossRun loss_and_grad(const Tensor& logits, const Tensor& targets, int64_t start, int64_t vocab, Device device) {
  Tensor x = logits.to(device).detach().set_requires_grad(true);
  Tensor loss = parallel::vocab_parallel_cross_entropy(x, targets.to(device), start, vocab, dist::world(), kIgnore);
  loss.backward();
  return {loss.to(Device::cpu()), x.grad().to(Device::cpu())};
}

// Rows of 37 (not a multiple of 32) and 1000 words, split over the ranks with padding.
TEST_F(TpGpu, VocabParallelLossMatchesCpu) {
  auto& world = dist::world();
  for (int64_t vocab : {37, 1000}) {
    const int64_t rows = 19, part = (vocab + world.size() - 1) / world.size(), start = part * world.rank();
    Generator gen(7, static_cast<uint64_t>(vocab));
    const Tensor full_logits = mul(randn({rows, world.size() * part}, {.dtype = DType::Float64}, &gen), 4.0);
    std::vector<int64_t> tv;
    for (int64_t i = 0; i < rows; ++i) tv.push_back(i % 4 == 3 ? kIgnore : (i * 131 + 5) % vocab);
    const Tensor targets = from_vector(tv, {rows});
    for (DType dtype : {DType::Float64, DType::Float32}) {
      const Tensor mine = full_logits.narrow(1, start, part).contiguous().to(dtype);
      const LossRun cpu = loss_and_grad(mine, targets, start, vocab, Device::cpu());
      const LossRun gpu = loss_and_grad(mine, targets, start, vocab, here());
      SCOPED_TRACE(::testing::Message() << "vocab " << vocab << ", " << dtype_name(dtype));
      if (dtype == DType::Float64) {
        EXPECT_LE(relative_difference(gpu.loss, cpu.loss), 1e-13);
        EXPECT_LE(relative_difference(gpu.grad, cpu.grad), 1e-13);
      } else {
        EXPECT_LE(max_ulps(gpu.loss, cpu.loss), 1);
        EXPECT_LE(max_ulps(gpu.grad, cpu.grad), 1);
      }
    }
  }
}

TEST_F(TpGpu, VocabParallelLossErrorsMatchCpu) {
  auto& world = dist::world();
  const Tensor logits = zeros({3, 4}, {.device = here()});
  const Tensor bad = from_vector(std::vector<int64_t>{1, kIgnore, 9}, {3});
  const std::string msg = strata::testing::error_of(
      [&] { (void)parallel::vocab_parallel_cross_entropy(logits, bad.to(here()), 0, 8, world, kIgnore); });
  EXPECT_NE(msg.find("vocab_parallel_cross_entropy: target 9 at position 2 is out of range for a vocabulary of 8"),
            std::string::npos)
      << msg;
  const std::string mixed =
      strata::testing::error_of([&] { (void)parallel::vocab_parallel_cross_entropy(logits, bad, 0, 8, world); });
  EXPECT_NE(mixed.find("cpu"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("cuda:"), std::string::npos) << mixed;
}

TEST_F(TpGpu, VocabParallelEmbeddingMatchesCpu) {
  auto& world = dist::world();
  for (DType dtype : {DType::Float64, DType::Float32}) {
    Generator g_cpu(11), g_gpu(11);  // the same weights in both
    parallel::VocabParallelEmbedding on_cpu(15, 6, {.dtype = dtype, .gen = &g_cpu}, world);
    parallel::VocabParallelEmbedding on_gpu(15, 6, {.dtype = dtype, .gen = &g_gpu}, world);
    on_gpu.to(here());
    Generator gen(5);
    const Tensor tokens = randint(0, 15, {3, 7}, {.dtype = DType::Int64}, &gen);
    const Tensor w = randn({3, 7, 6}, {.dtype = dtype}, &gen);
    const Tensor y_cpu = on_cpu.forward(tokens);
    const Tensor y_gpu = on_gpu.forward(tokens.to(here()));
    sum(mul(y_cpu, w)).backward();
    sum(mul(y_gpu, w.to(here()))).backward();
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_EQ(max_ulps(y_gpu.to(Device::cpu()), y_cpu), 0);
    EXPECT_EQ(max_ulps(on_gpu.weight.grad().to(Device::cpu()), on_cpu.weight.grad()), 0);
    strata::testing::expect_error_mentions(
        [&] {
          (void)on_gpu.forward(from_vector(std::vector<int64_t>{3, 15}, {2}).to(here()));
        },
        {"VocabParallelEmbedding: index 15 at position 1 is out of range for a vocabulary of 15"});
  }
}

// The TP GPT of tests/distributed/parallel/test_tp_models.cpp (padded vocabulary, fused qkv in three
// sections), two AdamW steps on each device from the same weights.
TEST_F(TpGpu, GptStepMatchesCpu) {
  auto& world = dist::world();
  const int64_t rows = 2;
  for (bool sequence_parallel : {false, true}) {
    SCOPED_TRACE(sequence_parallel ? "sequence parallel" : "tensor parallel");
    auto run = [&](Device device, std::vector<double>& losses) {
      auto tp =
          std::make_shared<parallel::TensorParallelFactory>(world, parallel::TensorParallelOptions{sequence_parallel});
      auto model = build(Family::Gpt, DType::Float64, tp);
      model->to(device);
      optim::AdamW opt(model->parameters(), adamw());
      for (int s = 0; s < 2; ++s) {
        auto [x, y] = batch(s, rows);
        opt.zero_grad();
        Tensor loss = model->loss(x.to(device), y.to(device));
        loss.backward();
        opt.step();
        losses.push_back(loss.item());
      }
      return parallel::full_state_dict(*model, world);  // gathers on the device (3-section joins included)
    };
    std::vector<double> cpu_losses, gpu_losses;
    const StateDict cpu = run(Device::cpu(), cpu_losses);
    const StateDict gpu = run(here(), gpu_losses);
    for (size_t s = 0; s < cpu_losses.size(); ++s)
      EXPECT_NEAR(gpu_losses[s], cpu_losses[s], 1e-12 * std::fabs(cpu_losses[s])) << "step " << s;
    ASSERT_EQ(cpu.size(), gpu.size());
    for (const auto& [name, t] : cpu) {
      ASSERT_EQ(gpu.count(name), 1u) << name;
      EXPECT_TRUE(gpu.at(name).device().is_cuda()) << name;
      EXPECT_LE(relative_difference(gpu.at(name), t), 1e-10) << name;
    }
  }
}

}  // namespace
}  // namespace strata
