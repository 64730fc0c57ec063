// ZeRO-3 keeps a unit's full parameters only while the unit runs; reading one anywhere else
// is an error that names the parameter, its unit and where it can be read instead.
#include <string>

#include "distributed/zero_test_util.h"

namespace strata::test {
namespace {

void expect_names(const std::string& error, const std::string& param, const std::string& unit) {
  EXPECT_NE(error.find("parameter '" + param + "'"), std::string::npos) << error;
  EXPECT_NE(error.find(unit), std::string::npos) << error;
  EXPECT_NE(error.find("ZeroOptimizer::full_parameters()"), std::string::npos) << error;
}

TEST(ZeroStage3, ReadingAParameterOutsideItsUnitNamesIt) {
  auto& world = dist::world();
  nn::GPT model(tiny_gpt(DType::Float32));
  ZeroOptimizer zero(model, sgd(), world, zero_options(3));
  auto& block1 = model.block(1);
  Tensor c_attn = model.block(0).attn->c_attn->weight;
  expect_names(error_of([&] { (void)c_attn.to_vector<float>(); }), "h.0.attn.c_attn.weight", "unit 'h.0'");
  // A view inside a parameter (not at its first element) still finds it.
  Tensor bias = block1.mlp->c_fc->bias;
  expect_names(error_of([&] { (void)bias.select(0, 5).item(); }), "h.1.mlp.c_fc.bias", "unit 'h.1'");
  expect_names(error_of([&] { (void)model.wte->weight.to_vector<float>(); }), "wte.weight", "root unit");
  {
    auto guard = zero.gathered_parameters();
    EXPECT_EQ(bias.to_vector<float>().size(), static_cast<size_t>(bias.numel()));
  }
  // After a training step the units are freed again, with the same error.
  Batch mine = rank_slice(global_batch(0, world.size() * kZeroPerRank, model.config()), world.rank(), kZeroPerRank);
  model.loss(mine.inputs, mine.targets).backward();
  zero.step();
  expect_names(error_of([&] { (void)block1.ln_2->weight.to_vector<float>(); }), "h.1.ln_2.weight", "unit 'h.1'");
  EXPECT_EQ(zero.full_parameters().count("h.1.ln_2.weight"), 1u);
}

}  // namespace
}  // namespace strata::test
