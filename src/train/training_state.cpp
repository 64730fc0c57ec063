#include "strata/train/training_state.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

#include "strata/core/random.h"
#include "train/metadata_fields.h"

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

// metadata[key] parsed whole as a T (nullopt when it is not one); `text` gets the field's text.
// A missing field throws naming `where` and the key.
template <class T>
std::optional<T> parse_field(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where,
                             const std::string*& text) {
  auto it = metadata.find(key);
  STRATA_CHECK(it != metadata.end(), where, ": metadata field '", key, "' is missing");
  text = &it->second;
  T value{};
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (text->empty() || ec != std::errc() || end != text->data() + text->size()) return std::nullopt;
  return value;
}

}  // namespace

namespace detail {

std::string exact_decimal(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

double metadata_double(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where) {
  const std::string* text = nullptr;
  const std::optional<double> value = parse_field<double>(metadata, key, where, text);
  STRATA_CHECK(value && std::isfinite(*value), where, ": metadata field '", key, "' is not a finite number: '", *text,
               "'");
  return *value;
}

// A dtype by the name dtype_name gives it ("float32", "bfloat16", ...).
DType metadata_dtype(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where) {
  auto it = metadata.find(key);
  STRATA_CHECK(it != metadata.end(), where, ": metadata field '", key, "' is missing");
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16})
    if (dtype_name(d) == it->second) return d;
  STRATA_FAIL(where, ": metadata field '", key, "' is '", it->second,
              "', not a floating dtype (float32, float64, bfloat16, float16)");
}

void add_padded_vocab_size(checkpoint::Metadata& metadata, int64_t vocab_size, int64_t padded_vocab_size) {
  if (padded_vocab_size != 0 && padded_vocab_size != vocab_size)
    metadata["config.padded_vocab_size"] = std::to_string(padded_vocab_size);
}

int64_t metadata_padded_vocab_size(const checkpoint::Metadata& metadata, int64_t vocab_size, const std::string& where) {
  if (metadata.count("config.padded_vocab_size") == 0) return 0;  // written before padding existed, or unpadded
  const int64_t padded = metadata_int(metadata, "config.padded_vocab_size", where, 1);
  STRATA_CHECK(padded >= vocab_size, where, ": metadata field 'config.padded_vocab_size' is ", padded,
               ", smaller than 'config.vocab_size' ", vocab_size);
  return padded;
}

}  // namespace detail

void save_training_state(const std::string& path, const TrainingStateRefs& refs, int64_t step,
                         const checkpoint::Metadata& extra) {
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

void check_config(const checkpoint::Metadata& stored, const checkpoint::Metadata& expected, const std::string& where) {
  for (const auto& [key, value] : expected) {
    auto it = stored.find(key);
    STRATA_CHECK(it != stored.end(), where, ": the model configuration field '", key,
                 "' is missing (saved by an older release, or without the configuration); this run has ", value);
    STRATA_CHECK(it->second == value, where, ": the model configuration differs: '", key, "' is ", it->second,
                 " in the checkpoint, ", value, " in this run");
  }
}

checkpoint::Metadata weight_config(const checkpoint::Metadata& config) {
  checkpoint::Metadata out = config;
  for (const char* key : {"config.dropout", "config.dtype", "config.param_dtype"}) out.erase(key);
  if (out.count("config.rope_theta") != 0) out.erase("config.context");
  return out;
}

int64_t metadata_int(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where,
                     int64_t min, int64_t max) {
  const std::string* text = nullptr;
  const std::optional<int64_t> value = parse_field<int64_t>(metadata, key, where, text);
  STRATA_CHECK(value && *value >= min && *value <= max, where, ": metadata field '", key, "' is not an integer in [",
               min, ", ", max, "]: '", *text, "'");
  return *value;
}

uint64_t metadata_u64(const checkpoint::Metadata& metadata, const std::string& key, const std::string& where) {
  const std::string* text = nullptr;
  const std::optional<uint64_t> value = parse_field<uint64_t>(metadata, key, where, text);
  STRATA_CHECK(value.has_value(), where, ": metadata field '", key, "' is not an unsigned integer: '", *text, "'");
  return *value;
}

}  // namespace strata::train
