// ZeroOptimizer's memory report against the ZeRO paper's formulas, and mixed precision
// (bfloat16 parameters, float32 master weights) end to end.
#include "distributed/zero_test_util.h"

namespace strata::test {
namespace {

// Bytes per rank for Ψ parameters on N ranks, bf16 parameters and gradients, fp32 master
// weights and Adam (exp_avg, exp_avg_sq): (parameters, gradients, master + optimizer state).
struct Formula {
  double params, grads, states;
  double total() const { return params + grads + states; }
};
Formula zero_formula(int stage, double psi, int n) {
  switch (stage) {
    case 0: return {2 * psi, 2 * psi, 12 * psi};               // 16Ψ
    case 1: return {2 * psi, 2 * psi, 12 * psi / n};           // 4Ψ + 12Ψ/N
    case 2: return {2 * psi, 2 * psi / n, 12 * psi / n};       // 2Ψ + 14Ψ/N
    default: return {2 * psi / n, 2 * psi / n, 12 * psi / n};  // 16Ψ/N
  }
}

TEST(ZeroMemory, MatchesTheFormulasForBf16ParametersFp32MasterAndAdam) {
  auto& world = dist::world();
  const int n = world.size();
  nn::GPTConfig config = tiny_gpt(DType::Float32);
  config.param_dtype = DType::BFloat16;  // a real mixed-precision GPT: bf16 parameters, float32 compute
  for (int stage : {0, 1, 2, 3}) {
    nn::GPT model(config);
    for (const Tensor& p : model.parameters()) ASSERT_EQ(p.dtype(), DType::BFloat16);
    const double psi = static_cast<double>(model.num_parameters());
    ZeroOptimizer zero(model, optim::AdamOptions{}, world, zero_options(stage));
    // One real step (Adam creates its state on the first one); transient buckets are freed.
    Batch mine = rank_slice(global_batch(0, n * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
    model.loss(mine.inputs, mine.targets).backward();
    zero.step();
    zero.zero_grad();
    const ZeroMemory m = zero.memory();
    const Formula f = zero_formula(stage, psi, n);
    const std::string where = "stage " + std::to_string(stage) + " N=" + std::to_string(n);
    // Padding adds fewer than N elements per bucket; everything else is exact up to Adam's
    // int64 step counter per piece.
    EXPECT_LT(m.padding_elements, static_cast<int64_t>(zero.bucket_bytes().size()) * n) << where;
    EXPECT_NEAR(static_cast<double>(m.parameters), f.params, 0.05 * f.params) << where;
    EXPECT_NEAR(static_cast<double>(m.gradients), f.grads, 0.05 * f.grads) << where;
    EXPECT_NEAR(static_cast<double>(m.master + m.optimizer_state), f.states, 0.05 * f.states) << where;
    EXPECT_NEAR(static_cast<double>(m.total()), f.total(), 0.05 * f.total()) << where;
    EXPECT_NEAR(static_cast<double>(m.master), f.states / 3, 0.05 * f.states / 3) << where;
  }
}

// float32 parameters need no separate master copy: the shard is the master.
TEST(ZeroMemory, Float32ParametersAreTheirOwnMaster) {
  auto& world = dist::world();
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptimizer zero(model, optim::AdamWOptions{}, world, zero_options(2));
  // A step creates state only for parameters with a gradient: one backward first.
  Batch mine = rank_slice(global_batch(0, world.size() * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
  model.loss(mine.inputs, mine.targets).backward();
  zero.step();
  EXPECT_EQ(zero.memory().master, 0);
  EXPECT_GT(zero.memory().optimizer_state, 0);
}

// A bf16-parameter model that computes in float32 (the CPU ops compute in float32/64 only):
// every parameter is converted at use, so its gradient arrives in bf16.
class CastMLP : public nn::Module {
 public:
  CastMLP() {
    Generator gen(5);
    w1 = register_parameter("w1", mul(randn({16, 8}, {}, &gen), 0.3).to(DType::BFloat16));
    b1 = register_parameter("b1", zeros({16}).to(DType::BFloat16));
    w2 = register_parameter("w2", mul(randn({4, 16}, {}, &gen), 0.3).to(DType::BFloat16));
  }
  Tensor forward(const Tensor& x) {
    auto hooks = forward_hooks();
    Tensor h = gelu(linear(x, w1.to(DType::Float32), b1.to(DType::Float32)));
    return hooks.output(linear(h, w2.to(DType::Float32)));
  }
  Tensor w1, b1, w2;
};

StateDict train_mixed(int stage, double* first_loss, double* last_loss) {
  auto& world = dist::world();
  CastMLP model;
  ZeroOptimizer zero(model, optim::AdamWOptions{.lr = 1e-2}, world, zero_options(stage));
  for (int s = 0; s < 20; ++s) {
    Generator gen(100 + static_cast<uint64_t>(s), static_cast<uint64_t>(world.rank()));
    Tensor x = randn({4, 8}, {}, &gen);
    Tensor target = mul(x.narrow(1, 0, 4), 0.5);
    Tensor diff = sub(model.forward(x), target);
    Tensor loss = mean(mul(diff, diff));
    Tensor global = loss.detach().clone();
    world.all_reduce(global, dist::ReduceOp::Avg)->wait();
    if (s == 0) *first_loss = global.item();
    *last_loss = global.item();
    loss.backward();
    zero.clip_grad_norm(1.0);
    zero.step();
    zero.zero_grad();
  }
  return zero.full_parameters();
}

TEST(ZeroMixedPrecision, Bf16ParametersTrainAlikeAtEveryStage) {
  double first0 = 0, last0 = 0;
  StateDict ref = train_mixed(0, &first0, &last0);
  EXPECT_LT(last0, 0.7 * first0) << "stage 0 did not train";
  EXPECT_EQ(ref.at("w1").dtype(), DType::BFloat16);
  for (int stage : {1, 2, 3}) {
    double first = 0, last = 0;
    StateDict got = train_mixed(stage, &first, &last);
    // The fp32 master updates are identical up to the rounding of the reduction; a bf16
    // parameter can then round to the neighbouring value (2^-8 relative).
    EXPECT_LE(max_relative_difference(got, ref), 1e-2) << "stage " << stage;
    EXPECT_NEAR(last, last0, 1e-2 * last0) << "stage " << stage;
  }
}

}  // namespace
}  // namespace strata::test
