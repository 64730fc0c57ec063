#pragma once
// A DataLoader over a map-style dataset (torch.utils.data.DataLoader with a
// DistributedSampler): each rank's batches come from the rank-aware BatchSampler
// (loader.h), so W ranks with batch B see disjoint slices of the global batch W * B that one
// rank with batch W * B sees; a collate function joins a batch's examples (default: stack).
//
// prefetch = N > 0 makes up to N batches ahead on one background thread. The batches and
// their order are the same with and without prefetch (one thread makes them in order). The
// thread stops, and is joined, when the epoch ends, when the consumer drops the stream
// early, and on an error: an exception from the dataset or the collate function reaches the
// consumer at that batch's place in the order, as a strata::Error naming the batch, the
// example and the original message (the original exception is nested in it:
// std::rethrow_if_nested). With prefetch the dataset's get and the collate function run on
// the background thread (one call at a time): they must not share unguarded state with the
// training thread (draw randomness from a Generator of their own, keyed by the index).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "strata/data/loader.h"
#include "strata/tensor/tensor.h"

namespace strata::data {

// One example's fields, or one batch's: e.g. {features, label}.
using Fields = std::vector<Tensor>;

// A map-style dataset: `size` examples, `get(i)` returns example i (0 <= i < size).
struct MapDataset {
  int64_t size = 0;
  std::function<Fields(int64_t index)> get;
};

// Joins a batch's examples (in the sampler's order) into one batch.
using CollateFn = std::function<Fields(std::vector<Fields>&& examples)>;

// The default collate: field f of the batch is stack(field f of every example, 0); every
// example must have the same number of fields, and a field the same shape and dtype.
Fields stack_collate(std::vector<Fields>&& examples);

struct DataLoaderOptions {
  int64_t batch_size = 1;  // per rank
  bool shuffle = true;
  uint64_t seed = 0;
  // true: the N % (batch_size * world_size) examples left over after the last full global
  // batch are skipped (a different set each epoch when shuffled). false: they form one more,
  // smaller batch per rank, ceil(leftover / world_size) examples each; as with torch's
  // DistributedSampler, ranks short of examples repeat ones from the start of the epoch's
  // order, so every rank runs the same number of steps of the same size.
  bool drop_last = true;
  int rank = 0;
  int world_size = 1;
  int prefetch = 0;        // batches made ahead on a background thread; 0: on the caller's
  CollateFn collate = {};  // stack_collate when empty
};

class BatchStream;

class DataLoader {
 public:
  DataLoader(MapDataset dataset, DataLoaderOptions options);

  // Batches per epoch, the same on every rank.
  int64_t size() const;
  const BatchSampler& sampler() const;
  // This rank's example indices for batch `step` of epoch `epoch` (what the stream fetches).
  std::vector<int64_t> batch_indices(int64_t epoch, int64_t step) const;

  // The epoch that begin() runs, as DistributedSampler.set_epoch: call it before each epoch
  // so that shuffling differs between epochs.
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }

  // The batches of `epoch` from `first_step` on (resuming mid-epoch). The stream keeps what
  // it needs: it may outlive this loader.
  BatchStream stream(int64_t epoch, int64_t first_step = 0) const;

  // for (data::Fields& batch : loader): one epoch, the one set_epoch chose.
  class Iterator;
  Iterator begin() const;
  Iterator end() const;

  struct Source;  // what a stream reads: the dataset, the sampler, the options

 private:
  std::shared_ptr<const Source> source_;
  int64_t epoch_ = 0;
};

// One pass over a loader's batches. Move-only; destroying it stops and joins its thread.
class BatchStream {
 public:
  BatchStream(BatchStream&&) noexcept;
  BatchStream& operator=(BatchStream&&) noexcept;
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;
  ~BatchStream();

  // The next batch, or nullopt after the last one (and after an error was thrown).
  std::optional<Fields> next();

  class State;  // the producer thread and its queue

 private:
  friend class DataLoader;
  explicit BatchStream(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class DataLoader::Iterator {
 public:
  using value_type = Fields;
  using difference_type = std::ptrdiff_t;
  Iterator() = default;  // end
  Fields& operator*() const { return *current_; }
  Fields* operator->() const { return &*current_; }
  Iterator& operator++();
  bool operator==(const Iterator& other) const { return at_end() && other.at_end(); }

 private:
  friend class DataLoader;
  explicit Iterator(BatchStream stream);
  bool at_end() const { return current_ == nullptr; }
  std::shared_ptr<BatchStream> stream_;
  std::shared_ptr<Fields> current_;
};

}  // namespace strata::data
