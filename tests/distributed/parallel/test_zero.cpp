// ZeroOptimizer under mpirun -np N (1-4): stages 1, 2 and 3 train like stage 0 (DDP), which
// trains like DistributedDataParallel with a plain optimizer, and every stage like one process
// on the whole global batch; for the tiny GPT and the tiny Llama.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "distributed/zero_test_util.h"
#include "float32_bound.h"

namespace strata::test {
namespace {

constexpr double kClip = 0.05;  // below the tiny GPT's gradient norm: clipping is active

// Bytes a ring implementation moves per rank for the ops in `stats` on a group of n ranks:
// all_reduce 2(n-1)/n x its bytes, reduce_scatter (n-1)/n x its input, all_gather (n-1) x its
// contribution, broadcast its bytes. Stages 1-2 move what DDP moves; stage 3 1.5x.
// (`flag_bytes` of all_reduce, the per-parameter gradient flags, left out.)
double ring_wire_bytes(const dist::CommStats& stats, int n, uint64_t flag_bytes = 0) {
  auto bytes = [&](dist::OpType op) {
    auto it = stats.find(op);
    return it == stats.end() ? 0.0 : static_cast<double>(it->second.bytes);
  };
  const double f = static_cast<double>(n - 1) / n;
  return 2 * f * (bytes(dist::OpType::AllReduce) - static_cast<double>(flag_bytes)) +
         f * bytes(dist::OpType::ReduceScatter) + (n - 1) * bytes(dist::OpType::AllGather) +
         bytes(dist::OpType::Broadcast);
}

// The equivalence tests run on each model family (GPT, Llama).
class ZeroEquivalence : public ::testing::TestWithParam<Family> {};
INSTANTIATE_TEST_SUITE_P(Models, ZeroEquivalence, ::testing::Values(Family::GPT, Family::Llama), family_name);

// The largest relative difference of a step's gradient norm.
double norm_difference(const ZeroRun& a, const ZeroRun& b) {
  EXPECT_EQ(a.norms.size(), b.norms.size());
  double worst = 0;
  for (size_t s = 0; s < a.norms.size() && s < b.norms.size(); ++s)
    worst = std::max(worst, std::fabs(a.norms[s] - b.norms[s]) / b.norms[s]);
  return worst;
}

std::string label(Family f, const std::string& what) {
  return std::string(f == Family::GPT ? "GPT " : "Llama ") + what + " N=" + std::to_string(dist::world().size());
}
bool lead() { return dist::world().rank() == 0; }

// Float32 with SGD (momentum, weight decay) and clipping by the global norm, within the bound
// derived from stage 0's own float32 error against its float64 run (float32_bound.h).
TEST_P(ZeroEquivalence, StagesMatchStageZeroFloat32WithSgdAndClipping) {
  const int n = dist::world().size();
  ZeroRun ref = train_zero(GetParam(), 0, DType::Float32, sgd(), kClip);
  const ZeroRun exact = train_zero(GetParam(), 0, DType::Float64, sgd(), kClip);
  const double own = max_relative_difference(ref.params, exact.params), own_norm = norm_difference(ref, exact);
  for (double norm : ref.norms) EXPECT_GT(norm, kClip) << "clipping must be active";
  for (int stage : {1, 2, 3}) {
    ZeroRun run = train_zero(GetParam(), stage, DType::Float32, sgd(), kClip);
    bool bitwise = false;
    const double diff = max_relative_difference(run.params, ref.params, &bitwise);
    const std::string what = "float32 SGD + clipping, stage " + std::to_string(stage) + " vs 0";
    EXPECT_TRUE(within_float32_bound(diff, own, label(GetParam(), what), lead()));
    if (n == 1) {
      EXPECT_TRUE(bitwise) << "stage " << stage << ": one rank must match stage 0 bit for bit";
    }
    EXPECT_TRUE(within_float32_bound(norm_difference(run, ref), own_norm, label(GetParam(), what + " norms"), lead()));
  }
}

// AdamW: float64 shows the computation is the same; float32 carries the rounding noise that
// AdamW turns into steps of ~lr on near-zero gradients (see docs/parallelism.md, DDP), so its
// per-tensor L2 bound derives from stage 0's own float32 error, that noise included.
TEST_P(ZeroEquivalence, StagesMatchStageZeroWithAdamW) {
  ZeroRun ref64 = train_zero(GetParam(), 0, DType::Float64, adamw(), kClip);
  ZeroRun ref32 = train_zero(GetParam(), 0, DType::Float32, adamw(), 0);
  const ZeroRun exact = train_zero(GetParam(), 0, DType::Float64, adamw(), 0);
  const double own = max_relative_difference(ref32.params, exact.params);
  for (int stage : {1, 2, 3}) {
    const double d64 =
        max_relative_difference(train_zero(GetParam(), stage, DType::Float64, adamw(), kClip).params, ref64.params);
    const double d32 =
        max_relative_difference(train_zero(GetParam(), stage, DType::Float32, adamw(), 0).params, ref32.params);
    EXPECT_LE(d64, 1e-10) << "stage " << stage;
    EXPECT_TRUE(
        within_float32_bound(d32, own, label(GetParam(), "AdamW stage " + std::to_string(stage) + " vs 0"), lead()));
    if (dist::world().rank() == 0)
      std::printf("AdamW stage %d vs 0, N=%d: float64 %.3g, float32 %.3g\n", stage, dist::world().size(), d64, d32);
  }
}

// Every stage against one process that trains on the whole global batch without ZeRO, with
// the bounds above: float64 AdamW + clipping 1e-10, float32 SGD + clipping derived from the
// one process's own float32 error.
TEST_P(ZeroEquivalence, EveryStageMatchesOneProcess) {
  const int n = dist::world().size();
  const ZeroRun ref64 = train_one_process(GetParam(), DType::Float64, adamw(), kClip);
  const ZeroRun ref32 = train_one_process(GetParam(), DType::Float32, sgd(), kClip);
  const double own =
      max_relative_difference(ref32.params, train_one_process(GetParam(), DType::Float64, sgd(), kClip).params);
  for (int stage : {0, 1, 2, 3}) {
    const ZeroRun run64 = train_zero(GetParam(), stage, DType::Float64, adamw(), kClip);
    const double d64 = max_relative_difference(run64.params, ref64.params);
    const double d32 =
        max_relative_difference(train_zero(GetParam(), stage, DType::Float32, sgd(), kClip).params, ref32.params);
    EXPECT_LE(d64, 1e-10) << "stage " << stage << " N=" << n;
    const std::string what = "SGD stage " + std::to_string(stage) + " vs one process";
    EXPECT_TRUE(within_float32_bound(d32, own, label(GetParam(), what), lead()));
    ASSERT_EQ(run64.norms.size(), ref64.norms.size());
    for (size_t s = 0; s < ref64.norms.size(); ++s) EXPECT_NEAR(run64.norms[s], ref64.norms[s], 1e-10 * ref64.norms[s]);
    if (dist::world().rank() == 0)
      std::printf("stage %d vs one process, N=%d: float64 AdamW %.3g, float32 SGD %.3g\n", stage, n, d64, d32);
  }
}

// Stage 3's default units are the model's transformer blocks (nn::TransformerBlock: GPT's
// Block, LlamaDecoderLayer), one unit each, plus the root unit with the other parameters.
TEST_P(ZeroEquivalence, StageThreeUnitsAreTheTransformerBlocks) {
  auto model = tiny_model(GetParam(), DType::Float32);
  std::vector<std::string> blocks;
  for (auto& [name, module] : model->named_modules())
    if (dynamic_cast<nn::TransformerBlock*>(module) != nullptr) blocks.push_back(name + ".");
  ASSERT_EQ(static_cast<int64_t>(blocks.size()), model->num_layers());
  const ZeroRun run = train_zero(GetParam(), 3, DType::Float32, sgd(), 0, 1);
  ASSERT_EQ(run.buckets.size(), blocks.size() + 1);
  for (const auto& unit : run.buckets) {
    ASSERT_FALSE(unit.empty());
    // The block whose prefix the unit's first name has (none: the root unit); every name shares it.
    std::string prefix;
    for (const std::string& b : blocks)
      if (unit[0].rfind(b, 0) == 0) prefix = b;
    for (const std::string& name : unit) {
      bool in_a_block = false;
      for (const std::string& b : blocks) in_a_block = in_a_block || name.rfind(b, 0) == 0;
      EXPECT_TRUE(prefix.empty() ? !in_a_block : name.rfind(prefix, 0) == 0) << name << " in the unit of " << unit[0];
    }
  }
}

// Stage 0 is DDP: the same as DistributedDataParallel + optim::SGD + optim::clip_grad_norm.
TEST_P(ZeroEquivalence, StageZeroMatchesDistributedDataParallel) {
  auto& world = dist::world();
  auto model = tiny_model(GetParam(), DType::Float32);
  DistributedDataParallel ddp(*model, world);
  optim::SGD opt(model->parameters(), sgd());
  for (int s = 0; s < kZeroSteps; ++s) {
    Batch mine = rank_slice(global_batch(s, world.size() * kZeroPerRank, *model), world.rank(), kZeroPerRank);
    model->loss(mine.inputs, mine.targets).backward();
    optim::clip_grad_norm(model->parameters(), kClip);
    opt.step();
    opt.zero_grad();
  }
  StateDict ddp_params;
  for (auto& [name, t] : model->named_parameters()) ddp_params[name] = t.detach().clone();
  // Other buckets: each element is reduced over the ranks in another order.
  const ZeroRun stage0 = train_zero(GetParam(), 0, DType::Float32, sgd(), kClip);
  const ZeroRun exact = train_zero(GetParam(), 0, DType::Float64, sgd(), kClip);
  const double own = max_relative_difference(stage0.params, exact.params);
  EXPECT_TRUE(within_float32_bound(max_relative_difference(ddp_params, stage0.params), own,
                                   label(GetParam(), "stage 0 vs DDP"), lead()));
}

// Communication per step, from the process-group counters: stage 0 all-reduces every
// (padded) gradient bucket; stages 1 and 2 reduce-scatter them and all-gather the updated
// shards, the same ring bytes; stage 3 gathers every unit twice (forward and backward), 1.5x.
// Every stage adds one all_reduce of an int64 flag per parameter (did any rank have a
// gradient for it), left out of the ring comparison.
TEST(Zero, CommunicationVolume) {
  auto& world = dist::world();
  const int n = world.size();
  double ddp_wire = 0;
  double ddp_padded = 0;
  for (int stage : {0, 1, 2, 3}) {
    nn::GPT model(tiny_gpt(DType::Float32));
    ZeroOptimizer zero(model, sgd(), world, zero_options(stage));
    uint64_t padded = 0;
    for (int64_t b : zero.bucket_bytes()) padded += static_cast<uint64_t>(b);
    uint64_t used = 0;
    for (const Tensor& p : model.parameters()) used += p.numel() * 4;
    EXPECT_LE(padded - used, zero.bucket_bytes().size() * (n - 1) * 4) << "padding below N elements per bucket";
    const uint64_t buckets = zero.bucket_bytes().size();
    const uint64_t flag_bytes = model.parameters().size() * sizeof(int64_t);
    for (int s = 0; s < 2; ++s) {
      Batch mine = rank_slice(global_batch(s, n * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
      world.reset_stats();
      model.loss(mine.inputs, mine.targets).backward();
      zero.step();
      zero.zero_grad();
      auto st = world.stats();
      const std::string where = "stage " + std::to_string(stage) + " step " + std::to_string(s);
      if (stage == 0) {
        EXPECT_EQ(st[dist::OpType::AllReduce].calls, buckets + 1) << where;
        EXPECT_EQ(st[dist::OpType::AllReduce].bytes, padded + flag_bytes) << where;
        EXPECT_EQ(st[dist::OpType::AllGather].calls, 0u) << where;
        ddp_wire = ring_wire_bytes(st, n, flag_bytes);
        ddp_padded = static_cast<double>(padded);
      } else {
        EXPECT_EQ(st[dist::OpType::AllReduce].calls, 1u) << where;
        EXPECT_EQ(st[dist::OpType::AllReduce].bytes, flag_bytes) << where;
        EXPECT_EQ(st[dist::OpType::ReduceScatter].calls, buckets) << where;
        EXPECT_EQ(st[dist::OpType::ReduceScatter].bytes, padded) << where;
        const uint64_t gathers = stage == 3 ? 2 : 1;
        EXPECT_EQ(st[dist::OpType::AllGather].calls, gathers * buckets) << where;
        EXPECT_EQ(st[dist::OpType::AllGather].bytes, gathers * padded / n) << where;
        // Exactly 1x / 1.5x of what DDP moves for this stage's buckets; against DDP's own
        // buckets (stage 3's units pad differently) within the padding.
        const double factor = stage == 3 ? 1.5 : 1.0;
        const double f = static_cast<double>(n - 1) / n;
        EXPECT_NEAR(ring_wire_bytes(st, n, flag_bytes), factor * 2 * f * static_cast<double>(padded), 1e-6) << where;
        if (n > 1) {
          const double padding_tolerance = factor * std::abs(static_cast<double>(padded) - ddp_padded) / ddp_padded;
          EXPECT_NEAR(ring_wire_bytes(st, n, flag_bytes) / ddp_wire, factor, padding_tolerance + 1e-12) << where;
        }
      }
      for (auto op : {dist::OpType::Broadcast, dist::OpType::AllToAll, dist::OpType::Send, dist::OpType::Recv,
                      dist::OpType::Barrier})
        EXPECT_EQ(st[op].calls, 0u) << where;
    }
  }
}

// Stage 3 keeps only the shard between uses: reading a parameter outside forward/backward is
// an error naming the cause, and gathered_parameters() makes them readable.
TEST(Zero, StageThreeFreesParametersBetweenUses) {
  auto& world = dist::world();
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptimizer zero(model, sgd(), world, zero_options(3));
  Tensor w = model.block(0).attn->c_attn->weight;
  EXPECT_NE(error_of([&] { (void)w.to_vector<float>(); }).find("released"), std::string::npos);
  {
    auto guard = zero.gathered_parameters();
    EXPECT_EQ(w.to_vector<float>().size(), static_cast<size_t>(w.numel()));
  }
  Batch mine = rank_slice(global_batch(0, world.size() * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
  model.loss(mine.inputs, mine.targets).backward();
  EXPECT_NE(error_of([&] { (void)w.to_vector<float>(); }).find("released"), std::string::npos);
  // Evaluation without a graph gathers and frees unit by unit too.
  NoGradGuard no_grad;
  Tensor logits = model.forward(mine.inputs);
  EXPECT_EQ(logits.size(2), model.config().vocab_size);
}

}  // namespace
}  // namespace strata::test
