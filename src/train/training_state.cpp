#include "strata/train/training_state.h"

#include "strata/core/random.h"

namespace strata::train {
namespace {

constexpr const char* kReserved[] = {"step", "rng_seed", "rng_offset"};

void put(StateDict& out, const std::string& prefix, const StateDict& part) {
  for (const auto& [name, t] : part) out[prefix + name] = t;
}

StateDict take(const StateDict& all, const std::string& prefix) {
  StateDict part;
  for (auto it = all.lower_bound(prefix); it != all.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    part[it->first.substr(prefix.size())] = it->second;
  return part;
}

uint64_t parse_u64(const checkpoint::Metadata& meta, const char* key, const std::string& path) {
  auto it = meta.find(key);
  STRATA_CHECK(it != meta.end(), "training state '", path, "': metadata field '", key, "' is missing");
  try {
    size_t used = 0;
    uint64_t v = std::stoull(it->second, &used);
    STRATA_CHECK(used == it->second.size(), "");
    return v;
  } catch (...) {
    STRATA_FAIL("training state '", path, "': metadata field '", key, "' is not an unsigned integer: '", it->second,
                "'");
  }
}

}  // namespace

void save_training_state(const std::string& path, const TrainingStateRefs& refs, int64_t step, const checkpoint::Metadata& extra) {
  StateDict tensors;
  put(tensors, "model.", refs.model.state_dict());
  put(tensors, "optim.", refs.optimizer.state_dict());
  put(tensors, "sampler.", refs.sampler.state_dict());
  checkpoint::Metadata meta = extra;
  for (const char* key : kReserved)
    STRATA_CHECK(!meta.count(key), "save_training_state: extra metadata may not use the reserved key '", key, "'");
  meta["step"] = std::to_string(step);
  meta["rng_seed"] = std::to_string(default_generator().seed());
  meta["rng_offset"] = std::to_string(default_generator().offset());
  checkpoint::save_checkpoint(path, tensors, meta);
}

int64_t load_training_state(const std::string& path, const TrainingStateRefs& refs, checkpoint::Metadata* extra) {
  checkpoint::Checkpoint ckpt = checkpoint::load_checkpoint(path);
  const uint64_t step = parse_u64(ckpt.metadata, "step", path);
  const uint64_t seed = parse_u64(ckpt.metadata, "rng_seed", path);
  const uint64_t offset = parse_u64(ckpt.metadata, "rng_offset", path);
  try {
    refs.model.load_state_dict(take(ckpt.tensors, "model."));
    refs.optimizer.load_state_dict(take(ckpt.tensors, "optim."));
    refs.sampler.load_state_dict(take(ckpt.tensors, "sampler."));
  } catch (const Error& e) {
    STRATA_FAIL("training state '", path, "' does not fit this run: ", e.what());
  }
  default_generator().set_state(seed, offset);
  if (extra) {
    *extra = ckpt.metadata;
    for (const char* key : kReserved) extra->erase(key);
  }
  return static_cast<int64_t>(step);
}

}  // namespace strata::train
