// strata/core/hash.h: the published FNV-1a 64-bit values.
#include <gtest/gtest.h>

#include <vector>

#include "strata/core/hash.h"

namespace strata {
namespace {

// Published FNV-1a 64 test vectors.
TEST(Hash, Fnv1aOfBytesKeepsItsValues) {
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ull);
}

TEST(Hash, Fnv1aContinuesAnEarlierHash) { EXPECT_EQ(fnv1a("bar", fnv1a("foo")), fnv1a("foobar")); }

// Rank lists: each int is one 32-bit word (the value the process groups' split check has
// always used), so {1} differs from the byte-wise hash of its four bytes.
TEST(Hash, WordsOfIntsMixWholeWords) {
  const std::vector<int> ranks{0, 2, 5};
  uint64_t h = kFnv1aOffset;
  for (int r : ranks) h = (h ^ static_cast<uint64_t>(static_cast<uint32_t>(r))) * kFnv1aPrime;
  EXPECT_EQ(fnv1a_words(std::span<const int>(ranks)), h);
  const std::vector<int> negative{-1};
  EXPECT_EQ(fnv1a_words(std::span<const int>(negative)), (kFnv1aOffset ^ 0xffffffffull) * kFnv1aPrime);
}

TEST(Hash, WordsOfHashesCombineInOrder) {
  const std::vector<uint64_t> parts{fnv1a("a"), fnv1a("b")};
  const std::vector<uint64_t> swapped{fnv1a("b"), fnv1a("a")};
  EXPECT_EQ(fnv1a_words(std::span<const uint64_t>(parts)), fnv1a_mix(fnv1a_mix(kFnv1aOffset, parts[0]), parts[1]));
  EXPECT_NE(fnv1a_words(std::span<const uint64_t>(parts)), fnv1a_words(std::span<const uint64_t>(swapped)));
}

}  // namespace
}  // namespace strata
