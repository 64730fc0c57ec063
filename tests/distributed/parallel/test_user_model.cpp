// A model written outside the library goes where the library's models go: a mixture of
// experts (a router, top-1 routing, experts of its own module type built from the layer
// factory's column and row linears) defined here, trained under ZeRO-3 with its own module
// type as the unit, split by tensor parallelism, saved and loaded, and sampled by
// nn::generate. Its code runs no hooks: the model derives from nn::LanguageModel and calls
// its layers through nn::call. Float64 throughout, compared with one process.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "distributed/dist_test_util.h"
#include "strata/autograd/grad_mode.h"
#include "strata/checkpoint/safetensors.h"
#include "strata/distributed/init.h"
#include "strata/nn/containers.h"
#include "strata/nn/generate.h"
#include "strata/nn/language_model.h"
#include "strata/nn/layer_factory.h"
#include "strata/nn/layers.h"
#include "strata/nn/module_predicates.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/indexing.h"
#include "strata/ops/nn_functional.h"
#include "strata/ops/reduce.h"
#include "strata/ops/shape_ops.h"
#include "strata/optim/adam.h"
#include "strata/parallel/tp_factory.h"
#include "strata/parallel/tp_layers.h"
#include "strata/parallel/zero.h"

namespace user {
using strata::Tensor;
namespace nn = strata::nn;

constexpr int64_t kVocab = 11;  // not a multiple of the TP degree: the factory pads the head
constexpr int64_t kWidth = 6;
constexpr int64_t kHidden = 8;  // divides by 2 (column/row split)
constexpr int64_t kExperts = 4;
constexpr int64_t kLayers = 2;
constexpr int64_t kContext = 12;

nn::InitOptions init() { return {.std = 0.5, .dtype = strata::DType::Float64, .by_name = true}; }

// An MLP expert: its up projection split by output features, its down projection by input
// features (one all-reduce under tensor parallelism).
class Expert : public nn::Module {
 public:
  explicit Expert(nn::LayerFactory& factory) : factory_(factory) {
    up_ = register_module("up", factory.column(kWidth, kHidden, true, init()));
    down_ = register_module("down", factory.row(kHidden, kWidth, true, init()));
  }
  Tensor forward(const Tensor& x) { return nn::call(*down_, strata::gelu(nn::call(*up_, factory_.enter_region(x)))); }

 private:
  nn::LayerFactory& factory_;
  std::shared_ptr<nn::Linear> up_, down_;
};

// Top-1 mixture of experts with a residual: each row goes to the expert its router scores
// highest, scaled by that expert's probability; experts no row chose do not run. No hooks.
class MoELayer : public nn::Module {
 public:
  explicit MoELayer(nn::LayerFactory& factory) {
    router_ = register_module("router", std::make_shared<nn::Linear>(kWidth, kExperts, false, init()));
    for (int64_t e = 0; e < kExperts; ++e)
      experts_.push_back(register_module("expert" + std::to_string(e), std::make_shared<Expert>(factory)));
  }
  Tensor forward(const Tensor& x) {  // [B, T, C]
    const Tensor rows = x.reshape({-1, kWidth});
    const Tensor probs = strata::softmax(nn::call(*router_, rows), -1);
    const std::vector<double> p = probs.to_vector<double>();
    Tensor out = rows;
    for (int64_t e = 0; e < kExperts; ++e) {
      std::vector<int64_t> chosen;
      for (int64_t r = 0; r < rows.size(0); ++r) {
        const double* row = p.data() + r * kExperts;
        if (std::max_element(row, row + kExperts) - row == e) chosen.push_back(r);
      }
      routed_.push_back(static_cast<int64_t>(chosen.size()));
      if (chosen.empty()) continue;
      const Tensor index = strata::from_vector(chosen, {static_cast<int64_t>(chosen.size())});
      const Tensor gate = strata::index_select(probs, 0, index).narrow(1, e, 1);
      const Tensor y = nn::call(*experts_[static_cast<size_t>(e)], strata::index_select(rows, 0, index));
      out = strata::index_add(out, 0, index, gate * y);
    }
    return out.reshape(x.shape());
  }
  // Rows routed to each expert, per forward (expert e of forward k at k * kExperts + e).
  std::vector<int64_t> routed_;

 private:
  std::shared_ptr<nn::Linear> router_;
  std::vector<std::shared_ptr<Expert>> experts_;
};

// A per-position language model: token embedding, MoE layers, final norm, vocabulary head.
class MoEModel : public nn::LanguageModel {
 public:
  explicit MoEModel(std::shared_ptr<nn::LayerFactory> factory = nn::default_layer_factory())
      : factory_(std::move(factory)) {
    wte_ = register_module("wte", factory_->embedding(kVocab, kWidth, init()));
    layers_ = register_module("layers", std::make_shared<nn::ModuleList>());
    for (int64_t l = 0; l < kLayers; ++l) layers_->push_back(std::make_shared<MoELayer>(*factory_));
    ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(kWidth, 1e-5, strata::DType::Float64));
    head_ = register_module("head", factory_->head(kWidth, kVocab, init()));
    init_parameters(42);
    factory_->model_built(*this);
  }
  int64_t vocab_size() const override { return kVocab; }
  int64_t context_length() const override { return kContext; }
  MoELayer& layer(size_t l) { return *layers_->at<MoELayer>(l); }
  // The mistake the library must explain: a unit's forward called directly, without hooks.
  bool call_layers_directly = false;

 protected:
  Tensor forward_logits(const Tensor& tokens, nn::KVCache* /*cache*/) override {
    factory_->begin_forward(tokens.size(1));
    Tensor h = nn::call(*wte_, tokens);
    for (size_t l = 0; l < layers_->size(); ++l) h = call_layers_directly ? layer(l).forward(h) : nn::call(layer(l), h);
    const Tensor local = nn::call(*head_, factory_->enter_region(nn::call(*ln_f_, h)));
    return factory_->gather_logits(local, kVocab);
  }

 private:
  std::shared_ptr<nn::LayerFactory> factory_;
  std::shared_ptr<nn::Embedding> wte_;
  std::shared_ptr<nn::ModuleList> layers_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  std::shared_ptr<nn::Linear> head_;
};

// Mean next-token cross-entropy of the model's logits (the user's own loss, from forward).
Tensor loss(MoEModel& model, const Tensor& tokens, const Tensor& targets) {
  const Tensor logits = model.forward(tokens);
  return strata::cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
}

}  // namespace user

namespace strata::test {
namespace {

using user::MoEModel;

constexpr int kSteps = 4;
constexpr int64_t kRowsPerRank = 2;
constexpr int64_t kTime = 5;

struct Batch {
  Tensor tokens, targets;
};

// Rows [first, first + rows) of step s's global batch.
Batch batch(int step, int64_t global_rows, int64_t first, int64_t rows) {
  Generator gen(500 + static_cast<uint64_t>(step));
  const Tensor all = randint(0, user::kVocab, {global_rows, kTime + 1}, {.dtype = DType::Int64}, &gen);
  const Tensor mine = all.narrow(0, first, rows);
  return {mine.narrow(1, 0, kTime).contiguous(), mine.narrow(1, 1, kTime).contiguous()};
}

optim::AdamWOptions adamw() { return {.lr = 0.05, .weight_decay = 0.1}; }

parallel::ZeroOptions zero3() { return {.stage = 3, .is_unit = nn::module_type_predicate<user::MoELayer>()}; }

// One process over every rank's rows: the reference.
StateDict train_one_process(MoEModel& model, int64_t global_rows) {
  optim::AdamW opt(model.parameters(), adamw());
  for (int s = 0; s < kSteps; ++s) {
    Batch b = batch(s, global_rows, 0, global_rows);
    user::loss(model, b.tokens, b.targets).backward();
    opt.step();
    opt.zero_grad();
  }
  return model.state_dict();
}

// Float64: ranks sum gradients (ZeRO) or partial products (tensor parallelism) in another
// order than one process; a few ulps per step grow through AdamW's division by sqrt(v) in
// the first steps. 1e-12 relative leaves three orders of magnitude (as the idle-expert test).
constexpr double kReorderBound = 1e-12;

void expect_close(const StateDict& got, const StateDict& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, w] : want) {
    ASSERT_EQ(got.count(name), 1u) << what << ": " << name << " missing";
    const std::vector<double> x = got.at(name).to_vector<double>(), y = w.to_vector<double>();
    ASSERT_EQ(x.size(), y.size()) << what << ": " << name;
    double diff = 0, scale = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      diff = std::max(diff, std::fabs(x[i] - y[i]));
      scale = std::max(scale, std::fabs(y[i]));
    }
    EXPECT_LE(diff, kReorderBound * std::max(scale, 1.0)) << what << ": " << name;
  }
}

// Whether some expert had no row in some forward (on this rank).
bool some_expert_idle(MoEModel& model) {
  for (size_t l = 0; l < static_cast<size_t>(user::kLayers); ++l)
    for (int64_t n : model.layer(l).routed_)
      if (n == 0) return true;
  return false;
}

// The tokens a plain greedy loop gives (the whole sequence through forward at every step).
Tensor greedy_loop(MoEModel& model, const Tensor& prompt, int64_t new_tokens) {
  NoGradGuard no_grad;
  Tensor seq = prompt;
  for (int64_t t = 0; t < new_tokens; ++t) {
    const Tensor logits = model.forward(seq);
    const Tensor last = logits.select(1, logits.size(1) - 1).contiguous();
    const std::vector<double> v = last.to_vector<double>();
    std::vector<int64_t> next;
    for (int64_t b = 0; b < seq.size(0); ++b)
      next.push_back(std::max_element(v.begin() + b * user::kVocab, v.begin() + (b + 1) * user::kVocab) -
                     (v.begin() + b * user::kVocab));
    seq = cat({seq, from_vector(next, {seq.size(0), 1})}, 1);
  }
  return seq;
}

std::vector<int64_t> tokens_of(const Tensor& t) { return t.to_vector<int64_t>(); }

Tensor prompt() { return from_vector(std::vector<int64_t>{3, 1, 4, 1, 5, 9}, {2, 3}); }

TEST(UserModel, ZeroStage3TrainsItLikeOneProcess) {
  auto& world = dist::world();
  const int64_t global_rows = world.size() * kRowsPerRank;
  MoEModel reference_model;
  const StateDict reference = train_one_process(reference_model, global_rows);
  EXPECT_TRUE(some_expert_idle(reference_model)) << "the data should leave some expert without rows";

  MoEModel model;
  parallel::ZeroOptimizer zero(model, adamw(), world, zero3());
  // One unit per MoE layer (the user's type), and the root.
  ASSERT_EQ(zero.bucket_bytes().size(), static_cast<size_t>(user::kLayers + 1));
  for (int s = 0; s < kSteps; ++s) {
    Batch b = batch(s, global_rows, world.rank() * kRowsPerRank, kRowsPerRank);
    user::loss(model, b.tokens, b.targets).backward();
    zero.step();
    zero.zero_grad();
  }
  expect_close(zero.full_parameters(), reference, "ZeRO-3 against one process");
  // Outside forward the units are released again: the parameters are read through ZeRO.
  EXPECT_TRUE(model.layer(0).named_parameters().front().second.storage()->released());

  // Generation under ZeRO-3 (every rank takes part) gives the one-process model's tokens.
  const Tensor want = greedy_loop(reference_model, prompt(), 4);
  EXPECT_EQ(tokens_of(nn::generate(model, prompt(), 4, {.greedy = true})), tokens_of(want));
  EXPECT_EQ(tokens_of(nn::generate(reference_model, prompt(), 4, {.greedy = true})), tokens_of(want));

  // Checkpoint: the gathered weights, saved to a file (each rank its own: ranks may not share
  // a temporary directory), load into a one-process model whose logits then match the
  // ZeRO-3 model's.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("strata-user-model-" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  checkpoint::save_safetensors(path, zero.full_parameters());
  MoEModel restored;
  restored.load_state_dict(checkpoint::load_safetensors(path).tensors);
  std::filesystem::remove(path);
  NoGradGuard no_grad;
  const Tensor tokens = batch(0, 1, 0, 1).tokens;
  expect_close({{"logits", model.forward(tokens)}}, {{"logits", restored.forward(tokens)}}, "restored logits");
}

TEST(UserModel, TensorParallelTrainsItLikeOneProcess) {
  auto& world = dist::world();
  MoEModel reference_model;
  const StateDict reference = train_one_process(reference_model, kRowsPerRank);
  auto tp = std::make_shared<parallel::TensorParallelFactory>(world);
  MoEModel model(tp);
  if (world.size() > 1) {
    const std::set<std::string> split = parallel::split_parameter_names(model);
    EXPECT_EQ(split.count("layers.0.expert1.up.weight"), 1u);
    EXPECT_EQ(split.count("layers.1.expert3.down.weight"), 1u);
    EXPECT_EQ(split.count("head.weight"), 1u);
  }
  // Every tensor-parallel rank trains on the same rows.
  optim::AdamW opt(model.parameters(), adamw());
  for (int s = 0; s < kSteps; ++s) {
    Batch b = batch(s, kRowsPerRank, 0, kRowsPerRank);
    user::loss(model, b.tokens, b.targets).backward();
    opt.step();
    opt.zero_grad();
  }
  const StateDict full = parallel::full_state_dict(model, world);
  expect_close(full, reference, "tensor parallel against one process");
  EXPECT_EQ(tokens_of(nn::generate(model, prompt(), 4, {.greedy = true})),
            tokens_of(greedy_loop(reference_model, prompt(), 4)));
  // The single-process weights load back into the split model.
  MoEModel fresh(tp);
  parallel::load_full_state_dict(fresh, full, world);
  expect_close(parallel::full_state_dict(fresh, world), full, "tensor-parallel state dict round trip");
}

TEST(UserModel, AUnitCalledWithoutHooksIsExplained) {
  auto& world = dist::world();
  MoEModel model;
  parallel::ZeroOptimizer zero(model, adamw(), world, zero3());
  model.call_layers_directly = true;
  const std::string error = error_of([&] { (void)model.forward(prompt()); });
  expect_contains(error, "unit 'layers.0' (user::MoELayer)");
  expect_contains(error, "nn::call(unit, ...)");
  expect_contains(error, "auto hooks = forward_hooks();");
  // The same model called through nn::call works.
  model.call_layers_directly = false;
  NoGradGuard no_grad;
  EXPECT_EQ(model.forward(prompt()).size(2), user::kVocab);
}

// A model that is no LanguageModel, whose forward is called directly: its root parameters are
// never gathered, and the error says how to run its hooks.
class BareModel : public nn::Module {
 public:
  BareModel() { lin_ = register_module("lin", std::make_shared<nn::Linear>(3, 3, true, user::init())); }
  Tensor forward(const Tensor& x) { return lin_->forward(x); }

 private:
  std::shared_ptr<nn::Linear> lin_;
};

TEST(UserModel, ARootCalledWithoutHooksIsExplained) {
  auto& world = dist::world();
  BareModel model;
  parallel::ZeroOptimizer zero(model, adamw(), world, {.stage = 3});
  const Tensor x = ones({2, 3}, {.dtype = DType::Float64});
  const std::string error = error_of([&] { (void)model.forward(x); });
  expect_contains(error, "parameter 'lin.");  // the op reads the bias or the weight first
  expect_contains(error, "root unit");
  expect_contains(error, "BareModel");
  expect_contains(error, "nn::LanguageModel");
  expect_contains(error, "nn::call(model, ...)");
  const Tensor y = nn::call(model, x);  // runs the root's hooks: gathered
  EXPECT_EQ(y.size(1), 3);
}

}  // namespace
}  // namespace strata::test
