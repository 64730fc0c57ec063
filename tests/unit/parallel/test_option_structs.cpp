// The public option structs of parallel/ and distributed/ take designated initialisers that
// name only some members, with no -Wmissing-field-initializers warning (an error here):
// every member has a default member initialiser.
#include <gtest/gtest.h>

#pragma GCC diagnostic error "-Wmissing-field-initializers"

#include "strata/distributed/device_mesh.h"
#include "strata/distributed/init.h"
#include "strata/nn/gpt.h"
#include "strata/nn/module_predicates.h"
#include "strata/parallel/ddp.h"
#include "strata/parallel/flat_buffer.h"
#include "strata/parallel/zero.h"

namespace strata {
namespace {

TEST(OptionStructs, DesignatedInitialisersNameAnySubset) {
  parallel::ZeroOptions zero{.stage = 2};
  EXPECT_EQ(zero.stage, 2);
  EXPECT_TRUE(zero.prefetch);
  parallel::DDPOptions ddp{.overlap = false};
  EXPECT_TRUE(ddp.average);
  parallel::ZeroMemory memory{.parameters = 4};
  EXPECT_EQ(memory.total(), 4);
  dist::InitOptions init{.select_gpu = false};
  EXPECT_EQ(init.timeout, dist::kDefaultTimeout);
  dist::MeshShape mesh{.dp = 2};
  EXPECT_EQ(mesh.pp * mesh.tp, 1);
  dist::P2POp p2p{.peer = 1};
  EXPECT_FALSE(p2p.tensor.defined());
  dist::OpCounter counter{.calls = 1};
  EXPECT_EQ(counter.bytes, 0u);
  parallel::FlatBuffer::Entry entry{.offset = 8};
  EXPECT_TRUE(entry.name.empty());
  parallel::FlatBuffer::Piece piece{.numel = 3};
  EXPECT_EQ(piece.entry, 0u);
}

// ZeRO-3's default unit is each transformer block, chosen through nn (parallel/ never
// includes gpt.h).
TEST(OptionStructs, ZeroThreeUnitsDefaultToTransformerBlocks) {
  nn::GPT model({.vocab_size = 16, .context = 4, .n_layer = 2, .n_head = 1, .n_embd = 4});
  parallel::ZeroOptions options;
  ASSERT_TRUE(options.is_unit);
  int blocks = 0;
  for (auto& [name, child] : model.named_children()) {
    EXPECT_FALSE(options.is_unit(name, *child)) << name;
    if (name != "h") continue;
    for (auto& [index, block] : child->named_children()) {
      EXPECT_TRUE(options.is_unit("h." + index, *block)) << index;
      ++blocks;
    }
  }
  EXPECT_EQ(blocks, 2);
  EXPECT_TRUE(nn::module_type_predicate<nn::Block>()("h.0", (*model.h)[0]));
  EXPECT_FALSE(nn::module_type_predicate<nn::Block>()("", model));
}

}  // namespace
}  // namespace strata
