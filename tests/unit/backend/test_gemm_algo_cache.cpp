// The cache of cuBLASLt algorithm choices (src/backend/gemm_algo_cache.h), on the CPU: a
// choice is made once per distinct problem, every field the choice depends on tells problems
// apart, the offsets (which only move pointers) do not, the cache stays bounded, and threads
// racing on a new key all get the stored answer.
#include "backend/gemm_algo_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace strata {
namespace {

using gemm::AlgoAlignments;
using gemm::AlgoCache;
using gemm::AlgoKey;
using gemm::AlgoTypes;
using gemm::CublasCall;

CublasCall sample_call() {
  CublasCall c;
  c.m = 64;
  c.n = 48;
  c.k = 32;
  c.a = {true, 32, 64, 40};
  c.b = {false, 32, 48, 36};
  c.ldd = 72;
  c.batch = 3;
  c.stride_a = 4096;
  c.stride_b = 2048;
  c.stride_d = 8192;
  c.offset_a = 5;
  c.offset_b = 7;
  c.offset_d = 11;
  return c;
}

const AlgoTypes kTypes{14, 0, 68};
const AlgoAlignments kAlign{256, 128, 64, 0};

TEST(GemmAlgoCache, ChoosesOncePerProblem) {
  AlgoCache<int> cache;
  int chosen = 0;
  const AlgoKey key = gemm::algo_key(0, kTypes, sample_call(), kAlign);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(cache.find_or_choose(key, [&] { return ++chosen; }), 1);
  EXPECT_EQ(chosen, 1);
  EXPECT_EQ(cache.hits(), 4u);
  EXPECT_EQ(cache.misses(), 1u);
}

// Changing any one field the algorithm depends on must give a new key; changing only the
// offsets must not.
TEST(GemmAlgoCache, EveryFieldTellsProblemsApart) {
  const CublasCall base = sample_call();
  const AlgoKey k0 = gemm::algo_key(0, kTypes, base, kAlign);
  std::vector<AlgoKey> variants;
  variants.push_back(gemm::algo_key(1, kTypes, base, kAlign));
  variants.push_back(gemm::algo_key(0, {15, 0, 68}, base, kAlign));
  variants.push_back(gemm::algo_key(0, {14, 1, 68}, base, kAlign));
  variants.push_back(gemm::algo_key(0, {14, 0, 77}, base, kAlign));
  const auto with = [&](auto edit) {
    CublasCall c = base;
    edit(c);
    return gemm::algo_key(0, kTypes, c, kAlign);
  };
  variants.push_back(with([](CublasCall& c) { c.m = 65; }));
  variants.push_back(with([](CublasCall& c) { c.n = 49; }));
  variants.push_back(with([](CublasCall& c) { c.k = 33; }));
  variants.push_back(with([](CublasCall& c) { c.a.trans = false; }));
  variants.push_back(with([](CublasCall& c) { c.a.rows = 33; }));
  variants.push_back(with([](CublasCall& c) { c.a.cols = 65; }));
  variants.push_back(with([](CublasCall& c) { c.a.ld = 41; }));
  variants.push_back(with([](CublasCall& c) { c.b.trans = true; }));
  variants.push_back(with([](CublasCall& c) { c.b.rows = 31; }));
  variants.push_back(with([](CublasCall& c) { c.b.cols = 47; }));
  variants.push_back(with([](CublasCall& c) { c.b.ld = 37; }));
  variants.push_back(with([](CublasCall& c) { c.ldd = 73; }));
  variants.push_back(with([](CublasCall& c) { c.batch = 2; }));
  variants.push_back(with([](CublasCall& c) { c.stride_a = 4097; }));
  variants.push_back(with([](CublasCall& c) { c.stride_b = 2049; }));
  variants.push_back(with([](CublasCall& c) { c.stride_d = 8193; }));
  variants.push_back(with([](CublasCall& c) { c.accumulate = true; }));
  variants.push_back(gemm::algo_key(0, kTypes, base, {128, 128, 64, 0}));
  variants.push_back(gemm::algo_key(0, kTypes, base, {256, 64, 64, 0}));
  variants.push_back(gemm::algo_key(0, kTypes, base, {256, 128, 32, 0}));
  variants.push_back(gemm::algo_key(0, kTypes, base, {256, 128, 64, 16}));
  // One variant per field of the key.
  EXPECT_EQ(variants.size(), static_cast<size_t>(AlgoKey::kFields));
  for (size_t i = 0; i < variants.size(); ++i) {
    EXPECT_FALSE(variants[i] == k0) << "variant " << i;
    for (size_t j = i + 1; j < variants.size(); ++j) EXPECT_FALSE(variants[i] == variants[j]) << i << " " << j;
  }
  EXPECT_EQ(with([](CublasCall& c) {
              c.offset_a = 1000;
              c.offset_b = 2000;
              c.offset_d = 3000;
            }),
            k0);

  AlgoCache<size_t> cache;
  for (size_t i = 0; i < variants.size(); ++i) EXPECT_EQ(cache.find_or_choose(variants[i], [&] { return i; }), i);
  EXPECT_EQ(cache.size(), variants.size());
  for (size_t i = 0; i < variants.size(); ++i)
    EXPECT_EQ(cache.find_or_choose(variants[i], [] { return size_t{999}; }), i);
}

TEST(GemmAlgoCache, StaysBounded) {
  AlgoCache<int> cache(4);
  CublasCall c = sample_call();
  for (int i = 0; i < 10; ++i) {
    c.m = 100 + i;
    (void)cache.find_or_choose(gemm::algo_key(0, kTypes, c, kAlign), [&] { return i; });
    EXPECT_LE(cache.size(), 4u);
  }
  EXPECT_EQ(cache.misses(), 10u);
}

TEST(GemmAlgoCache, RacingThreadsGetTheStoredChoice) {
  AlgoCache<int> cache;
  const AlgoKey key = gemm::algo_key(0, kTypes, sample_call(), kAlign);
  std::atomic<int> next{0};
  std::vector<int> got(8, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] { got[t] = cache.find_or_choose(key, [&] { return next++; }); });
  for (auto& th : threads) th.join();
  const int stored = cache.find_or_choose(key, [] { return -2; });
  for (int g : got) EXPECT_EQ(g, stored);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace strata
