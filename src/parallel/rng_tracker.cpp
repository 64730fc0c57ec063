#include "strata/parallel/rng_tracker.h"

#include "strata/core/error.h"

namespace strata::parallel {

Generator& RngTracker::add(const std::string& name, uint64_t seed) {
  auto [it, inserted] = streams_.try_emplace(name, seed, 0);
  STRATA_CHECK(inserted, "RngTracker: a stream named '", name, "' exists already");
  return it->second;
}

Generator& RngTracker::get(const std::string& name) {
  auto it = streams_.find(name);
  if (it == streams_.end()) {
    std::string known;
    for (const auto& [n, _] : streams_) known += (known.empty() ? "" : ", ") + n;
    STRATA_FAIL("RngTracker: no stream named '", name, "' (known: ", known.empty() ? "none" : known, ")");
  }
  return it->second;
}

std::map<std::string, std::pair<uint64_t, uint64_t>> RngTracker::states() const {
  std::map<std::string, std::pair<uint64_t, uint64_t>> out;
  for (const auto& [name, g] : streams_) out[name] = {g.seed(), g.offset()};
  return out;
}

void RngTracker::set_states(const std::map<std::string, std::pair<uint64_t, uint64_t>>& states) {
  for (const auto& [name, state] : states) get(name).set_state(state.first, state.second);
}

uint64_t tensor_parallel_seed(uint64_t seed, int tp_rank) {
  // splitmix64 of (seed, rank): a bijection per rank, so two ranks never share a stream.
  uint64_t z = seed ^ (0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(tp_rank) + 1));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace strata::parallel
