// A failed typed access to a container entry names both types readably (demangled, e.g.
// strata::nn::Linear, never the mangled N6strata2nn6LinearE).
#include <gtest/gtest.h>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::testing::error_of;
using strata::testing::expect_contains;

namespace {

void expect_readable(const std::string& msg) {
  EXPECT_EQ(msg.find("N6strata"), std::string::npos) << "mangled name in: " << msg;
}

TEST(ModuleCastMessages, SequentialNamesTheEntryTheActualAndTheWantedType) {
  nn::Sequential seq{std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::ReLU>()};
  const std::string msg = error_of([&] { (void)seq.at<nn::Linear>(1); });
  expect_contains(msg, "Sequential: entry '1' is a strata::nn::ReLU, not a strata::nn::Linear");
  expect_readable(msg);
  EXPECT_NE(seq.at<nn::Linear>(0), nullptr);
}

TEST(ModuleCastMessages, ModuleDictAndBlockListToo) {
  nn::ModuleDict dict;
  dict.insert("proj", std::make_shared<nn::Linear>(2, 2));
  const std::string msg = error_of([&] { (void)dict.at<nn::LayerNorm>("proj"); });
  expect_contains(msg, "entry 'proj' is a strata::nn::Linear, not a strata::nn::LayerNorm");
  expect_readable(msg);

  nn::GPT gpt({.vocab_size = 8, .context = 4, .n_layer = 1, .n_head = 1, .n_embd = 4});
  const std::string block = error_of([&] { (void)gpt.blocks().at<nn::LlamaDecoderLayer>(0); });
  expect_contains(block, "BlockList: block 0 is a strata::nn::Block");
  expect_contains(block, ", not a strata::nn::LlamaDecoderLayer");
  expect_readable(block);
}

TEST(ModuleCastMessages, DemangledNameOfAType) {
  EXPECT_EQ(demangled_name(typeid(nn::Linear)), "strata::nn::Linear");
  const nn::Module& m = nn::ReLU();
  EXPECT_EQ(dynamic_type_name(m), "strata::nn::ReLU");
}

}  // namespace
