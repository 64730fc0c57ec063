#include "strata/data/loader.h"

#include <bit>

#include "strata/core/error.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/philox.h"

namespace strata::data {
namespace {

// Rounds of the Feistel network: Luby-Rackoff needs 4 for a pseudo-random permutation;
// 6 mixes small domains better at negligible cost (one Philox call per round).
constexpr int kFeistelRounds = 6;

// One pass of a balanced Feistel network on [0, 2^(2*half_bits)).
uint64_t feistel(uint64_t x, int half_bits, uint64_t seed, uint64_t epoch) {
  const uint64_t mask = (half_bits == 0) ? 0 : (~0ull >> (64 - half_bits));
  uint64_t left = x >> half_bits, right = x & mask;
  for (int round = 0; round < kFeistelRounds; ++round) {
    auto r = strata_kernels::philox4x32_10((static_cast<uint64_t>(round) << 32) | right, epoch, seed);
    uint64_t f = ((static_cast<uint64_t>(r.v[1]) << 32) | r.v[0]) & mask;
    uint64_t next_right = left ^ f;
    left = right;
    right = next_right;
  }
  return (left << half_bits) | right;
}

int64_t scalar_of(const StateDict& state, const std::string& key) {
  auto it = state.find(key);
  STRATA_CHECK(it != state.end(), "BatchSampler::load_state_dict: missing field '", key, "'");
  STRATA_CHECK(it->second.defined() && it->second.numel() == 1, "BatchSampler::load_state_dict: field '", key,
               "' must be a one-element tensor");
  return it->second.to_vector<int64_t>()[0];
}

}  // namespace

int64_t permute_index(int64_t position, int64_t n, uint64_t seed, int64_t epoch) {
  STRATA_CHECK(n >= 1 && position >= 0 && position < n, "permute_index: position ", position, " is outside [0, ", n,
               ")");
  const auto un = static_cast<uint64_t>(n);
  const int bits = std::bit_width(un - 1);  // smallest b with 2^b >= n
  const int half_bits = (bits + 1) / 2;
  // Cycle walking: the permutation of the power-of-4 domain (< 4n) restricted to [0, n) by
  // re-applying it until the value lands inside; ends because position's own cycle does.
  uint64_t x = static_cast<uint64_t>(position);
  do {
    x = feistel(x, half_bits, seed, static_cast<uint64_t>(epoch));
  } while (x >= un);
  return static_cast<int64_t>(x);
}

BatchSampler::BatchSampler(SamplerOptions options) : options_(options) {
  STRATA_CHECK(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size,
               "BatchSampler: rank ", options_.rank, " must be in [0, world_size = ", options_.world_size, ")");
  STRATA_CHECK(options_.batch_size >= 1, "BatchSampler: batch_size must be positive, got ", options_.batch_size);
  STRATA_CHECK(options_.dataset_size >= 1, "BatchSampler: dataset_size must be positive, got ", options_.dataset_size);
  STRATA_CHECK(options_.batch_size <= options_.dataset_size / options_.world_size, "BatchSampler: a global batch of ",
               options_.batch_size, " x ", options_.world_size, " ranks does not fit in a dataset of ",
               options_.dataset_size, " examples");
}

int64_t BatchSampler::example_at(int64_t epoch, int64_t position) const {
  STRATA_CHECK(epoch >= 0 && position >= 0 && position < options_.dataset_size, "BatchSampler: epoch ", epoch,
               " position ", position, " is outside the dataset of ", options_.dataset_size, " examples");
  return options_.shuffle ? permute_index(position, options_.dataset_size, options_.seed, epoch) : position;
}

void BatchSampler::check_state(SamplerState s) const {
  STRATA_CHECK(s.epoch >= 0 && s.step >= 0 && s.step < steps_per_epoch(), "BatchSampler: state {epoch ", s.epoch,
               ", step ", s.step, "} is invalid: epoch must be >= 0 and step in [0, ", steps_per_epoch(), ")");
}

std::vector<int64_t> BatchSampler::global_indices_at(SamplerState at) const {
  check_state(at);
  const int64_t g = global_batch_size();
  std::vector<int64_t> out(static_cast<size_t>(g));
  for (int64_t i = 0; i < g; ++i) out[static_cast<size_t>(i)] = example_at(at.epoch, at.step * g + i);
  return out;
}

std::vector<int64_t> BatchSampler::indices_at(SamplerState at) const {
  check_state(at);
  const int64_t b = options_.batch_size;
  const int64_t first = at.step * global_batch_size() + options_.rank * b;
  std::vector<int64_t> out(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) out[static_cast<size_t>(i)] = example_at(at.epoch, first + i);
  return out;
}

std::vector<int64_t> BatchSampler::next() {
  std::vector<int64_t> out = indices_at(state_);
  if (++state_.step == steps_per_epoch()) {
    state_.step = 0;
    ++state_.epoch;
  }
  return out;
}

void BatchSampler::set_state(SamplerState state) {
  check_state(state);
  state_ = state;
}

StateDict BatchSampler::state_dict() const {
  auto i64 = [](int64_t v) { return from_vector(std::vector<int64_t>{v}, {}); };
  return StateDict{{"epoch", i64(state_.epoch)},
                   {"step", i64(state_.step)},
                   {"seed", i64(static_cast<int64_t>(options_.seed))},
                   {"dataset_size", i64(options_.dataset_size)},
                   {"global_batch_size", i64(global_batch_size())}};
}

void BatchSampler::load_state_dict(const StateDict& state) {
  auto expect = [&](const char* key, int64_t mine) {
    int64_t saved = scalar_of(state, key);
    STRATA_CHECK(saved == mine, "BatchSampler::load_state_dict: field '", key, "' is ", saved,
                 " in the saved state but ", mine, " here; the batches after resuming would differ");
  };
  expect("seed", static_cast<int64_t>(options_.seed));
  expect("dataset_size", options_.dataset_size);
  expect("global_batch_size", global_batch_size());
  set_state(SamplerState{scalar_of(state, "epoch"), scalar_of(state, "step")});
}

}  // namespace strata::data
