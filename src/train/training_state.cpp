#include "strata/train/training_state.h"

#include <charconv>
#include <cstdio>

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

}  // namespace

void save_training_state(const std::string& path, const TrainingStateRefs& refs, int64_t step, const checkpoint::Metadata& extra) {
  StateDict tensors;
  put(tensors, "model.", refs.model.state_dict());
  put(tensors, "optim.", refs.optimizer.state_dict());
  put(tensors, "sampler.", refs.sampler.state_dict());
  checkpoint::Metadata meta = extra;
  for (const char* key : kReserved)
    STRATA_CHECK(!meta.count(key), "save_training_state: extra metadata may not use the reserved key '", key, "'");
  for (const auto& [key, value] : refs.config) {
    STRATA_CHECK(!meta.count(key), "save_training_state: extra metadata repeats the config key '", key, "'");
    meta[key] = value;
  }
  meta["step"] = std::to_string(step);
  meta["rng_seed"] = std::to_string(default_generator().seed());
  meta["rng_offset"] = std::to_string(default_generator().offset());
  checkpoint::save_checkpoint(path, tensors, meta);
}

int64_t load_training_state(const std::string& path, const TrainingStateRefs& refs, checkpoint::Metadata* extra) {
  checkpoint::Checkpoint ckpt = checkpoint::load_checkpoint(path);
  const std::string where = "training state '" + path + "'";
  const int64_t step = metadata_int(ckpt.metadata, "step", where);
  const uint64_t seed = metadata_u64(ckpt.metadata, "rng_seed", where);
  const uint64_t offset = metadata_u64(ckpt.metadata, "rng_offset", where);
  check_config(ckpt.metadata, refs.config, where);
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
    for (const auto& [key, value] : refs.config) extra->erase(key);
  }
  return step;
}

checkpoint::Metadata gpt_config_metadata(const nn::GPTConfig& c) {
  char dropout[32];
  std::snprintf(dropout, sizeof dropout, "%.17g", c.dropout);
  return {{"config.vocab_size", std::to_string(c.vocab_size)},
          {"config.context", std::to_string(c.context)},
          {"config.n_layer", std::to_string(c.n_layer)},
          {"config.n_head", std::to_string(c.n_head)},
          {"config.n_embd", std::to_string(c.n_embd)},
          {"config.dropout", dropout},
          {"config.dtype", std::string(dtype_name(c.dtype))},
          {"config.param_dtype", std::string(dtype_name(c.parameter_dtype()))}};
}

void check_config(const checkpoint::Metadata& stored, const checkpoint::Metadata& expected, const std::string& where) {
  for (const auto& [key, value] : expected) {
    auto it = stored.find(key);
    STRATA_CHECK(it != stored.end(), where, ": the model configuration field '", key,
                 "' is missing (saved by an older release, or without the configuration); this run has ", value);
    STRATA_CHECK(it->second == value, where, ": the model configuration differs: '", key, "' is ", it->second,
                 " in the checkpoint, ", value, " in this run");
  }
}

int64_t metadata_int(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where,
                     int64_t min, int64_t max) {
  auto it = metadata.find(key);
  STRATA_CHECK(it != metadata.end(), where, ": metadata field '", key, "' is missing");
  const std::string& text = it->second;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  STRATA_CHECK(!text.empty() && ec == std::errc() && end == text.data() + text.size() && value >= min && value <= max,
               where, ": metadata field '", key, "' is not an integer in [", min, ", ", max, "]: '", text, "'");
  return value;
}

uint64_t metadata_u64(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where) {
  auto it = metadata.find(key);
  STRATA_CHECK(it != metadata.end(), where, ": metadata field '", key, "' is missing");
  const std::string& text = it->second;
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  STRATA_CHECK(!text.empty() && ec == std::errc() && end == text.data() + text.size(), where, ": metadata field '",
               key, "' is not an unsigned integer: '", text, "'");
  return value;
}

}  // namespace strata::train
