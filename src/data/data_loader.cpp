#include "strata/data/data_loader.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <variant>

#include "strata/core/error.h"
#include "strata/ops/shape_ops.h"

namespace strata::data {

struct DataLoader::Source {
  MapDataset dataset;
  DataLoaderOptions options;
  BatchSampler sampler;

  int64_t full_steps() const { return sampler.steps_per_epoch(); }
  int64_t leftover() const { return dataset.size - full_steps() * sampler.global_batch_size(); }
  int64_t steps() const { return full_steps() + (!options.drop_last && leftover() > 0 ? 1 : 0); }

  // The last, partial step when drop_last is off: the leftover positions cut into
  // world_size runs of ceil(leftover / world_size); a run past the end of the epoch's order
  // wraps to its start (DistributedSampler's padding).
  std::vector<int64_t> tail_indices(int64_t epoch) const {
    const int64_t n = dataset.size, world = options.world_size;
    const int64_t per_rank = (leftover() + world - 1) / world;
    const int64_t first = full_steps() * sampler.global_batch_size() + options.rank * per_rank;
    std::vector<int64_t> out(static_cast<size_t>(per_rank));
    for (int64_t i = 0; i < per_rank; ++i) out[static_cast<size_t>(i)] = sampler.example_at(epoch, (first + i) % n);
    return out;
  }

  std::vector<int64_t> indices(int64_t epoch, int64_t step) const {
    STRATA_CHECK(epoch >= 0 && step >= 0 && step < steps(), "DataLoader: batch ", step, " of epoch ", epoch,
                 " does not exist: epoch must be >= 0 and batch in [0, ", steps(), ")");
    return step < full_steps() ? sampler.indices_at({epoch, step}) : tail_indices(epoch);
  }

  // Batch `step` of `epoch`. A failure in the dataset or the collate function becomes an
  // Error naming where it happened, with the original exception nested in it.
  Fields make(int64_t epoch, int64_t step) const {
    const std::vector<int64_t> idx = indices(epoch, step);
    auto where = [&] {
      return detail::concat("DataLoader (rank ", options.rank, "): batch ", step, " of epoch ", epoch);
    };
    std::vector<Fields> examples;
    examples.reserve(idx.size());
    for (const int64_t i : idx) {
      try {
        examples.push_back(dataset.get(i));
      } catch (const std::exception& e) {
        std::throw_with_nested(Error(detail::concat(where(), ": the dataset failed on example ", i, ": ", e.what())));
      }
    }
    try {
      return options.collate ? options.collate(std::move(examples)) : stack_collate(std::move(examples));
    } catch (const std::exception& e) {
      std::throw_with_nested(Error(detail::concat(where(), ": collate failed: ", e.what())));
    }
  }
};

Fields stack_collate(std::vector<Fields>&& examples) {
  STRATA_CHECK(!examples.empty(), "stack_collate: no examples to join");
  const size_t fields = examples.front().size();
  Fields out;
  out.reserve(fields);
  for (size_t f = 0; f < fields; ++f) {
    std::vector<Tensor> column;
    column.reserve(examples.size());
    for (size_t e = 0; e < examples.size(); ++e) {
      STRATA_CHECK(examples[e].size() == fields, "stack_collate: example ", e, " of the batch has ", examples[e].size(),
                   " fields but example 0 has ", fields);
      const Tensor& t = examples[e][f];
      STRATA_CHECK(t.defined(), "stack_collate: field ", f, " of example ", e, " of the batch is undefined");
      STRATA_CHECK(t.shape() == examples.front()[f].shape() && t.dtype() == examples.front()[f].dtype(),
                   "stack_collate: field ", f, " of example ", e, " has shape ", t.shape(), " and dtype ", t.dtype(),
                   " but example 0's has ", examples.front()[f].shape(), " and ", examples.front()[f].dtype(),
                   "; pass a collate function that pads or joins them");
      column.push_back(t);
    }
    out.push_back(stack(column, 0));
  }
  return out;
}

// The batches of one epoch from first_step on: made on the caller's thread when prefetch is
// 0, else by one producer thread that stays at most `prefetch` batches ahead.
class BatchStream::State {
 public:
  State(std::shared_ptr<const DataLoader::Source> source, int64_t epoch, int64_t first_step)
      : source_(std::move(source)), epoch_(epoch), next_step_(first_step), end_step_(source_->steps()) {
    STRATA_CHECK(first_step >= 0 && first_step <= end_step_, "DataLoader: first batch ", first_step, " is outside [0, ",
                 end_step_, "] for epoch ", epoch);
    STRATA_CHECK(epoch >= 0, "DataLoader: epoch must be >= 0, got ", epoch);
    if (source_->options.prefetch > 0) producer_ = std::thread([this] { produce(); });
  }

  State(const State&) = delete;
  State& operator=(const State&) = delete;

  ~State() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    if (producer_.joinable()) producer_.join();
  }

  std::optional<Fields> next() {
    if (finished_) return std::nullopt;
    if (!producer_.joinable()) return next_inline();
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty() || produced_all_; });
    if (ready_.empty()) {
      finished_ = true;
      return std::nullopt;
    }
    Item item = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();  // room for one more
    if (auto* error = std::get_if<std::exception_ptr>(&item)) {
      finished_ = true;
      std::rethrow_exception(*error);
    }
    return std::get<Fields>(std::move(item));
  }

 private:
  using Item = std::variant<Fields, std::exception_ptr>;

  std::optional<Fields> next_inline() {
    if (next_step_ >= end_step_) {
      finished_ = true;
      return std::nullopt;
    }
    finished_ = true;  // stays so if make throws
    Fields batch = source_->make(epoch_, next_step_++);
    finished_ = false;
    return batch;
  }

  // The producer: one batch at a time, in order, while there is room and no stop.
  void produce() {
    const auto room = static_cast<size_t>(source_->options.prefetch);
    for (int64_t step = next_step_; step < end_step_; ++step) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || ready_.size() < room; });
        if (stop_) break;
      }
      Item item;
      try {
        item = source_->make(epoch_, step);
      } catch (...) {
        item = std::current_exception();
      }
      const bool failed = std::holds_alternative<std::exception_ptr>(item);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(item));
      }
      changed_.notify_all();
      if (failed) break;  // nothing after an error: the consumer sees it and stops
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      produced_all_ = true;
    }
    changed_.notify_all();
  }

  std::shared_ptr<const DataLoader::Source> source_;
  const int64_t epoch_;
  int64_t next_step_;  // the inline path's position; the producer's start
  const int64_t end_step_;
  bool finished_ = false;  // the consumer's: nothing more to return

  std::mutex mutex_;
  std::condition_variable changed_;  // an item was queued or taken, the producer ended, or stop
  std::deque<Item> ready_;
  bool stop_ = false;
  bool produced_all_ = false;
  std::thread producer_;  // last: started once the members it uses exist
};

BatchStream::BatchStream(std::unique_ptr<State> state) : state_(std::move(state)) {}
BatchStream::BatchStream(BatchStream&&) noexcept = default;
BatchStream& BatchStream::operator=(BatchStream&&) noexcept = default;
BatchStream::~BatchStream() = default;

std::optional<Fields> BatchStream::next() {
  STRATA_CHECK(state_ != nullptr, "BatchStream: next() on a moved-from stream");
  return state_->next();
}

DataLoader::DataLoader(MapDataset dataset, DataLoaderOptions options) {
  STRATA_CHECK(static_cast<bool>(dataset.get), "DataLoader: the dataset has no get function");
  STRATA_CHECK(options.prefetch >= 0, "DataLoader: prefetch must be >= 0 batches, got ", options.prefetch);
  BatchSampler sampler({.dataset_size = dataset.size,
                        .batch_size = options.batch_size,
                        .seed = options.seed,
                        .shuffle = options.shuffle,
                        .rank = options.rank,
                        .world_size = options.world_size});
  source_ = std::make_shared<const Source>(Source{std::move(dataset), std::move(options), sampler});
}

int64_t DataLoader::size() const { return source_->steps(); }
const BatchSampler& DataLoader::sampler() const { return source_->sampler; }
std::vector<int64_t> DataLoader::batch_indices(int64_t epoch, int64_t step) const {
  return source_->indices(epoch, step);
}

void DataLoader::set_epoch(int64_t epoch) {
  STRATA_CHECK(epoch >= 0, "DataLoader::set_epoch: epoch must be >= 0, got ", epoch);
  epoch_ = epoch;
}

BatchStream DataLoader::stream(int64_t epoch, int64_t first_step) const {
  return BatchStream(std::make_unique<BatchStream::State>(source_, epoch, first_step));
}

DataLoader::Iterator DataLoader::begin() const { return Iterator(stream(epoch_)); }
DataLoader::Iterator DataLoader::end() const { return {}; }

DataLoader::Iterator::Iterator(BatchStream stream) : stream_(std::make_shared<BatchStream>(std::move(stream))) {
  ++*this;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  std::optional<Fields> batch = stream_->next();
  current_ = batch ? std::make_shared<Fields>(std::move(*batch)) : nullptr;
  if (!current_) stream_.reset();  // the pass is over: stop its thread now
  return *this;
}

}  // namespace strata::data
