// A training checkpoint saved under one layout loads under another and training goes on
// as if uninterrupted (train/distributed_checkpoint.h). Each case trains 2 AdamW steps in
// layout A and saves; layout B loads (its weights must then equal, bit for bit, what one
// process loads from the same checkpoint) and trains 2 more steps, which must match one
// process continuing from the same checkpoint: float64 within 1e-11, float32 within the bound
// derived from one process's own float32 error (float32_bound.h; rounding-noise entries left
// out, as in the other equivalence tests).
// Layouts: DDP, ZeRO 0-3 (uneven padding at 3 ranks), tensor and pipeline parallelism and
// their products, bf16 parameters with fp32 master weights, on sub-groups of a 4-rank world.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "distributed/dist_test_util.h"
#include "distributed/model_equivalence_util.h"
#include "strata/distributed/object_collectives.h"
#include "strata/parallel/pipeline.h"
#include "strata/parallel/tp_factory.h"
#include "strata/train/distributed_checkpoint.h"

namespace strata {
namespace {

struct Layout {
  int dp = 1, tp = 1, pp = 1;
  int zero = -1;  // -1: AdamW (with DDP when dp > 1); 0-3: ZeroOptimizer over the data group
  std::optional<DType> param_dtype = std::nullopt;  // bf16: with ZeRO's fp32 master weights
  int64_t padded_vocab = 0;                         // the model's padded_vocab_size (0: none)
  int ranks() const { return dp * tp * pp; }
};

std::string describe(const Layout& l) {
  std::string s = "dp" + std::to_string(l.dp);
  if (l.tp > 1) s += "xtp" + std::to_string(l.tp);
  if (l.pp > 1) s += "xpp" + std::to_string(l.pp);
  s += l.zero >= 0 ? " zero" + std::to_string(l.zero) : (l.dp > 1 ? " ddp" : "");
  if (l.param_dtype) s += " " + std::string(dtype_name(*l.param_dtype));
  if (l.padded_vocab > 0) s += " vocab rows " + std::to_string(l.padded_vocab);
  return s;
}

constexpr int64_t kRows = 12;  // global batch rows: every dp degree here (1-4) divides it

std::unique_ptr<nn::CausalLM> build_model(Family f, DType dtype, std::optional<DType> param_dtype,
                                          const std::shared_ptr<nn::LayerFactory>& factory, nn::ModelPart part,
                                          int64_t padded_vocab = 0) {
  if (f == Family::Gpt) {
    nn::GPTConfig c = gpt_config(dtype);
    c.param_dtype = param_dtype;
    c.padded_vocab_size = padded_vocab;
    return std::make_unique<nn::GPT>(c, factory, std::move(part));
  }
  nn::LlamaConfig c = llama_config(dtype);
  c.param_dtype = param_dtype;
  c.padded_vocab_size = padded_vocab;
  return std::make_unique<nn::Llama>(c, factory, std::move(part));
}

// One layout's training on the ranks of `group`.
class LayoutRun {
 public:
  LayoutRun(dist::ProcessGroup& group, const Layout& l, Family family, DType dtype)
      : layout_(l), group_(group), mesh_(group, {.pp = l.pp, .dp = l.dp, .tp = l.tp}) {
    if (l.tp > 1) factory_ = std::make_shared<parallel::TensorParallelFactory>(tensor());
    nn::ModelPart part;
    const auto partition = parallel::balanced_partition(counts_of(family), kLayers, l.pp, 1);
    if (l.pp > 1) part = parallel::stage_part(partition, l.pp, pipeline().rank());
    model_ = build_model(family, dtype, l.param_dtype, factory_, part, l.padded_vocab);
    if (l.zero >= 0) {
      zero_ = std::make_unique<parallel::ZeroOptimizer>(*model_, adamw(), data(),
                                                        parallel::ZeroOptions{.stage = l.zero, .master_dtype = dtype});
    } else {
      if (l.dp > 1) ddp_ = std::make_unique<parallel::DistributedDataParallel>(*model_, data());
      opt_ = std::make_unique<optim::AdamW>(model_->parameters(), adamw());
    }
    if (l.pp > 1) {
      duplicate_ = parallel::duplicate_parameters(*model_, pipeline());
      pipe_ = std::make_unique<parallel::Pipeline>(
          *model_, pipeline(), partition,
          parallel::PipelineOptions{
              .micro_batches = static_cast<int>(kRows / l.dp), .ddp = ddp_.get(), .zero = zero_.get()});
    }
  }

  dist::ProcessGroup& data() { return mesh_.group(dist::MeshDim::Data); }
  dist::ProcessGroup& tensor() { return mesh_.group(dist::MeshDim::Tensor); }
  dist::ProcessGroup& pipeline() { return mesh_.group(dist::MeshDim::Pipeline); }

  void train(int first_step, int steps) {
    const int64_t local = kRows / layout_.dp;
    for (int s = first_step; s < first_step + steps; ++s) {
      auto [x, y] = batch(s, kRows);
      Tensor lx = x.narrow(0, local * data().rank(), local).contiguous();
      Tensor ly = y.narrow(0, local * data().rank(), local).contiguous();
      if (zero_) zero_->zero_grad();
      else opt_->zero_grad();
      if (pipe_) pipe_->train_step(lx, ly);
      else model_->loss(lx, ly).backward();
      if (zero_) zero_->step();
      else opt_->step();
    }
    if (zero_) zero_->zero_grad();
    else opt_->zero_grad();
  }

  // With tensor parallelism the target carries the factory's random streams, as train_gpt's does.
  train::CheckpointTarget target() {
    return {.model = *model_,
            .world = group_,
            .optimizer = opt_.get(),
            .zero = zero_.get(),
            .data = layout_.dp > 1 ? &data() : nullptr,
            .tensor = layout_.tp > 1 ? &tensor() : nullptr,
            .duplicate = duplicate_,
            .rng_tracker = tracker()};
  }

  parallel::RngTracker* tracker() {
    auto* tp = dynamic_cast<parallel::TensorParallelFactory*>(factory_.get());
    return tp != nullptr ? &tp->rng_tracker() : nullptr;
  }

  // max |master - reference| / max |reference| over the master weights this rank owns
  // (ZeRO without tensor parallelism).
  double master_difference(const Reference& ref) {
    double diff = 0, scale = 0;
    for (const auto& own : zero_->owned_pieces()) {
      std::vector<double> m = own.master.to_vector<double>();
      std::vector<double> r =
          ref.weights.at(own.name).reshape({-1}).narrow(0, own.offset, own.numel).to_vector<double>();
      for (size_t i = 0; i < m.size(); ++i) {
        diff = std::max(diff, std::fabs(m[i] - r[i]));
        scale = std::max(scale, std::fabs(r[i]));
      }
    }
    return diff / std::max(scale, 1e-300);
  }

  // This rank's stage's full weights (ZeRO-3 shards and TP parts gathered), as float64.
  StateDict weights() {
    std::optional<parallel::ZeroOptimizer::GatheredParameters> gathered;
    if (zero_) gathered.emplace(*zero_);
    StateDict w = layout_.tp > 1 ? parallel::full_state_dict(*model_, tensor()) : model_->state_dict();
    for (auto& [name, t] : w) t = t.to(DType::Float64);
    return w;
  }

 private:
  Layout layout_;
  dist::ProcessGroup& group_;
  dist::DeviceMesh mesh_;
  std::shared_ptr<nn::LayerFactory> factory_;
  std::unique_ptr<nn::CausalLM> model_;
  std::unique_ptr<parallel::DistributedDataParallel> ddp_;
  std::unique_ptr<optim::AdamW> opt_;
  std::unique_ptr<parallel::ZeroOptimizer> zero_;
  std::function<bool(const std::string&)> duplicate_;
  std::unique_ptr<parallel::Pipeline> pipe_;
};

// The first `n` ranks of the world (others get a group of their own and sit the case out).
struct FirstRanks {
  std::unique_ptr<dist::ProcessGroup> group;
  bool member = false;
};
FirstRanks first_ranks(int n) {
  auto& world = dist::world();
  std::vector<int> mine;
  const bool member = world.rank() < n;
  for (int r = 0; r < world.size(); ++r)
    if ((r < n) == member) mine.push_back(r);
  return {world.split(mine, member ? "first-" + std::to_string(n) : "rest"), member};
}

std::string shared_dir(const std::string& name) {
  auto& world = dist::world();
  std::string dir;
  if (world.rank() == 0) {
    dir = (std::filesystem::temp_directory_path() / ("strata_reshard_" + std::to_string(::getpid()) + "_" + name))
              .string();
    std::filesystem::remove_all(dir);
  }
  return dist::broadcast_string(world, dir);
}

// One process loading the checkpoint: its weights right after the load and after 2 more steps.
struct Continuation {
  Reference loaded;
  Reference trained;
};
Continuation one_process_continuation(const std::string& dir, Family family, DType dtype, int64_t padded_vocab) {
  auto& world = dist::world();
  auto alone = world.split(std::vector<int>{world.rank()}, "alone");
  auto model = build_model(family, dtype, std::nullopt, nullptr, {}, padded_vocab);
  optim::AdamW opt(model->parameters(), adamw());
  train::load_training_checkpoint(dir, {.model = *model, .world = *alone, .optimizer = &opt});
  Continuation c;
  for (const auto& [name, t] : model->state_dict()) c.loaded.weights[name] = t.to(DType::Float64).clone();
  for (int s = 2; s < 4; ++s) {
    auto [x, y] = batch(s, kRows);
    opt.zero_grad();
    model->loss(x, y).backward();
    mark_noise(*model, c.trained.noise);
    opt.step();
  }
  c.trained.weights = model->state_dict();
  for (Reference* r : {&c.loaded, &c.trained})
    for (auto& [name, t] : r->weights) t = t.to(DType::Float64);
  return c;
}

// Saves after 2 steps in `from`, loads into `to` and trains 2 more steps there.
void expect_reshard(const Layout& from, const Layout& to, Family family = Family::Gpt, DType dtype = DType::Float32) {
  auto& world = dist::world();
  ASSERT_LE(std::max(from.ranks(), to.ranks()), world.size());
  const std::string name =
      describe(from) + " -> " + describe(to) + " " + name_of(family) + " " + std::string(dtype_name(dtype));
  static int counter = 0;
  const std::string dir = shared_dir(std::to_string(counter++));
  {
    FirstRanks a = first_ranks(from.ranks());
    if (a.member) {
      LayoutRun run(*a.group, from, family, dtype);
      run.train(0, 2);
      train::save_training_checkpoint(dir, run.target(), 2);
    }
  }
  world.barrier()->wait();
  const Continuation ref = one_process_continuation(dir, family, dtype, from.padded_vocab);
  FirstRanks b = first_ranks(to.ranks());
  if (b.member) {
    LayoutRun run(*b.group, to, family, dtype);
    EXPECT_EQ(train::load_training_checkpoint(dir, run.target()), 2) << name;
    std::string where;
    // bf16 parameters hold the loaded fp32 values rounded: compare at their precision.
    const bool rounded = to.param_dtype.has_value();
    const double loaded = worst_difference(run.weights(), ref.loaded, DType::Float64, where);
    if (rounded) {
      EXPECT_LE(loaded, 1e-2) << name << ": after loading, " << where;
      EXPECT_EQ(run.master_difference(ref.loaded), 0.0) << name << ": fp32 master weights after loading";
    } else {
      EXPECT_EQ(loaded, 0.0) << name << ": after loading, " << where;
    }
    run.train(2, 2);
    const double trained = worst_difference(run.weights(), ref.trained, dtype, where);
    if (rounded || dtype == DType::Float64) {
      EXPECT_LE(trained, rounded ? 1e-2 : tolerance(dtype)) << name << ": after 2 more steps, " << where;
    } else {
      // The reference's float32 error over 5 steps from the start bounds that of these 2 steps
      // from bitwise equal loaded states (the paths diverge only from step 2 on).
      EXPECT_TRUE(test::within_float32_bound(trained, float32_training_error(family, kRows).weights,
                                             name + ": after 2 more steps, " + where, b.group->rank() == 0));
    }
    if (b.group->rank() == 0)
      std::printf("%s: loaded %.2e, after 2 steps %.2e (%s)\n", name.c_str(), loaded, trained, where.c_str());
  }
  world.barrier()->wait();
  if (world.rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace

TEST(CheckpointReshard, DataParallelDegrees) {
  expect_reshard({.dp = 4}, {.dp = 2});
  expect_reshard({.dp = 2}, {.dp = 4}, Family::Gpt, DType::Float64);
}

TEST(CheckpointReshard, ZeroStages) {
  expect_reshard({.dp = 4, .zero = 3}, {.dp = 4, .zero = 1});
  // 3 ranks: the buckets are padded unevenly.
  expect_reshard({.dp = 2, .zero = 2}, {.dp = 3, .zero = 3});
  expect_reshard({.dp = 3, .zero = 0}, {.dp = 2, .zero = 2}, Family::Llama, DType::Float64);
  // From one process to ZeRO-3.
  expect_reshard({}, {.dp = 4, .zero = 3});
}

TEST(CheckpointReshard, TensorParallelDegrees) {
  expect_reshard({.tp = 2}, {});
  expect_reshard({}, {.tp = 4});
  expect_reshard({.tp = 2}, {.dp = 2, .zero = 2}, Family::Llama);
  expect_reshard({.dp = 2, .tp = 2, .zero = 3}, {.tp = 4}, Family::Gpt, DType::Float64);
}

// A padded vocabulary (15 words in 24 rows) reshards as any other: tp 2 holds 12 rows a rank,
// tp 4 six (its last rank padding only), one process all 24.
TEST(CheckpointReshard, PaddedVocabulary) {
  expect_reshard({.tp = 2, .padded_vocab = 24}, {.tp = 4, .padded_vocab = 24}, Family::Llama, DType::Float64);
  expect_reshard({.dp = 2, .tp = 2, .zero = 3, .padded_vocab = 24}, {.padded_vocab = 24});
}

TEST(CheckpointReshard, PipelineStages) {
  expect_reshard({.pp = 2}, {});
  expect_reshard({.tp = 2, .pp = 2}, {.dp = 4});
  expect_reshard({.dp = 2}, {.dp = 2, .pp = 2, .zero = 1}, Family::Llama);
}

// The tensor-parallel random streams across layouts (docs/checkpoint-format.md, "RNG streams"):
// from a save without tensor parallelism each rank keeps its own seed and continues from the
// default stream's offset; from a save with it into a layout without it, the default stream
// continues from the highest offset of any saved stream.
TEST(CheckpointReshard, TensorParallelRandomStreamsContinueAcrossLayouts) {
  auto& world = dist::world();
  const std::string to_tp = shared_dir("rng_to_tp"), from_tp = shared_dir("rng_from_tp");
  const Generator saved_default = default_generator();
  FirstRanks two = first_ranks(2);
  if (two.member) {
    LayoutRun plain(*two.group, {.dp = 2}, Family::Gpt, DType::Float32);
    plain.train(0, 1);
    default_generator().set_state(default_generator().seed(), 1000);
    train::save_training_checkpoint(to_tp, plain.target(), 1);

    LayoutRun tp(*two.group, {.tp = 2}, Family::Gpt, DType::Float32);
    const auto own = tp.tracker()->states();
    train::load_training_checkpoint(to_tp, tp.target());
    for (const auto& [stream, state] : tp.tracker()->states()) {
      EXPECT_EQ(state.first, own.at(stream).first) << stream << ": this rank's own seed";
      EXPECT_EQ(state.second, 1000u) << stream << ": continues from the default stream's offset";
    }
    EXPECT_EQ(default_generator().offset(), 1000u);

    // Back: the streams went further than the default stream.
    tp.tracker()->set_states({{parallel::RngTracker::kTensorParallel, {own.begin()->second.first, 5000}}});
    train::save_training_checkpoint(from_tp, tp.target(), 1);
    LayoutRun back(*two.group, {.dp = 2}, Family::Gpt, DType::Float32);
    default_generator().set_state(default_generator().seed(), 0);
    train::load_training_checkpoint(from_tp, back.target());
    EXPECT_EQ(default_generator().offset(), 5000u) << "the default stream continues past every saved stream";
  }
  default_generator() = saved_default;
  world.barrier()->wait();
  if (world.rank() == 0) {
    std::filesystem::remove_all(to_tp);
    std::filesystem::remove_all(from_tp);
  }
}

TEST(CheckpointReshard, Bf16MasterWeightsToFloat32AndBack) {
  expect_reshard({.dp = 2, .zero = 1, .param_dtype = DType::BFloat16}, {.dp = 2});
  expect_reshard({.dp = 2}, {.dp = 2, .zero = 2, .param_dtype = DType::BFloat16});
}

}  // namespace strata
