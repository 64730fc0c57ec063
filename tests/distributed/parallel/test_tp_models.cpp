// GPT and Llama built tensor-parallel (TP = world size, 2 or 4; and dp=2 x tp=2 with DDP and
// ZeRO-3 on 4 ranks) train exactly like one process on the same global batch: same initial
// weights by construction, 5 AdamW steps, float64 within 1e-11 (relative) and float32 within
// the bound derived from the reference's own float32 error (float32_bound.h), with and without
// sequence parallelism. Also the collectives each step issues on
// the TP group, counted per op.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "distributed/dist_test_util.h"
#include "distributed/model_equivalence_util.h"
#include "strata/parallel/tp_factory.h"
#include "strata/strata.h"

namespace strata {
namespace {

struct Case {
  Family family;
  DType dtype;
  bool sequence_parallel;
};

std::string describe(const Case& c) {
  return std::string(name_of(c.family)) + " " + std::string(dtype_name(c.dtype)) +
         (c.sequence_parallel ? " sequence-parallel" : "");
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (Family f : {Family::Gpt, Family::Llama})
    for (DType d : {DType::Float64, DType::Float32})
      for (bool sp : {false, true}) out.push_back({f, d, sp});
  return out;
}

}  // namespace

TEST(TensorParallelModels, TrainLikeOneProcess) {
  auto& world = dist::world();
  const int64_t rows = 2;
  for (const Case& c : all_cases()) {
    const Reference ref = train_single(c.family, c.dtype, rows);
    auto tp =
        std::make_shared<parallel::TensorParallelFactory>(world, parallel::TensorParallelOptions{c.sequence_parallel});
    auto model = build(c.family, c.dtype, tp);
    // Built with the same seed, the parts are the single-process weights, cut.
    std::string where;
    const Reference initial{.weights = build(c.family, c.dtype)->state_dict()};
    EXPECT_EQ(worst_difference(parallel::full_state_dict(*model, world), initial, DType::Float64, where), 0.0)
        << describe(c) << ": initial " << where;
    optim::AdamW opt(model->parameters(), adamw());
    for (int s = 0; s < kSteps; ++s) {
      auto [x, y] = batch(s, rows);
      opt.zero_grad();
      Tensor loss = model->loss(x, y);
      loss.backward();
      opt.step();
      const double want = ref.losses[static_cast<size_t>(s)];
      if (c.dtype == DType::Float64) {
        EXPECT_NEAR(loss.item(), want, tolerance(c.dtype) * 10) << describe(c) << " step " << s;
      } else {
        EXPECT_TRUE(test::within_float32_bound(std::fabs(loss.item() - want) / std::fabs(want),
                                               float32_training_error(c.family, rows).loss,
                                               describe(c) + " loss of step " + std::to_string(s), false));
      }
    }
    const double worst = worst_difference(parallel::full_state_dict(*model, world), ref, c.dtype, where);
    if (c.dtype == DType::Float64) {
      EXPECT_LE(worst, tolerance(c.dtype)) << describe(c) << ": " << where;
    } else {
      EXPECT_TRUE(test::within_float32_bound(worst, float32_training_error(c.family, rows).weights,
                                             "tp=" + std::to_string(world.size()) + " " + describe(c) + " " + where,
                                             world.rank() == 0));
    }
    if (world.rank() == 0)
      std::printf("tp=%d %s: worst relative difference %.2e (%s)\n", world.size(), describe(c).c_str(), worst,
                  where.c_str());
    // forward() gathers the full logits.
    NoGradGuard no_grad;
    EXPECT_EQ(model->forward(batch(0, rows).first).shape(), Shape({rows, kSeq, kVocab})) << describe(c);
  }
}

// dp=2 x tp=2 on 4 ranks: each data-parallel rank takes half the global batch; DDP or ZeRO-3
// over the data group, tensor parallelism over the tensor group.
TEST(TensorParallelModels, DataByTensorWithDdpAndZero3) {
  auto& world = dist::world();
  if (world.size() != 4) GTEST_SKIP() << "needs 4 ranks";
  dist::DeviceMesh mesh(world, {.dp = 2, .tp = 2});
  auto& dp = mesh.group(dist::MeshDim::Data);
  auto& tpg = mesh.group(dist::MeshDim::Tensor);
  const int64_t rows = 4, local_rows = 2;
  for (const Case& c : all_cases()) {
    for (bool zero : {false, true}) {
      const Reference ref = train_single(c.family, c.dtype, rows);
      auto tp =
          std::make_shared<parallel::TensorParallelFactory>(tpg, parallel::TensorParallelOptions{c.sequence_parallel});
      auto model = build(c.family, c.dtype, tp);
      std::unique_ptr<parallel::DistributedDataParallel> ddp;
      std::unique_ptr<optim::AdamW> opt;
      std::unique_ptr<parallel::ZeroOptimizer> zero_opt;
      if (zero) {
        zero_opt = std::make_unique<parallel::ZeroOptimizer>(
            *model, adamw(), dp, parallel::ZeroOptions{.stage = 3, .master_dtype = c.dtype});
      } else {
        ddp = std::make_unique<parallel::DistributedDataParallel>(*model, dp);
        opt = std::make_unique<optim::AdamW>(model->parameters(), adamw());
      }
      for (int s = 0; s < kSteps; ++s) {
        auto [x, y] = batch(s, rows);
        Tensor lx = x.narrow(0, local_rows * dp.rank(), local_rows).contiguous();
        Tensor ly = y.narrow(0, local_rows * dp.rank(), local_rows).contiguous();
        if (zero) zero_opt->zero_grad();
        else opt->zero_grad();
        model->loss(lx, ly).backward();
        if (zero) zero_opt->step();
        else opt->step();
      }
      std::string where;
      StateDict got;
      {
        // ZeRO-3 holds shards over dp: gather them (a no-op for DDP), then the TP parts.
        std::optional<parallel::ZeroOptimizer::GatheredParameters> gathered;
        if (zero) gathered.emplace(*zero_opt);
        got = parallel::full_state_dict(*model, tpg);
      }
      const double worst = worst_difference(got, ref, c.dtype, where);
      const std::string what = describe(c) + (zero ? " zero-3" : " ddp") + ": " + where;
      if (c.dtype == DType::Float64) {
        EXPECT_LE(worst, tolerance(c.dtype)) << what;
      } else {
        EXPECT_TRUE(test::within_float32_bound(worst, float32_training_error(c.family, rows).weights,
                                               "dp=2 x tp=2 " + what, world.rank() == 0));
      }
      if (world.rank() == 0)
        std::printf("dp=2 x tp=2 %s %s: worst relative difference %.2e (%s)\n", zero ? "zero-3" : "ddp",
                    describe(c).c_str(), worst, where.c_str());
    }
  }
}

// The collectives of one training step on the TP group, per op, and nothing else.
TEST(TensorParallelModels, OneStepIssuesExactlyTheExpectedCollectives) {
  auto& world = dist::world();
  for (const Case& c : all_cases()) {
    if (c.dtype != DType::Float32) continue;
    auto tp =
        std::make_shared<parallel::TensorParallelFactory>(world, parallel::TensorParallelOptions{c.sequence_parallel});
    auto model = build(c.family, c.dtype, tp);
    auto [x, y] = batch(0, 2);
    world.reset_stats();
    Tensor loss = model->loss(x, y);
    const dist::CommStats fwd = world.stats();
    world.reset_stats();
    loss.backward();
    const dist::CommStats bwd = world.stats();
    auto calls = [](const dist::CommStats& s, dist::OpType op) -> int64_t {
      auto it = s.find(op);
      return it == s.end() ? 0 : static_cast<int64_t>(it->second.calls);
    };
    auto total = [](const dist::CommStats& s) {
      int64_t n = 0;
      for (const auto& [op, k] : s) n += static_cast<int64_t>(k.calls);
      return n;
    };
    const int64_t L = kLayers;
    const int64_t loss_reductions = 3;  // row max, sum of exponentials, target logit
    if (!c.sequence_parallel) {
      // Forward: the embedding's all-reduce, one after attention and one after the MLP per
      // block, the loss's three. Backward: one per block region entered (attention, MLP) and
      // one for the head's input.
      EXPECT_EQ(calls(fwd, dist::OpType::AllReduce), 1 + 2 * L + loss_reductions) << describe(c);
      EXPECT_EQ(total(fwd), 1 + 2 * L + loss_reductions) << describe(c);
      EXPECT_EQ(calls(bwd, dist::OpType::AllReduce), 2 * L + 1) << describe(c);
      EXPECT_EQ(total(bwd), 2 * L + 1) << describe(c);
    } else {
      // Each all-reduce becomes a reduce-scatter plus an all-gather: per block, an all-gather
      // entering attention and the MLP, a reduce-scatter leaving them (the embedding
      // reduce-scatters, the head all-gathers); backward the transposes. Replicated
      // parameters see only their rank's tokens: one all-reduce of each one's gradient.
      const int64_t replicated = c.family == Family::Gpt ? 6 * L + 3 : 2 * L + 1;
      EXPECT_EQ(calls(fwd, dist::OpType::AllGather), 2 * L + 1) << describe(c);
      EXPECT_EQ(calls(fwd, dist::OpType::ReduceScatter), 2 * L + 1) << describe(c);
      EXPECT_EQ(calls(fwd, dist::OpType::AllReduce), loss_reductions) << describe(c);
      EXPECT_EQ(total(fwd), 4 * L + 2 + loss_reductions) << describe(c);
      EXPECT_EQ(calls(bwd, dist::OpType::AllGather), 2 * L + 1) << describe(c);
      EXPECT_EQ(calls(bwd, dist::OpType::ReduceScatter), 2 * L + 1) << describe(c);
      EXPECT_EQ(calls(bwd, dist::OpType::AllReduce), replicated) << describe(c);
      EXPECT_EQ(total(bwd), 4 * L + 2 + replicated) << describe(c);
    }
  }
}

TEST(TensorParallelModels, DegreesThatDoNotDivideAreRefusedNamingThem) {
  auto& world = dist::world();
  if (world.size() != 4) GTEST_SKIP() << "needs 4 ranks";
  auto tp = std::make_shared<parallel::TensorParallelFactory>(world);
  std::string msg = test::error_of(
      [&] { nn::GPT m({.vocab_size = kVocab, .context = kSeq, .n_layer = 1, .n_head = 2, .n_embd = 8}, tp); });
  EXPECT_NE(msg.find("degree 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("n_head 2"), std::string::npos) << msg;
  msg = test::error_of([&] {
    nn::Llama m({.vocab_size = kVocab,
                 .context = kSeq,
                 .n_layer = 1,
                 .n_head = 8,
                 .n_kv_head = 2,
                 .n_embd = 32,
                 .intermediate_size = 24},
                tp);
  });
  EXPECT_NE(msg.find("degree 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("n_kv_head 2"), std::string::npos) << msg;
  // Sequence parallelism needs a sequence that divides.
  auto sp = std::make_shared<parallel::TensorParallelFactory>(world, parallel::TensorParallelOptions{true});
  auto model = build(Family::Llama, DType::Float32, sp);
  msg = test::error_of([&] {
    model->loss(zeros({1, 6}, {.dtype = DType::Int64}), zeros({1, 6}, {.dtype = DType::Int64}));
  });
  EXPECT_NE(msg.find("does not divide"), std::string::npos) << msg;
}

}  // namespace strata

namespace strata {

// Dropout outside the tensor-parallel regions draws from the default generator, alike on
// every rank, in the same order as one process: with dropout on, TP training still equals
// one-process training (float64).
TEST(TensorParallelModels, DropoutOutsideTheRegionsMatchesOneProcess) {
  auto& world = dist::world();
  nn::GPTConfig config{.vocab_size = kVocab,
                       .context = kSeq,
                       .n_layer = kLayers,
                       .n_head = 4,
                       .n_embd = 16,
                       .dropout = 0.2,
                       .seed = 3,
                       .dtype = DType::Float64};
  auto run = [&](std::shared_ptr<nn::LayerFactory> factory) {
    manual_seed(77);
    nn::GPT model(config, factory);
    optim::AdamW opt(model.parameters(), adamw());
    for (int s = 0; s < 3; ++s) {
      auto [x, y] = batch(s, 2);
      opt.zero_grad();
      model.loss(x, y).backward();
      opt.step();
    }
    return factory ? parallel::full_state_dict(model, world) : model.state_dict();
  };
  const Reference ref{.weights = run(nullptr)};
  std::string where;
  const double worst =
      worst_difference(run(std::make_shared<parallel::TensorParallelFactory>(world)), ref, DType::Float64, where);
  EXPECT_LE(worst, 1e-11) << where;
}

// With sequence parallelism each rank drops positions of its own piece from its own stream:
// the streams differ across ranks and repeat from the same seeds.
TEST(TensorParallelModels, SequenceParallelDropoutIsPerRankAndReproducible) {
  auto& world = dist::world();
  auto factory = [&] {
    return std::make_shared<parallel::TensorParallelFactory>(world, parallel::TensorParallelOptions{true, 5});
  };
  auto a = factory(), b = factory();
  Tensor ones = full({64}, 1.0);
  Tensor mask_a = dropout(ones, 0.5, true, a->sharded_generator());
  Tensor mask_b = dropout(ones, 0.5, true, b->sharded_generator());
  EXPECT_EQ(mask_a.to_vector<float>(), mask_b.to_vector<float>());  // same seed, same stream
  Tensor all = zeros({64 * world.size()});
  world.all_gather(all, mask_a)->wait();
  for (int r = 1; r < world.size(); ++r)
    EXPECT_NE(all.narrow(0, 0, 64).to_vector<float>(), all.narrow(0, 64 * r, 64).to_vector<float>()) << "rank " << r;
  // The model's dropouts use that stream, and its state saves and restores.
  nn::GPT model({.vocab_size = kVocab, .context = kSeq, .n_layer = 1, .n_head = 4, .n_embd = 16, .dropout = 0.3}, a);
  EXPECT_EQ(model.drop->generator, a->sharded_generator());
  auto saved = a->rng_tracker().states();
  auto [x, y] = batch(0, 2);
  const double first = model.loss(x, y).item();
  a->rng_tracker().set_states(saved);
  EXPECT_EQ(model.loss(x, y).item(), first);
  EXPECT_NE(test::error_of([&] { a->rng_tracker().get("pipeline"); }).find("tensor-parallel"), std::string::npos);
}

}  // namespace strata

namespace strata {

// Clipping counts each parameter once: the norm of a TP model's gradients (alone, with DDP
// and with ZeRO-3 on dp=2 x tp=2) equals the single-process norm, and a clipped step equals
// the single-process clipped step.
TEST(TensorParallelModels, GlobalNormClippingCountsEachParameterOnce) {
  auto& world = dist::world();
  const double max_norm = 0.05;  // below the norm: clipping acts
  for (Family f : {Family::Gpt, Family::Llama}) {
    auto single = build(f, DType::Float64);
    auto [x, y] = batch(1, 4);
    single->loss(x, y).backward();
    const double want = optim::clip_grad_norm(single->parameters(), max_norm);
    ASSERT_GT(want, max_norm);
    optim::AdamW(single->parameters(), adamw()).step();
    const Reference ref{.weights = single->state_dict()};
    std::string where;

    auto tp = std::make_shared<parallel::TensorParallelFactory>(world, parallel::TensorParallelOptions{true});
    auto model = build(f, DType::Float64, tp);
    model->loss(x, y).backward();
    EXPECT_NEAR(parallel::tp_clip_grad_norm(*model, max_norm, world), want, 1e-12 * want) << name_of(f);
    optim::AdamW(model->parameters(), adamw()).step();
    EXPECT_LE(worst_difference(parallel::full_state_dict(*model, world), ref, DType::Float64, where), 1e-11)
        << name_of(f) << " " << where;

    if (world.size() != 4) continue;
    dist::DeviceMesh mesh(world, {.dp = 2, .tp = 2});
    auto& dp = mesh.group(dist::MeshDim::Data);
    auto& tpg = mesh.group(dist::MeshDim::Tensor);
    Tensor lx = x.narrow(0, 2 * dp.rank(), 2).contiguous(), ly = y.narrow(0, 2 * dp.rank(), 2).contiguous();
    for (int stage : {0, 3}) {
      auto m = build(f, DType::Float64, std::make_shared<parallel::TensorParallelFactory>(tpg));
      parallel::ZeroOptions zo{.stage = stage, .master_dtype = DType::Float64};
      zo.tensor_parallel = {.group = &tpg, .is_split = parallel::split_parameter_predicate(*m)};
      parallel::ZeroOptimizer zero(*m, adamw(), dp, zo);
      m->loss(lx, ly).backward();
      EXPECT_NEAR(zero.clip_grad_norm(max_norm), want, 1e-12 * want) << name_of(f) << " zero stage " << stage;
      zero.step();
      auto gathered = zero.gathered_parameters();
      EXPECT_LE(worst_difference(parallel::full_state_dict(*m, tpg), ref, DType::Float64, where), 1e-11)
          << name_of(f) << " zero stage " << stage << " " << where;
    }
  }
}

}  // namespace strata

namespace strata {

// A TP model exports to the Hugging Face layout (GPT-2, LLaMA) by gathering, and an HF export
// loads into a TP model (of another seed) by slicing: the logits come back the same.
TEST(TensorParallelModels, HuggingFaceExportGathersAndImportSlices) {
  auto& world = dist::world();
  nn::GPTConfig c{.vocab_size = kVocab, .context = kSeq, .n_layer = kLayers, .n_head = 4, .n_embd = 16, .seed = 3};
  nn::GPT a(c, std::make_shared<parallel::TensorParallelFactory>(world));
  Tensor pid = full({1}, static_cast<double>(::getpid()), {.dtype = DType::Int64});
  world.broadcast(pid, 0)->wait();  // one directory, named by rank 0's process
  const std::string dir = "/tmp/strata_tp_hf_export_" + std::to_string(static_cast<int64_t>(pid.item()));
  StateDict full = parallel::full_state_dict(a, world);
  if (world.rank() == 0)
    checkpoint::export_gpt2_safetensors(
        dir, full, {.vocab_size = kVocab, .n_positions = kSeq, .n_embd = 16, .n_layer = kLayers, .n_head = 4});
  world.barrier()->wait();
  c.seed = 4;
  nn::GPT b(c, std::make_shared<parallel::TensorParallelFactory>(world));
  parallel::load_full_state_dict(b, checkpoint::import_gpt2_safetensors(dir), world);
  NoGradGuard no_grad;
  Tensor x = batch(0, 2).first;
  EXPECT_EQ(b.forward(x).to_vector<float>(), a.forward(x).to_vector<float>());

  // The same for Llama through the LlamaForCausalLM layout.
  auto la = build(Family::Llama, DType::Float32, std::make_shared<parallel::TensorParallelFactory>(world));
  const nn::LlamaConfig& lc = dynamic_cast<nn::Llama&>(*la).config();
  StateDict lfull = parallel::full_state_dict(*la, world);
  world.barrier()->wait();
  if (world.rank() == 0)
    checkpoint::export_llama_safetensors(dir + "-llama", lfull,
                                         {.vocab_size = lc.vocab_size,
                                          .context = lc.context,
                                          .n_layer = lc.n_layer,
                                          .n_head = lc.n_head,
                                          .n_kv_head = lc.n_kv_head,
                                          .n_embd = lc.n_embd,
                                          .intermediate_size = lc.intermediate_size,
                                          .rope_theta = lc.rope_theta,
                                          .rms_norm_eps = lc.rms_norm_eps,
                                          .init_std = lc.init_std});
  world.barrier()->wait();
  nn::LlamaConfig other = lc;
  other.seed = 8;
  nn::Llama lb(other, std::make_shared<parallel::TensorParallelFactory>(world));
  parallel::load_full_state_dict(lb, checkpoint::import_llama_safetensors(dir + "-llama"), world);
  EXPECT_EQ(lb.forward(x).to_vector<float>(), la->forward(x).to_vector<float>());
  world.barrier()->wait();
  if (world.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(dir + "-llama");
  }
}

}  // namespace strata

namespace strata {

// Recompute under tensor and sequence parallelism (collectives inside the recomputed blocks,
// per-rank dropout streams restored) and under DDP (its hooks fire in the nested pass): the
// gradients are bit for bit those without recompute.
TEST(TensorParallelModels, RecomputeIsBitIdentical) {
  auto& world = dist::world();
  // With 4 ranks, dp=2 x tp=2 and DDP over the data group; with 2, TP alone.
  std::unique_ptr<dist::DeviceMesh> mesh;
  if (world.size() == 4) mesh = std::make_unique<dist::DeviceMesh>(world, dist::MeshShape{.dp = 2, .tp = 2});
  dist::ProcessGroup& tpg = mesh ? mesh->group(dist::MeshDim::Tensor) : world;
  for (Family f : {Family::Gpt, Family::Llama}) {
    auto grads_of = [&](bool recompute, bool ddp_on) {
      auto tp = std::make_shared<parallel::TensorParallelFactory>(tpg, parallel::TensorParallelOptions{true, 9});
      std::unique_ptr<nn::CausalLM> model;
      if (f == Family::Gpt)
        model = std::make_unique<nn::GPT>(nn::GPTConfig{.vocab_size = kVocab,
                                                        .context = kSeq,
                                                        .n_layer = kLayers,
                                                        .n_head = 4,
                                                        .n_embd = 16,
                                                        .dropout = 0.2,
                                                        .seed = 3},
                                          tp);
      else model = build(f, DType::Float32, tp);
      model->set_recompute(recompute);
      std::unique_ptr<parallel::DistributedDataParallel> ddp;
      if (ddp_on) ddp = std::make_unique<parallel::DistributedDataParallel>(*model, mesh->group(dist::MeshDim::Data));
      manual_seed(5);
      auto [x, y] = batch(2, 2);
      if (mesh) std::tie(x, y) = batch(2 + mesh->coord(dist::MeshDim::Data), 2);  // each data rank its own batch
      model->loss(x, y).backward();
      std::vector<std::vector<float>> grads;
      for (const Tensor& p : model->parameters()) grads.push_back(p.grad().to_vector<float>());
      return grads;
    };
    EXPECT_EQ(grads_of(true, false), grads_of(false, false)) << name_of(f);
    if (mesh) {
      EXPECT_EQ(grads_of(true, true), grads_of(false, true)) << name_of(f) << " with DDP";
    }
  }
}

}  // namespace strata

namespace strata {

// Generation from a tensor-parallel model (sequence parallel too: its one-token steps run
// without the split) gives the tokens one process gives, with and without the KV cache.
TEST(TensorParallelModels, GenerationMatchesOneProcess) {
  auto& world = dist::world();
  for (Family f : {Family::Gpt, Family::Llama}) {
    auto single = build(f, DType::Float64);
    auto tp = build(f, DType::Float64,
                    std::make_shared<parallel::TensorParallelFactory>(world, parallel::TensorParallelOptions{true}));
    Tensor prompt = batch(3, 2).first.narrow(1, 0, 3).contiguous();
    for (bool cache : {true, false}) {
      nn::GenerateOptions o{.temperature = 0.9, .top_k = 5, .seed = 4, .use_cache = cache};
      EXPECT_EQ(nn::generate(*tp, prompt, 5, o).to_vector<int64_t>(),
                nn::generate(*single, prompt, 5, o).to_vector<int64_t>())
          << name_of(f) << (cache ? " cached" : " uncached");
    }
  }
}

}  // namespace strata

namespace strata {

// A padded vocabulary (15 words in 24 rows): the parts split the 24 rows (on 4 ranks the
// last holds padding only), and training equals one process's padded model, whose padding
// rows stay zero; forward gives the 15 real words.
TEST(TensorParallelModels, PaddedVocabularyTrainsLikeOneProcess) {
  auto& world = dist::world();
  const int64_t rows = 2;
  for (Family f : {Family::Gpt, Family::Llama}) {
    auto make = [f](const std::shared_ptr<nn::LayerFactory>& factory) -> std::unique_ptr<nn::CausalLM> {
      if (f == Family::Gpt) {
        nn::GPTConfig c = gpt_config(DType::Float64);
        c.padded_vocab_size = 24;
        return std::make_unique<nn::GPT>(c, factory);
      }
      nn::LlamaConfig c = llama_config(DType::Float64);
      c.padded_vocab_size = 24;
      return std::make_unique<nn::Llama>(c, factory);
    };
    auto single = make(nullptr);
    auto tp = make(std::make_shared<parallel::TensorParallelFactory>(world));
    optim::AdamW single_opt(single->parameters(), adamw());
    optim::AdamW tp_opt(tp->parameters(), adamw());
    for (int s = 0; s < kSteps; ++s) {
      auto [x, y] = batch(s, rows);
      for (auto* o : {&single_opt, &tp_opt}) o->zero_grad();
      Tensor want = single->loss(x, y), got = tp->loss(x, y);
      EXPECT_NEAR(got.item(), want.item(), tolerance(DType::Float64) * 10) << name_of(f) << " step " << s;
      want.backward();
      got.backward();
      single_opt.step();
      tp_opt.step();
    }
    const StateDict full = parallel::full_state_dict(*tp, world);
    std::string where;
    EXPECT_LE(worst_difference(full, Reference{.weights = single->state_dict()}, DType::Float64, where),
              tolerance(DType::Float64))
        << name_of(f) << ": " << where;
    for (const auto& [name, t] : full) {
      if (name != "wte.weight" && name != "embed_tokens.weight" && name != "lm_head.weight") continue;
      EXPECT_EQ(max_abs_diff(t.narrow(0, kVocab, 24 - kVocab), zeros({24 - kVocab, t.size(1)}, {.dtype = t.dtype()})),
                0.0)
          << name_of(f) << " " << name << ": padding rows stay zero";
    }
    NoGradGuard no_grad;
    EXPECT_EQ(tp->forward(batch(0, rows).first).shape(), Shape({rows, kSeq, kVocab})) << name_of(f);
  }
}

}  // namespace strata
