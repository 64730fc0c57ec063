// data::DataLoader: batches in the sampler's order, with and without prefetch, ranks'
// disjoint slices, drop_last, early stop (under a timeout), errors reaching the consumer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>

#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using namespace strata::data;
using strata::testing::expect_contains;
using strata::testing::expect_error_mentions;

namespace {

// Example i: {i as an int64 scalar, [i, -i] as float32}; counts the calls to get.
MapDataset numbers(int64_t size, const std::shared_ptr<std::atomic<int64_t>>& calls = nullptr,
                   std::chrono::milliseconds delay = {}) {
  return {.size = size, .get = [calls, delay](int64_t i) {
            if (calls) ++*calls;
            if (delay.count() > 0) std::this_thread::sleep_for(delay);
            const auto x = static_cast<float>(i);
            return Fields{from_vector(std::vector<int64_t>{i}, {}), from_vector(std::vector<float>{x, -x}, {2})};
          }};
}

std::vector<int64_t> ids(const Fields& batch) { return batch.at(0).to_vector<int64_t>(); }

// Every batch of one epoch, as example indices (checking the second field matches).
std::vector<std::vector<int64_t>> drain(BatchStream stream) {
  std::vector<std::vector<int64_t>> out;
  while (auto batch = stream.next()) {
    EXPECT_EQ(batch->at(1).shape(), Shape({batch->at(0).size(0), 2}));
    const auto f = batch->at(1).to_vector<float>();
    const auto i = ids(*batch);
    for (size_t k = 0; k < i.size(); ++k) EXPECT_EQ(f[2 * k], static_cast<float>(i[k]));
    out.push_back(i);
  }
  return out;
}

// Runs f on its own thread; false when it has not returned within `limit` (the thread is
// then left behind, so that a hang fails the test instead of stalling the suite).
bool finishes_within(std::function<void()> f, std::chrono::seconds limit) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([f = std::move(f), done] {
    try {
      f();
    } catch (...) {
    }
    done->set_value();
  }).detach();
  return finished.wait_for(limit) == std::future_status::ready;
}

}  // namespace

TEST(DataLoader, BatchesFollowTheSamplerInOrder) {
  DataLoader loader(numbers(23), {.batch_size = 4, .seed = 9});
  EXPECT_EQ(loader.size(), 5);  // 23 / 4, the 3 left over dropped
  for (int64_t epoch : {0, 1}) {
    const auto batches = drain(loader.stream(epoch));
    ASSERT_EQ(static_cast<int64_t>(batches.size()), loader.size());
    for (int64_t s = 0; s < loader.size(); ++s) {
      EXPECT_EQ(batches[static_cast<size_t>(s)], loader.sampler().indices_at({epoch, s})) << epoch << " " << s;
    }
  }
  EXPECT_NE(drain(loader.stream(0)), drain(loader.stream(1)));  // shuffled per epoch
  // Resuming mid-epoch starts at that batch.
  EXPECT_EQ(drain(loader.stream(1, 3)).front(), loader.sampler().indices_at({1, 3}));
}

TEST(DataLoader, RangeForRunsTheEpochSetEpochChose) {
  DataLoader loader(numbers(12), {.batch_size = 3, .seed = 4, .prefetch = 2});
  loader.set_epoch(2);
  std::vector<std::vector<int64_t>> seen;
  for (Fields& batch : loader) seen.push_back(ids(batch));
  EXPECT_EQ(seen, drain(loader.stream(2)));
  EXPECT_NE(seen, drain(loader.stream(0)));
}

TEST(DataLoader, PrefetchDoesNotChangeTheBatches) {
  auto run = [](int prefetch) {
    DataLoader loader(numbers(50), {.batch_size = 6, .seed = 21, .drop_last = false, .prefetch = prefetch});
    std::vector<std::vector<int64_t>> all;
    for (int64_t epoch : {0, 1, 2}) {
      for (auto& b : drain(loader.stream(epoch))) all.push_back(b);
    }
    return all;
  };
  const auto inline_batches = run(0);
  EXPECT_EQ(inline_batches.size(), 3U * 9U);
  for (int prefetch : {1, 2, 8, 100}) EXPECT_EQ(run(prefetch), inline_batches) << "prefetch " << prefetch;
}

TEST(DataLoader, KeepLastMakesOneSmallerBatch) {
  DataLoader loader(numbers(23), {.batch_size = 4, .shuffle = false, .drop_last = false});
  const auto batches = drain(loader.stream(0));
  ASSERT_EQ(batches.size(), 6U);
  EXPECT_EQ(batches.back(), (std::vector<int64_t>{20, 21, 22}));
  std::multiset<int64_t> seen;
  for (const auto& b : batches) seen.insert(b.begin(), b.end());
  EXPECT_EQ(seen.size(), 23U);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 23U);  // each example once
}

TEST(DataLoader, TwoRanksSeeDisjointSlicesOfTheGlobalBatch) {
  for (const bool shuffle : {true, false}) {
    DataLoaderOptions o{.batch_size = 3, .shuffle = shuffle, .seed = 5, .rank = 0, .world_size = 2};
    DataLoader rank0(numbers(20), o);
    o.rank = 1;
    DataLoader rank1(numbers(20), o);
    const auto a = drain(rank0.stream(1)), b = drain(rank1.stream(1));
    ASSERT_EQ(a.size(), 3U);
    ASSERT_EQ(b.size(), a.size());
    std::set<int64_t> all;
    for (size_t s = 0; s < a.size(); ++s) {
      std::vector<int64_t> global = a[s];
      global.insert(global.end(), b[s].begin(), b[s].end());
      EXPECT_EQ(global, rank0.sampler().global_indices_at({1, static_cast<int64_t>(s)}));
      all.insert(global.begin(), global.end());
    }
    EXPECT_EQ(all.size(), 18U) << "the ranks' batches overlap";
  }
}

TEST(DataLoader, KeepLastOnTwoRanksPadsFromTheEpochsStart) {
  // 21 examples, global batch 6: 3 full steps, 3 left over -> 2 per rank, rank 1 wraps once.
  DataLoaderOptions o{.batch_size = 3, .shuffle = true, .seed = 8, .drop_last = false, .world_size = 2};
  DataLoader rank0(numbers(21), o);
  o.rank = 1;
  DataLoader rank1(numbers(21), o);
  ASSERT_EQ(rank0.size(), 4);
  ASSERT_EQ(rank1.size(), 4);
  const BatchSampler& s = rank0.sampler();
  EXPECT_EQ(rank0.batch_indices(2, 3), (std::vector<int64_t>{s.example_at(2, 18), s.example_at(2, 19)}));
  EXPECT_EQ(rank1.batch_indices(2, 3), (std::vector<int64_t>{s.example_at(2, 20), s.example_at(2, 0)}));
  expect_error_mentions([&] { rank0.batch_indices(2, 4); }, {"batch 4", "[0, 4)"});
}

TEST(DataLoader, StoppingEarlyReturnsPromptly) {
  auto calls = std::make_shared<std::atomic<int64_t>>(0);
  // A slow dataset and a consumer that leaves after one batch, the producer blocked on a full
  // queue or inside get: destroying the stream must stop and join it.
  const bool finished = finishes_within(
      [calls] {
        DataLoader loader(numbers(1000, calls, std::chrono::milliseconds(2)), {.batch_size = 1, .prefetch = 2});
        for (Fields& batch : loader) {
          (void)batch;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the queue fill
          break;
        }
        BatchStream stream = loader.stream(1);
        (void)stream.next();  // and leave at once, the producer inside get
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(finished) << "a DataLoader's prefetch thread did not stop";
  // Each stream made at most the one batch taken, `prefetch` queued and one in progress.
  EXPECT_LE(calls->load(), 2 * (1 + 2 + 1));
  EXPECT_GE(calls->load(), 2);
}

TEST(DataLoader, DatasetErrorsReachTheConsumerInOrder) {
  for (const int prefetch : {0, 3}) {
    MapDataset data = numbers(16);
    auto inner = data.get;
    data.get = [inner](int64_t i) {
      if (i == 7) throw std::runtime_error("bad record 7");
      return inner(i);
    };
    DataLoader loader(std::move(data), {.batch_size = 2, .shuffle = false, .prefetch = prefetch});
    BatchStream stream = loader.stream(0);
    for (int64_t s = 0; s < 3; ++s) EXPECT_EQ(ids(*stream.next()), (std::vector<int64_t>{2 * s, 2 * s + 1}));
    try {
      (void)stream.next();
      ADD_FAILURE() << "no error for the failing example";
    } catch (const Error& e) {
      for (const char* part : {"bad record 7", "example 7", "batch 3 of epoch 0", "the dataset failed"})
        expect_contains(e.what(), part);
      EXPECT_THROW(std::rethrow_if_nested(e), std::runtime_error);  // the original, nested
    }
    EXPECT_FALSE(stream.next().has_value()) << "prefetch " << prefetch;
  }
}

TEST(DataLoader, CollateErrorsAndCustomCollate) {
  for (const int prefetch : {0, 2}) {
    DataLoader summed(
        numbers(8), {.batch_size = 4, .shuffle = false, .prefetch = prefetch, .collate = [](std::vector<Fields>&& ex) {
                       int64_t total = 0;
                       for (const Fields& f : ex) total += f[0].to_vector<int64_t>()[0];
                       return Fields{from_vector(std::vector<int64_t>{total}, {1})};
                     }});
    BatchStream s = summed.stream(0);
    EXPECT_EQ(s.next()->at(0).to_vector<int64_t>(), (std::vector<int64_t>{0 + 1 + 2 + 3}));
    EXPECT_EQ(s.next()->at(0).to_vector<int64_t>(), (std::vector<int64_t>{4 + 5 + 6 + 7}));
    EXPECT_FALSE(s.next().has_value());

    // The default collate refuses examples of different shapes, naming them.
    MapDataset ragged{.size = 4, .get = [](int64_t i) { return Fields{zeros({i + 1})}; }};
    DataLoader loader(ragged, {.batch_size = 2, .shuffle = false, .prefetch = prefetch});
    expect_error_mentions([&] { drain(loader.stream(0)); },
                          {"batch 0 of epoch 0", "collate failed", "example 1 has shape [2]", "[1]"});
  }
}

TEST(DataLoader, BadOptionsAreNamed) {
  expect_error_mentions([] { DataLoader(numbers(4), {.prefetch = -1}); }, {"prefetch", "-1"});
  expect_error_mentions([] { DataLoader(MapDataset{.size = 4, .get = {}}, {}); }, {"no get function"});
  expect_error_mentions([] { DataLoader(numbers(4), {.batch_size = 3, .world_size = 2}); },
                        {"global batch of 3 x 2", "4 examples"});
  DataLoader loader(numbers(4), {});
  expect_error_mentions([&] { loader.stream(0, 5); }, {"first batch 5", "[0, 4]"});
  expect_error_mentions([&] { loader.set_epoch(-1); }, {"epoch must be >= 0"});
}
