// Module containers (Sequential, ModuleList, ModuleDict) and the tree walks: named_modules,
// apply, train()/eval() and to(dtype).
#include <gtest/gtest.h>

#include <map>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::nn;
using strata::testing::expect_error_mentions;

namespace {

std::vector<std::string> names_of(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [n, _] : named) out.push_back(n);
  return out;
}

std::vector<std::string> module_paths(Module& m) {
  std::vector<std::string> out;
  for (const auto& [path, _] : m.named_modules()) out.push_back(path);
  return out;
}

Tensor input(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {}, &g);
}

// A user module with an attention-like child list, as GPT's blocks are held.
struct Attn : Module {
  Attn() { proj = register_module("proj", std::make_shared<Linear>(4, 4)); }
  Tensor forward(const Tensor& x) { return proj->forward(x); }
  std::shared_ptr<Linear> proj;
};
struct Stack : Module {
  Stack() {
    h = register_module("h", std::make_shared<ModuleList>());
    for (int i = 0; i < 2; ++i) h->push_back(std::make_shared<Attn>());
  }
  std::shared_ptr<ModuleList> h;
};

// Float and integer buffers next to a parameter.
struct WithBuffers : Module {
  WithBuffers() {
    w = register_parameter("w", full({2}, 1.5));
    scale = register_buffer("scale", full({2}, 0.25));
    steps = register_buffer("steps", zeros({1}, {.dtype = DType::Int64}));
  }
  Tensor w, scale, steps;
};

}  // namespace

TEST(Sequential, ChainsForwardsAndNamesChildrenByIndex) {
  auto fc1 = std::make_shared<Linear>(3, 5);
  auto fc2 = std::make_shared<Linear>(5, 2);
  Sequential seq({fc1, std::make_shared<ReLU>(), fc2});
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(names_of(seq.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  Tensor x = input({4, 3}, 1);
  EXPECT_EQ(max_abs_diff(seq.forward(x), fc2->forward(relu(fc1->forward(x)))), 0.0);
  EXPECT_EQ(seq.at<Linear>(2).get(), fc2.get());
  expect_error_mentions([&] { seq.at<Linear>(1); }, {"Sequential", "entry '1'"});
  expect_error_mentions([&] { seq[3]; }, {"index 3", "size 3"});
}

TEST(Sequential, NamedEntriesNestAndForwardHooksRun) {
  auto inner = std::make_shared<Sequential>();
  inner->push_back(std::make_shared<Linear>(2, 2));
  inner->push_back(std::make_shared<Functional>([](const Tensor& x) { return mul(x, 2.0); }));
  Sequential outer;
  outer.push_back("block", inner);
  outer.push_back("act", std::make_shared<Tanh>());
  EXPECT_EQ(names_of(outer.named_parameters()), (std::vector<std::string>{"block.0.weight", "block.0.bias"}));
  int calls = 0;
  inner->register_forward_hook([&](Module&) { ++calls; });
  Tensor x = input({1, 2}, 2);
  Tensor expected = tanh(mul(inner->at<Linear>(0)->forward(x), 2.0));
  EXPECT_EQ(max_abs_diff(outer.forward(x), expected), 0.0);
  EXPECT_EQ(calls, 1);
}

TEST(ModuleList, IndexesIteratesAndNamesByIndex) {
  auto a = std::make_shared<Linear>(2, 3);
  auto b = std::make_shared<GELU>();
  ModuleList list({a, b});
  list.push_back(std::make_shared<Linear>(3, 1, /*bias=*/false));
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].get(), a.get());
  EXPECT_EQ(list.at<Linear>(2)->weight.shape(), Shape({1, 3}));
  std::vector<Module*> iterated;
  for (const auto& m : list) iterated.push_back(m.get());
  EXPECT_EQ(iterated, (std::vector<Module*>{a.get(), b.get(), list[2].get()}));
  EXPECT_EQ(names_of(list.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight"}));
  expect_error_mentions([&] { list.at<Linear>(1); }, {"ModuleList", "entry '1'"});
  expect_error_mentions([&] { list.push_back(nullptr); }, {"null module"});
}

TEST(ModuleDict, KeepsInsertionOrderAndNamesByKey) {
  ModuleDict dict({{"zeta", std::make_shared<Linear>(2, 2)}, {"alpha", std::make_shared<ReLU>()}});
  dict.insert("mid", std::make_shared<Linear>(2, 1));
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"zeta", "alpha", "mid"}));
  EXPECT_TRUE(dict.contains("alpha"));
  EXPECT_FALSE(dict.contains("beta"));
  EXPECT_EQ(names_of(dict.named_parameters()),
            (std::vector<std::string>{"zeta.weight", "zeta.bias", "mid.weight", "mid.bias"}));
  std::vector<std::string> iterated;
  for (const auto& [key, _] : dict) iterated.push_back(key);
  EXPECT_EQ(iterated, dict.keys());
  EXPECT_EQ(dict.at<Linear>("mid")->weight.shape(), Shape({1, 2}));
  expect_error_mentions([&] { dict["beta"]; }, {"no entry 'beta'"});
  expect_error_mentions([&] { dict.insert("mid", std::make_shared<ReLU>()); }, {"'mid'", "already registered"});
  expect_error_mentions([&] { dict.insert("a.b", std::make_shared<ReLU>()); }, {"'a.b'", "without '.'"});
}

TEST(NamedModules, FullDottedPathsParentsFirst) {
  Stack stack;
  EXPECT_EQ(module_paths(stack), (std::vector<std::string>{"", "h", "h.0", "h.0.proj", "h.1", "h.1.proj"}));
  EXPECT_EQ(stack.named_modules()[0].second, &stack);
  EXPECT_EQ(names_of(stack.named_parameters()),
            (std::vector<std::string>{"h.0.proj.weight", "h.0.proj.bias", "h.1.proj.weight", "h.1.proj.bias"}));
  EXPECT_EQ(stack.modules().size(), 6u);
}

TEST(NamedModules, GPTPathsMatchItsParameterNames) {
  GPT model(GPTConfig{.vocab_size = 7, .context = 4, .n_layer = 2, .n_head = 1, .n_embd = 4});
  auto paths = module_paths(model);
  std::vector<std::string> head(paths.begin(), paths.begin() + 9);
  EXPECT_EQ(head, (std::vector<std::string>{"", "wte", "wpe", "drop", "h", "h.0", "h.0.ln_1", "h.0.attn",
                                            "h.0.attn.c_attn"}));
  // Every parameter name is a module path, a dot and a name that module registered.
  const auto named = model.named_modules();
  std::map<std::string, Module*> by_path(named.begin(), named.end());
  for (const auto& [name, t] : model.named_parameters()) {
    const size_t dot = name.rfind('.');
    ASSERT_NE(dot, std::string::npos) << name;
    ASSERT_TRUE(by_path.count(name.substr(0, dot))) << name;
    bool found = false;
    for (const auto& [own, p] : by_path[name.substr(0, dot)]->named_parameters())
      found = found || (own == name.substr(dot + 1) && p.is_same(t));
    EXPECT_TRUE(found) << name;
  }
}

TEST(Apply, VisitsChildrenBeforeParentsEachOnce) {
  auto shared = std::make_shared<Linear>(2, 2);
  auto inner = std::make_shared<Sequential>(std::initializer_list<AnyModule>{std::make_shared<ReLU>(), shared});
  Sequential root({shared, inner});  // `shared` sits under two paths
  std::map<Module*, std::string> path_of;
  for (const auto& [path, m] : root.named_modules()) path_of[m] = path;
  std::vector<std::string> order;
  root.apply([&](Module& m) { order.push_back(path_of.at(&m)); });
  EXPECT_EQ(order, (std::vector<std::string>{"0", "1.0", "1", ""}));
  EXPECT_EQ(module_paths(root), (std::vector<std::string>{"", "0", "1", "1.0"}));
  // An initialiser through apply reaches every Linear.
  NoGradGuard no_grad;  // initialisers write parameters in place
  root.apply([](Module& m) {
    if (auto* lin = dynamic_cast<Linear*>(&m)) lin->weight.fill_(0.5);
  });
  EXPECT_EQ(shared->weight.to_vector<float>(), std::vector<float>(4, 0.5f));
}

TEST(TrainEval, PropagatesToEveryModule) {
  Sequential seq({std::make_shared<Linear>(4, 4), std::make_shared<Dropout>(0.5)});
  Stack stack;
  auto check_all = [](Module& m, bool training) {
    for (const auto& [path, mod] : m.named_modules()) EXPECT_EQ(mod->is_training(), training) << "'" << path << "'";
  };
  stack.eval();
  check_all(stack, false);
  stack.train();
  check_all(stack, true);
  seq.eval();
  check_all(seq, false);
  Tensor x = input({8, 4}, 3);
  Tensor y = seq.at<Linear>(0)->forward(x);
  EXPECT_EQ(max_abs_diff(seq.forward(x), y), 0.0);  // dropout is the identity in eval mode
  seq.train(true);
  EXPECT_GT(max_abs_diff(seq.forward(x), y), 0.0);
}

TEST(ModuleTo, ConvertsInPlaceKeepingIdentity) {
  Sequential seq({std::make_shared<Linear>(3, 2), std::make_shared<Tanh>()});
  auto lin = seq.at<Linear>(0);
  Tensor held = lin->weight;  // a handle taken before, as an optimizer would hold
  const std::vector<double> before = held.to_vector<double>();
  sum(seq.forward(input({2, 3}, 4))).backward();
  seq.to(DType::Float64);
  EXPECT_EQ(held.dtype(), DType::Float64);
  EXPECT_TRUE(held.is_same(lin->weight));
  EXPECT_TRUE(held.is_same(seq.named_parameters()[0].second));
  EXPECT_EQ(held.to_vector<double>(), before);
  EXPECT_TRUE(held.requires_grad());
  EXPECT_EQ(held.grad().dtype(), DType::Float64);  // gradients follow
  seq.zero_grad(/*set_to_none=*/true);
  Tensor x = input({2, 3}, 5).to(DType::Float64);
  Tensor y = seq.forward(x);
  EXPECT_EQ(y.dtype(), DType::Float64);
  sum(y).backward();  // a fresh accumulator for the new dtype
  EXPECT_EQ(lin->bias.grad().dtype(), DType::Float64);
  EXPECT_TRUE(allclose(lin->bias.grad(), sum(sub(ones_like(y), mul(y, y)), {0})));
}

// Moving to a device that is not there is refused before anything moves (on a machine
// with a GPU, tests/gpu/test_model_step_gpu.cpp moves whole models); to(cpu) is a no-op.
TEST(ModuleTo, AnUnavailableDeviceLeavesTheModuleUnchanged) {
  Sequential seq({std::make_shared<Linear>(3, 2), std::make_shared<Tanh>()});
  Tensor held = seq.at<Linear>(0)->weight;
  const std::vector<double> before = held.to_vector<double>();
  const Device missing = Device::cuda(cuda::is_built() ? cuda::device_count() : 0);
  try {
    seq.to(missing);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not available"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("left unchanged"), std::string::npos) << e.what();
  }
  for (auto& [name, t] : seq.named_parameters()) EXPECT_TRUE(t.device().is_cpu()) << name;
  seq.to(Device::cpu());
  EXPECT_TRUE(held.is_same(seq.at<Linear>(0)->weight));
  EXPECT_EQ(held.to_vector<double>(), before);
}

TEST(ModuleTo, SixteenBitParametersComputeInFloat32) {
  Linear lin(3, 2);
  Tensor expected = lin.forward(input({1, 3}, 6));
  lin.to(DType::BFloat16);
  EXPECT_EQ(lin.weight.dtype(), DType::BFloat16);
  Tensor y = lin.forward(input({1, 3}, 6));
  EXPECT_EQ(y.dtype(), DType::Float32);
  EXPECT_LT(max_abs_diff(y, expected), 0.05);
  EXPECT_GT(max_abs_diff(y, expected), 0.0);  // rounded parameters
}

TEST(ModuleTo, FloatBuffersFollowIntegerBuffersStay) {
  WithBuffers m;
  m.to(DType::Float64);
  EXPECT_EQ(m.w.dtype(), DType::Float64);
  EXPECT_EQ(m.scale.dtype(), DType::Float64);
  EXPECT_EQ(m.scale.to_vector<double>(), (std::vector<double>{0.25, 0.25}));
  EXPECT_EQ(m.steps.dtype(), DType::Int64);
}

TEST(ModuleTo, RefusesWrappedParametersAndIntegerDtypes) {
  Linear lin(2, 2);
  expect_error_mentions([&] { lin.to(DType::Int64); }, {"Module::to", "int64"});
  lin.bias.register_post_accumulate_grad_hook([](Tensor&) {});
  expect_error_mentions([&] { lin.to(DType::Float64); }, {"'bias'", "DDP or ZeRO"});
  EXPECT_EQ(lin.weight.dtype(), DType::Float32);  // nothing changed, not even the checked-first weight
}
