// Pipeline stages without a process group: a model part built from its ModelPart holds
// exactly the whole model's parameters of those pieces (names and values), parameter counts
// from the config match the built model, and partitions balance and refuse bad input.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

#include "strata/parallel/pipeline_partition.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using parallel::PipelinePartition;

namespace {

nn::GPTConfig gpt_config() { return {.vocab_size = 40, .context = 16, .n_layer = 5, .n_head = 2, .n_embd = 16}; }
nn::LlamaConfig llama_config() {
  return {.vocab_size = 40,
          .context = 16,
          .n_layer = 5,
          .n_head = 4,
          .n_kv_head = 2,
          .n_embd = 16,
          .intermediate_size = 24};
}

std::unique_ptr<nn::CausalLM> build(const std::string& family, nn::ModelPart part = {}) {
  if (family == "gpt") return std::make_unique<nn::GPT>(gpt_config(), nullptr, std::move(part));
  return std::make_unique<nn::Llama>(llama_config(), nullptr, std::move(part));
}

nn::ParameterCounts counts_of(const std::string& family) {
  return family == "gpt" ? nn::parameter_counts(gpt_config()) : nn::parameter_counts(llama_config());
}

std::map<std::string, Tensor> params_of(const nn::Module& m) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : m.named_parameters()) out[name] = t;
  return out;
}

class ModelParts : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(ModelParts, EveryStageHoldsTheWholeModelsPiecesBitForBit) {
  auto whole = build(GetParam());
  const auto reference = params_of(*whole);
  const PipelinePartition partition{{{0, 1}, {2}, {3, 4}}};
  std::set<std::string> seen;
  for (int rank = 0; rank < 3; ++rank) {
    auto part = build(GetParam(), parallel::stage_part(partition, 3, rank));
    EXPECT_FALSE(part->is_whole());
    for (const auto& [name, t] : params_of(*part)) {
      ASSERT_TRUE(reference.count(name)) << "stage " << rank << " has '" << name << "', which the whole model lacks";
      EXPECT_EQ(max_abs_diff(t, reference.at(name)), 0.0) << name << " on stage " << rank;
      seen.insert(name);
    }
  }
  EXPECT_EQ(seen.size(), reference.size());  // nothing of the whole model is left out
}

TEST_P(ModelParts, InterleavedChunksHoldNonConsecutiveBlocksUnderTheirOwnNames) {
  auto whole = build(GetParam());
  const auto reference = params_of(*whole);
  // 2 ranks x 2 chunks: rank 1 holds stage 1 ([2]) and stage 3 ([4]).
  const PipelinePartition partition{{{0, 1}, {2}, {3}, {4}}};
  auto part = build(GetParam(), parallel::stage_part(partition, 2, 1));
  EXPECT_EQ(*part->part().blocks, (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(part->has_block(4));
  EXPECT_FALSE(part->has_block(3));
  const std::string block = GetParam() == "gpt" ? "h." : "layers.";
  int from_block_2 = 0, from_block_4 = 0;
  for (const auto& [name, t] : params_of(*part)) {
    EXPECT_EQ(max_abs_diff(t, reference.at(name)), 0.0) << name;
    from_block_2 += name.rfind(block + "2.", 0) == 0;
    from_block_4 += name.rfind(block + "4.", 0) == 0;
  }
  EXPECT_GT(from_block_2, 0);
  EXPECT_EQ(from_block_2, from_block_4);
}

TEST_P(ModelParts, ParameterCountsFromTheConfigMatchTheBuiltPieces) {
  const nn::ParameterCounts c = counts_of(GetParam());
  const int64_t L = 5;
  auto only = [&](bool embedding, std::vector<int64_t> blocks, bool head) {
    return build(GetParam(), {.embedding = embedding, .blocks = std::move(blocks), .head = head})->num_parameters();
  };
  EXPECT_EQ(only(true, {}, false), c.embedding);
  EXPECT_EQ(only(false, {3}, false), c.block);
  EXPECT_EQ(only(false, {}, true), c.head);
  const int64_t tied = GetParam() == "gpt" ? gpt_config().vocab_size * gpt_config().n_embd : 0;
  EXPECT_EQ(build(GetParam())->num_parameters(), c.embedding + L * c.block + c.head - tied);
}

TEST_P(ModelParts, APartRefusesToRunAsAWholeModel) {
  auto part = build(GetParam(), {.embedding = true, .blocks = std::vector<int64_t>{0, 1}, .head = false});
  Tensor tokens = zeros({1, 4}, {.dtype = DType::Int64});
  strata::testing::expect_contains(strata::testing::error_of([&] { part->loss(tokens, tokens); }),
                                   "part of the layers");
  strata::testing::expect_contains(strata::testing::error_of([&] {
                                     part->head(zeros({1, 4, 16}));
                                   }),
                                   "does not hold the head");
  auto middle = build(GetParam(), {.embedding = false, .blocks = std::vector<int64_t>{2}, .head = false});
  strata::testing::expect_contains(strata::testing::error_of([&] {
                                     middle->embed(tokens, {0, 4});
                                   }),
                                   "does not hold the embedding");
  strata::testing::expect_contains(strata::testing::error_of([&] {
                                     middle->run_blocks(std::vector<int64_t>{3}, zeros({1, 4, 16}), {0, 4});
                                   }),
                                   "block 3 is not in this part");
  strata::testing::expect_contains(strata::testing::error_of([&] {
                                     build(GetParam(), {.blocks = std::vector<int64_t>{0, 7}});
                                   }),
                                   "block 7 does not exist");
  strata::testing::expect_contains(strata::testing::error_of([&] {
                                     build(GetParam(), {.blocks = std::vector<int64_t>{2, 1}});
                                   }),
                                   "ascending");
}

INSTANTIATE_TEST_SUITE_P(Families, ModelParts, ::testing::Values("gpt", "llama"));

TEST(PipelinePartition, BalancesByParameterCount) {
  // Equal blocks and nothing else: an even split.
  const nn::ParameterCounts flat{.embedding = 0, .block = 10, .head = 0};
  EXPECT_EQ(parallel::balanced_partition(flat, 8, 4).to_string(), "[0-1] [2-3] [4-5] [6-7]");
  EXPECT_EQ(parallel::balanced_partition(flat, 7, 2).stage_blocks[0].size() +
                parallel::balanced_partition(flat, 7, 2).stage_blocks[1].size(),
            7u);
  // A heavy embedding (a large vocabulary): the first stage takes fewer blocks.
  const nn::ParameterCounts heavy{.embedding = 30, .block = 10, .head = 5};
  EXPECT_EQ(parallel::balanced_partition(heavy, 8, 2).to_string(), "[0-2] [3-7]");
  // Interleaved: p*v stages; v must divide the blocks.
  EXPECT_EQ(parallel::balanced_partition(flat, 8, 2, 2).num_stages(), 4);
  strata::testing::expect_contains(strata::testing::error_of([&] { parallel::balanced_partition(flat, 9, 2, 2); }),
                                   "2 chunks per rank (interleaved) must divide the 9 blocks");
  strata::testing::expect_contains(
      strata::testing::error_of([&] { parallel::balanced_partition(flat, 3, 4); }),
      "4 stages (4 ranks x 1 chunks) need at least one block each, but the model has 3 blocks");
}

TEST(PipelinePartition, RefusesPartitionsThatMissOrRepeatBlocks) {
  auto error = [](PipelinePartition p, int ranks = 2, int chunks = 1) {
    return strata::testing::error_of([&] { parallel::check_partition(p, 4, ranks, chunks); });
  };
  EXPECT_NO_THROW(parallel::check_partition({{{0, 1}, {2, 3}}}, 4, 2));
  strata::testing::expect_contains(error({{{0, 1}, {1, 2, 3}}}), "block 1 is repeated or out of order in stage 1");
  strata::testing::expect_contains(error({{{0}, {2, 3}}}), "block 1 is in no stage");
  strata::testing::expect_contains(error({{{0, 1}, {2}}}), "blocks 3 to 3 are in no stage");
  strata::testing::expect_contains(error({{{0, 1, 2, 3}, {}}}), "stage 1 holds no block");
  strata::testing::expect_contains(error({{{0, 1}, {2, 3, 4}}}), "block 4, which does not exist");
  strata::testing::expect_contains(error({{{0, 1}, {2, 3}}}, 2, 2), "2 stages given for 2 ranks x 2 chunks");
}
