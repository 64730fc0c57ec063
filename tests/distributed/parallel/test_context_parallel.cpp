// Context-parallel attention over the whole world as the CP group (1, 2 or 4 ranks): ring and
// all-gather variants against one process's causal attention over the whole sequence, in
// float64 (forward and every gradient), with exact counts of ring steps, bytes and saved
// activations; the split's bad input.
#include <cmath>
#include <string>
#include <tuple>

#include "distributed/dist_test_util.h"
#include "distributed/model_equivalence_util.h"
#include "strata/parallel/pipeline.h"
#include "strata/strata.h"

namespace strata {
namespace {

using parallel::ContextParallelAttention;
using test::error_of;

Tensor input64(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {.dtype = DType::Float64}, &g);
}

// |got - want| <= 1e-12 * max(|want|, 1) elementwise: float64 rounding of a few dozen
// operations per element (the sums run over at most T = 40 keys).
void expect_close64(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  double worst = 0, scale = 1.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  EXPECT_LE(worst, 1e-12 * scale) << what;
}

struct Case {
  int64_t batch, heads, kv_heads, chunk, dim;
};

// One process's attention and gradients over the whole sequence, and this rank's share of the
// context-parallel computation of the same, compared.
void check_against_one_process(const Case& c, ContextParallelAttention variant, dist::ProcessGroup& cp) {
  const int64_t T = 2 * c.chunk * cp.size();
  const Tensor q = input64({c.batch, c.heads, T, c.dim}, 1), k = input64({c.batch, c.kv_heads, T, c.dim}, 2),
               v = input64({c.batch, c.kv_heads, T, c.dim}, 3), w = input64({c.batch, c.heads, T, c.dim}, 4);
  Tensor qf = q.clone().set_requires_grad(true), kf = k.clone().set_requires_grad(true),
         vf = v.clone().set_requires_grad(true);
  Tensor want = attention(qf, kf, vf, {.causal = true});
  sum(mul(want, w)).backward();

  const parallel::ContextParallelSplit split = parallel::context_parallel_split(T, cp);
  auto local = [&](const Tensor& x) { return parallel::take_local_sequence(x, 2, split); };
  Tensor ql = local(q).set_requires_grad(true), kl = local(k).set_requires_grad(true),
         vl = local(v).set_requires_grad(true);
  Tensor got = parallel::context_parallel_attention(ql, kl, vl, cp, {.variant = variant});
  sum(mul(got, local(w))).backward();
  const std::string what = "T " + std::to_string(T) + " heads " + std::to_string(c.heads) + "/" +
                           std::to_string(c.kv_heads) +
                           (variant == ContextParallelAttention::Ring ? " ring" : " gather");
  expect_close64(got, local(want.detach()), "output, " + what);
  expect_close64(ql.grad(), local(qf.grad()), "dq, " + what);
  expect_close64(kl.grad(), local(kf.grad()), "dk, " + what);
  expect_close64(vl.grad(), local(vf.grad()), "dv, " + what);
}

// A sequence of 24 tokens: chunks of 6 at CP 2 and of 3 at CP 4.
constexpr int64_t kCpSeq = 24;

// The model, or with `part` a pipeline stage of it.
std::unique_ptr<nn::CausalLM> cp_model(Family f, DType dtype,
                                       const std::shared_ptr<nn::LayerFactory>& factory = nullptr,
                                       nn::ModelPart part = {}) {
  if (f == Family::Gpt) {
    nn::GPTConfig c = gpt_config(dtype);
    c.context = kCpSeq;
    return std::make_unique<nn::GPT>(c, factory, std::move(part));
  }
  nn::LlamaConfig c = llama_config(dtype);
  c.context = kCpSeq;
  return std::make_unique<nn::Llama>(c, factory, std::move(part));
}

// Step s's batch; row r ignores the targets at two positions that move with s and r, so the
// ranks of a split hold different counts of targets.
std::pair<Tensor, Tensor> cp_batch(int s, int64_t rows) {
  Generator gen(77, static_cast<uint64_t>(s) * 131);
  Tensor tokens = randint(0, kVocab, {rows, kCpSeq}, {.dtype = DType::Int64}, &gen);
  Tensor targets = randint(0, kVocab, {rows, kCpSeq}, {.dtype = DType::Int64}, &gen);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j : {(5 * s + 3 * r) % kCpSeq, (7 * s + r + 11) % kCpSeq})
      targets.data<int64_t>()[r * kCpSeq + j] = -100;
  return {tokens, targets};
}

// One process on the whole global batch of `rows` sequences: losses, final weights and the
// entries whose gradient is at rounding-noise level (model_equivalence_util.h).
Reference train_one_process(Family f, int64_t rows, DType dtype = DType::Float64) {
  return train_model(*cp_model(f, dtype), rows, cp_batch);
}

// Float64: the algorithm itself, 1e-12 relative (the bound; a few dozen float64
// roundings per value, grown by 5 AdamW steps). Float32: derived from one process's own
// float32 error against its float64 run (float32_bound.h): the weights' and the losses'.
struct Bounds {
  double weights = 1e-12, loss = 1e-12;
};
Bounds bounds_for(Family f, int64_t rows, DType dtype) {
  if (dtype == DType::Float64) return {};
  const Reference r32 = train_one_process(f, rows, DType::Float32), r64 = train_one_process(f, rows);
  std::string where;
  double loss_error = 0;
  for (size_t s = 0; s < r64.losses.size(); ++s)
    loss_error = std::max(loss_error, std::fabs(r32.losses[s] - r64.losses[s]) / std::fabs(r64.losses[s]));
  return {.weights = test::float32_bound(
              worst_difference(r32.weights, {.weights = r64.weights, .noise = r32.noise}, DType::Float32, where)),
          .loss = test::float32_bound(loss_error)};
}

// A layout of the world: pipeline x data x context x tensor, gradients reduced over data x
// context by DDP (zero_stage < 0) or ZeroOptimizer; with pp > 1 a 1F1B pipeline of two
// micro-batches (one sequence each).
struct Layout {
  int pp = 1, dp = 1, cp = 1, tp = 1;
  bool sequence_parallel = false;
  int zero_stage = -1;
  DType dtype = DType::Float64;
};

std::string describe(Family f, const Layout& l) {
  return std::string(name_of(f)) + " pp=" + std::to_string(l.pp) + " dp=" + std::to_string(l.dp) +
         " cp=" + std::to_string(l.cp) + " tp=" + std::to_string(l.tp) + (l.sequence_parallel ? " +sp" : "") +
         (l.zero_stage < 0 ? " ddp" : " zero-" + std::to_string(l.zero_stage)) +
         (l.dtype == DType::Float32 ? " float32" : "");
}

// 5 AdamW steps in `layout` on the global batch of 2 * dp sequences: each data rank takes 2,
// each context rank its chunks of them. Returns the worst relative difference of the final
// weights (this stage's, with pp > 1) from one process's; checks every step's loss on the way.
double train_in_layout(Family f, const Layout& l, const Reference& ref, const Bounds& bound = {}) {
  auto& world = dist::world();
  dist::DeviceMesh mesh(world, {.pp = l.pp, .dp = l.dp, .tp = l.tp, .cp = l.cp});
  auto& tpg = mesh.group(dist::MeshDim::Tensor);
  auto& ppg = mesh.group(dist::MeshDim::Pipeline);
  std::shared_ptr<nn::LayerFactory> factory;
  if (l.tp > 1)
    factory =
        std::make_shared<parallel::TensorParallelFactory>(tpg, parallel::TensorParallelOptions{l.sequence_parallel});
  const auto partition = parallel::balanced_partition(counts_of(f), kLayers, l.pp);
  auto model =
      cp_model(f, l.dtype, factory, l.pp > 1 ? parallel::stage_part(partition, l.pp, ppg.rank()) : nn::ModelPart{});
  auto cp = std::make_shared<parallel::ContextParallel>(mesh.group(dist::MeshDim::Context));
  model->set_context_split(cp);
  auto& replicas = mesh.group(dist::MeshDim::DataContext);
  std::unique_ptr<parallel::DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> opt;
  if (l.zero_stage < 0) {
    ddp = std::make_unique<parallel::DistributedDataParallel>(*model, replicas);
    opt = std::make_unique<optim::AdamW>(model->parameters(), adamw());
  } else {
    opt = std::make_unique<parallel::ZeroOptimizer>(
        *model, adamw(), replicas, parallel::ZeroOptions{.stage = l.zero_stage, .master_dtype = l.dtype});
  }
  std::unique_ptr<parallel::Pipeline> pipe;
  if (l.pp > 1)
    pipe = std::make_unique<parallel::Pipeline>(
        *model, ppg, partition,
        parallel::PipelineOptions{
            .micro_batches = 2, .ddp = ddp.get(), .zero = dynamic_cast<parallel::ZeroOptimizer*>(opt.get())});
  auto& dp = mesh.group(dist::MeshDim::Data);
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = cp_batch(s, 2 * l.dp);
    Tensor lx = cp->local(x.narrow(0, 2 * dp.rank(), 2).contiguous(), 1).contiguous();
    Tensor ly = cp->local(y.narrow(0, 2 * dp.rank(), 2).contiguous(), 1).contiguous();
    opt->zero_grad();
    Tensor mean;
    if (pipe) {
      mean = full({1}, pipe->train_step(lx, ly), {.dtype = DType::Float64});
    } else {
      Tensor loss = model->loss(lx, ly);
      loss.backward();
      mean = loss.detach().to(DType::Float64).reshape({1});
    }
    opt->step();
    // Every data slice counts as many targets: the mean of their means is the global mean.
    dp.all_reduce(mean, dist::ReduceOp::Avg)->wait();
    const double want = ref.losses[static_cast<size_t>(s)];
    EXPECT_LE(std::fabs(mean.item() - want), bound.loss * std::fabs(want)) << describe(f, l) << " step " << s;
  }
  StateDict got;
  {
    std::optional<parallel::ZeroOptimizer::GatheredParameters> gathered;
    if (l.zero_stage >= 0) gathered.emplace(dynamic_cast<parallel::ZeroOptimizer&>(*opt));
    got = parallel::full_state_dict(*model, tpg);
  }
  std::string where;
  const double worst = worst_difference(got, ref, l.dtype, where);
  EXPECT_LE(worst, bound.weights) << describe(f, l) << ": " << where;
  return worst;
}

}  // namespace

// GPT (learned positions) and Llama (rotary, grouped-query heads) split over the world, DDP
// averaging their gradients over it: every step's loss and the weights after 5 AdamW steps
// equal one process on the whole sequence (float64, 1e-12), at CP = world size.
TEST(ContextParallel, GptAndLlamaTrainAsOneProcess) {
  auto& world = dist::world();
  if (world.size() > 4) GTEST_SKIP() << "24 positions split over at most 4 ranks (chunks of 3)";
  for (Family f : {Family::Gpt, Family::Llama}) train_in_layout(f, {.cp = world.size()}, train_one_process(f, 2));
}

// Float32 at CP = world size: within the bound derived from one process's own float32 error.
TEST(ContextParallel, Float32TrainsAsOneProcessWithinTheDerivedBound) {
  auto& world = dist::world();
  if (world.size() > 4) GTEST_SKIP() << "24 positions split over at most 4 ranks (chunks of 3)";
  for (Family f : {Family::Gpt, Family::Llama}) {
    const Layout l{.cp = world.size(), .dtype = DType::Float32};
    const double worst =
        train_in_layout(f, l, train_one_process(f, 2, DType::Float32), bounds_for(f, 2, DType::Float32));
    if (world.rank() == 0) std::printf("%s: float32 worst weight difference %.3g\n", describe(f, l).c_str(), worst);
  }
}

// A pipeline of 2 stages whose sequences are split over 2 context ranks (the stages' ring
// attention and the last stage's loss over the whole sequences) on 4 ranks, and beside 2 data
// ranks under ZeRO-1 on 8.
TEST(ContextParallel, ComposesWithPipelineParallelism) {
  auto& world = dist::world();
  if (world.size() != 4 && world.size() != 8) GTEST_SKIP() << "needs 4 or 8 ranks";
  const int dp = world.size() / 4;
  for (Family f : {Family::Gpt, Family::Llama})
    train_in_layout(f, {.pp = 2, .dp = dp, .cp = 2, .zero_stage = dp > 1 ? 1 : -1}, train_one_process(f, 2 * dp));
}

// ZeRO 1-3 over data x context on 4 ranks (dp=2 x cp=2), and data x context x tensor
// (+ sequence parallelism) on 8.
TEST(ContextParallel, ComposesWithDataTensorParallelismAndZero) {
  auto& world = dist::world();
  if (world.size() == 4) {
    for (Family f : {Family::Gpt, Family::Llama}) {
      const Reference ref = train_one_process(f, 4);
      for (int stage : {1, 2, 3}) train_in_layout(f, {.dp = 2, .cp = 2, .zero_stage = stage}, ref);
    }
  } else if (world.size() == 8) {
    for (Family f : {Family::Gpt, Family::Llama}) {
      const Reference ref = train_one_process(f, 4);
      train_in_layout(f, {.dp = 2, .cp = 2, .tp = 2}, ref);
      train_in_layout(f, {.dp = 2, .cp = 2, .tp = 2, .sequence_parallel = true, .zero_stage = 3}, ref);
    }
  } else {
    GTEST_SKIP() << "needs 4 or 8 ranks";
  }
}

// Generation with a KV cache refuses a split model, naming what to do.
TEST(ContextParallel, KvCacheGenerationIsRefused) {
  auto& world = dist::world();
  if (world.size() == 1) GTEST_SKIP() << "a split over one rank generates as one process";
  auto model = cp_model(Family::Llama, DType::Float64);
  model->set_context_split(std::make_shared<parallel::ContextParallel>(world));
  nn::KVCache cache = model->make_cache();
  Tensor tokens = zeros({1, 2}, {.dtype = DType::Int64});
  test::expect_contains(error_of([&] { model->forward(tokens, &cache); }),
                        "generation with a KV cache runs without context parallelism");
}

// Sequence lengths 2*CP*chunk with chunks of 3 and 5 tokens (never a power of two), multi-head,
// grouped-query and multi-query heads.
TEST(ContextParallel, EqualsOneProcessInFloat64) {
  auto& cp = dist::world();
  for (const Case& c : {Case{2, 4, 4, 3, 8}, Case{1, 4, 2, 5, 6}, Case{2, 3, 1, 3, 4}})
    for (auto variant : {ContextParallelAttention::Ring, ContextParallelAttention::AllGather})
      check_against_one_process(c, variant, cp);
}

// Rank r holds chunks r and 2*CP-1-r; the positions and the split tokens agree.
TEST(ContextParallel, LoadBalancedSplit) {
  auto& cp = dist::world();
  const int n = cp.size(), r = cp.rank();
  const auto split = parallel::context_parallel_split(6 * n, cp);
  EXPECT_EQ(split.chunk(), 3);
  const std::vector<int64_t> positions = parallel::local_positions(split);
  ASSERT_EQ(positions.size(), 6u);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(positions[static_cast<size_t>(i)], 3 * r + i);
    EXPECT_EQ(positions[static_cast<size_t>(3 + i)], 3 * (2 * n - 1 - r) + i);
  }
  std::vector<double> tokens(static_cast<size_t>(6 * n));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<double>(i);
  const Tensor x = from_vector(tokens, {1, 6 * n});
  std::vector<double> got = parallel::take_local_sequence(x, 1, split).to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], static_cast<double>(positions[i]));
}

// Ring steps, bytes and block products per call, and the bytes kept for backward, exactly.
TEST(ContextParallel, CommunicationAndMemoryAccounting) {
  auto& cp = dist::world();
  const int64_t n = cp.size();
  const int64_t B = 2, H = 4, Hkv = 2, c = 3, D = 8, L = 2 * c;
  const int64_t kv_bytes = 2 * B * Hkv * L * D * 8;  // float64
  for (auto variant : {ContextParallelAttention::Ring, ContextParallelAttention::AllGather}) {
    const bool ring = variant == ContextParallelAttention::Ring;
    Tensor q = input64({B, H, L, D}, 5).set_requires_grad(true);
    Tensor k = input64({B, Hkv, L, D}, 6).set_requires_grad(true);
    Tensor v = input64({B, Hkv, L, D}, 7).set_requires_grad(true);
    parallel::reset_context_parallel_stats();
    cp.reset_stats();
    Tensor out = parallel::context_parallel_attention(q, k, v, cp, {.variant = variant});
    auto fwd = parallel::context_parallel_stats();
    // The causal pairs of (query chunk, key chunk) over the whole sequence: 2n(2n+1)/2, shared
    // equally: each rank computes 2n + 1 (the load balance the split exists for).
    EXPECT_EQ(fwd.block_products, 2 * n + 1);
    EXPECT_EQ(fwd.ring_steps, ring || n == 1 ? n : 0);
    EXPECT_EQ(fwd.bytes_sent, n == 1 ? 0 : ring ? (n - 1) * kv_bytes : kv_bytes);
    // Queries and output [B, H, L, D], the log-sum-exp [B, H, L], keys and values: all 1/CP of
    // the unsplit sequence's.
    EXPECT_EQ(fwd.saved_bytes, (B * H * L * (2 * D + 1)) * 8 + kv_bytes);
    sum(out).backward();
    auto all = parallel::context_parallel_stats();
    EXPECT_EQ(all.forward_calls, 1);
    EXPECT_EQ(all.backward_calls, 1);
    EXPECT_EQ(all.block_products, 2 * (2 * n + 1));
    const int64_t backward_bytes = n == 1 ? 0 : ring ? (n - 1) * kv_bytes + n * kv_bytes : kv_bytes + n * kv_bytes;
    EXPECT_EQ(all.bytes_sent - fwd.bytes_sent, backward_bytes);
    // The group counted the same bytes: sends for the ring, all_gather + reduce_scatter otherwise.
    uint64_t group_bytes = 0;
    for (const auto& [op, counter] : cp.stats())
      if (op != dist::OpType::Recv) group_bytes += counter.bytes;
    EXPECT_EQ(static_cast<int64_t>(group_bytes), all.bytes_sent);
  }
}

// 16-bit inputs: the float32 computation rounded once to the input dtype.
TEST(ContextParallel, SixteenBitInputsAreTheFloat32ResultRounded) {
  auto& cp = dist::world();
  const int64_t L = 4;
  Tensor q = input64({1, 2, L, 8}, 8).to(DType::BFloat16), k = input64({1, 2, L, 8}, 9).to(DType::BFloat16),
         v = input64({1, 2, L, 8}, 10).to(DType::BFloat16);
  Tensor got = parallel::context_parallel_attention(q, k, v, cp);
  Tensor want =
      parallel::context_parallel_attention(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32), cp)
          .to(DType::BFloat16);
  EXPECT_EQ(got.dtype(), DType::BFloat16);
  EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());
}

TEST(ContextParallel, BadInputIsNamedBeforeAnyCollective) {
  auto& cp = dist::world();
  cp.reset_stats();
  const int n = cp.size();
  test::expect_contains(error_of([&] { parallel::context_parallel_split(2 * n + 1, cp); }),
                        "a sequence of " + std::to_string(2 * n + 1) + " tokens cannot be balanced over the " +
                            std::to_string(n) + " ranks");
  Tensor odd = input64({1, 2, 3, 4}, 11);  // 3 local tokens: not two equal chunks
  test::expect_contains(error_of([&] { parallel::context_parallel_attention(odd, odd, odd, cp); }),
                        "must split into 2 * CP = " + std::to_string(2 * n) + " equal chunks");
  Tensor q = input64({1, 3, 4, 4}, 12), k = input64({1, 2, 4, 4}, 13);
  test::expect_contains(error_of([&] { parallel::context_parallel_attention(q, k, k, cp); }),
                        "3 query heads do not group over 2 kv heads");
  for (const auto& [op, counter] : cp.stats()) EXPECT_EQ(counter.calls, 0u) << dist::op_type_name(op);
}

}  // namespace strata
