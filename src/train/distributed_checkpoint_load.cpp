// load_training_checkpoint: each rank reads the regions of the global tensors that its
// layout holds, into temporaries first; only when every rank has read everything does any
// rank change its model, optimizer, sampler and RNG.
#include <algorithm>
#include <map>
#include <set>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/core/random.h"
#include "strata/distributed/object_collectives.h"
#include "strata/tensor/factory.h"
#include "strata/train/distributed_checkpoint.h"
#include "strata/train/training_state.h"
#include "train/checkpoint_layout.h"
#include "train/metadata_fields.h"

namespace strata::train {
namespace {

using checkpoint::Metadata;
using checkpoint::ShardedCheckpoint;
using detail::LocalLayout;

// optim.<name>.<key> tensors of the checkpoint, by parameter name (keys have no dots).
std::map<std::string, std::vector<std::string>> optimizer_keys(const ShardedCheckpoint& c) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [tensor, entry] : c.tensors()) {
    if (tensor.rfind("optim.", 0) != 0) continue;
    const std::string rest = tensor.substr(6);
    const size_t dot = rest.rfind('.');
    if (dot == std::string::npos) continue;
    out[rest.substr(0, dot)].push_back(rest.substr(dot + 1));
  }
  return out;
}

// The optimizer state the saving ranks recorded writing (their optimizer.state_keys and
// optimizer.stateless entries); empty keys for a save without that record (an import, or a
// save before any step) or without an optimizer.
struct RecordedState {
  std::set<std::string> keys;
  std::set<std::string> stateless;
};

std::set<std::string> split_commas(const std::string& text) {
  std::set<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.insert(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

RecordedState recorded_state(const ShardedCheckpoint& c) {
  RecordedState out;
  for (int r = 0; r < c.world_size(); ++r) {
    const Metadata& m = c.rank_metadata(r);
    auto keys = m.find(detail::kStateKeysKey);
    if (keys != m.end()) out.keys.merge(split_commas(keys->second));
    auto stateless = m.find(detail::kStatelessKey);
    if (stateless != m.end()) out.stateless.merge(split_commas(stateless->second));
  }
  return out;
}

// A full resume refuses a checkpoint whose index lacks optimizer state that the save wrote:
// loading it would restart the optimizer (moments, bias correction) without a word.
void check_recorded_state(const ShardedCheckpoint& c, const RecordedState& recorded,
                          const std::vector<std::string>& params, const std::string& where) {
  std::vector<std::string> missing;
  for (const std::string& name : params) {
    if (recorded.stateless.count(name) != 0) continue;
    for (const std::string& key : recorded.keys)
      if (!c.contains("optim." + name + "." + key)) missing.push_back("optim." + name + "." + key);
  }
  if (missing.empty()) return;
  std::string keys;
  for (const std::string& k : recorded.keys) keys += (keys.empty() ? "" : ", ") + k;
  const std::string more =
      missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more optimizer tensors)" : "";
  STRATA_FAIL(where, ": the save recorded optimizer state (", keys, ") for its parameters, but the index has no '",
              missing.front(), "'", more,
              ": the index was edited or damaged, and resuming would restart the "
              "optimizer. To start a new optimizer from these weights on purpose, load the weights only "
              "(LoadOptions::weights_only; train_gpt --init-from)");
}

// Local flat elements [begin, begin + dest.numel()) of `tensor` (global name) into `dest`
// (1-D, contiguous); padding elements that no global element maps to are left as they are.
void read_range(const ShardedCheckpoint& c, const std::string& tensor, const LocalLayout& layout, int64_t begin,
                Tensor& dest) {
  for (const detail::RangePiece& rp : detail::pieces_in_range(layout, begin, begin + dest.numel())) {
    Tensor part = dest.narrow(0, rp.local_offset - begin, rp.region.numel());
    c.read(tensor, layout.global_shape, rp.region, part);
  }
}

// Which stored tensor a weight of dtype `dtype` is read from: the parameter in that dtype,
// else the master weights, else the parameter converted.
std::string weight_source(const ShardedCheckpoint& c, const std::string& name, DType dtype) {
  std::string model = "model." + name, master = "master." + name;
  if (c.contains(model) && c.tensor(model).dtype == dtype) return model;
  if (c.contains(master)) return master;
  return model;
}

// A whole local tensor of `name` shaped `shape` in `dtype`, read from `tensor`.
Tensor read_local(const ShardedCheckpoint& c, const std::string& tensor, const LocalLayout& layout, const Shape& shape,
                  DType dtype) {
  Tensor out = zeros({shape.numel()}, {.dtype = dtype});
  read_range(c, tensor, layout, 0, out);
  return out.reshape(shape);
}

// Optimizer state of one parameter range: "state.<index>.<key>" entries shaped `shape`.
void read_optimizer_state(const ShardedCheckpoint& c, const std::vector<std::string>& keys, const std::string& name,
                          const LocalLayout& layout, int64_t index, int64_t begin, const Tensor& like, StateDict& out) {
  for (const std::string& key : keys) {
    const std::string tensor = "optim." + name + "." + key;
    const std::string entry = optim::param_state_key(index, key);
    if (c.tensor(tensor).shape.empty()) {
      out[entry] = c.read_whole(tensor);
      continue;
    }
    Tensor flat = zeros({like.numel()}, {.dtype = like.dtype()});
    read_range(c, tensor, layout, begin, flat);
    out[entry] = flat.reshape(like.shape());
  }
}

// The optimizer's own entries: its step count and its groups' current lr.
void add_common_state(const optim::Optimizer& opt, int64_t steps, StateDict& out) {
  out["step"] = scalar_tensor(static_cast<double>(steps), {.dtype = DType::Int64});
  for (size_t g = 0; g < opt.param_groups().size(); ++g)
    out["group." + std::to_string(g) + ".lr"] = scalar_tensor(opt.param_groups()[g].lr, {.dtype = DType::Float64});
}

// The saved rank whose tensor rank is `tensor_rank` (-1: none).
int saved_rank_with_tensor_rank(const ShardedCheckpoint& c, int tensor_rank) {
  for (int r = 0; r < c.world_size(); ++r) {
    auto it = c.rank_metadata(r).find("tensor_rank");
    if (it != c.rank_metadata(r).end() && it->second == std::to_string(tensor_rank)) return r;
  }
  return -1;
}

// The tensor degree the checkpoint was saved with (1 when the layout does not say).
int saved_tensor_degree(const ShardedCheckpoint& c, const std::string& where) {
  return c.metadata().count("layout.tensor") != 0 ? static_cast<int>(metadata_int(c.metadata(), "layout.tensor", where))
                                                  : 1;
}

// Where this rank's tensor-parallel random streams continue (docs/checkpoint-format.md, "RNG
// streams"). The same degree: this tensor rank's saved streams exactly. Another degree: this
// rank's own seeds, continuing from the offsets of tensor rank 0. A save without tensor
// parallelism drew that randomness from the default stream, so the streams continue from its
// offset `rng_offset`, again with this rank's own seeds.
std::map<std::string, std::pair<uint64_t, uint64_t>> tracker_states(const ShardedCheckpoint& c,
                                                                    const parallel::RngTracker& tracker,
                                                                    const detail::Place& place, uint64_t rng_offset,
                                                                    const std::string& where) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> out;
  const int degree = saved_tensor_degree(c, where);
  const bool same_degree = degree == place.tensor_size;
  const int source = saved_rank_with_tensor_rank(c, same_degree ? place.tensor_rank : 0);
  STRATA_CHECK(source >= 0, where, ": no saved rank has tensor rank ", same_degree ? place.tensor_rank : 0);
  const Metadata& saved = c.rank_metadata(source);
  const std::string rank_where = where + " (rank " + std::to_string(source) + ")";
  for (const auto& [stream, state] : tracker.states()) {
    const std::string key = "rng_tracker." + stream;
    if (degree == 1 && saved.count(key + ".offset") == 0) {
      out[stream] = {state.first, rng_offset};
      continue;
    }
    const uint64_t offset = metadata_u64(saved, key + ".offset", rank_where);
    out[stream] = {same_degree ? metadata_u64(saved, key + ".seed", rank_where) : state.first, offset};
  }
  return out;
}

// The highest offset of any saved tensor-parallel stream (0 without any). A layout without
// tensor parallelism draws that randomness from the default stream and continues it from at
// least here, so that a later return to tensor parallelism (which continues its streams from
// the default stream's offset) draws no position of its streams twice.
uint64_t highest_tracker_offset(const ShardedCheckpoint& c, const std::string& where) {
  const std::string suffix = ".offset";
  uint64_t highest = 0;
  for (int r = 0; r < c.world_size(); ++r) {
    const Metadata& saved = c.rank_metadata(r);
    for (const auto& [key, value] : saved)
      if (key.rfind("rng_tracker.", 0) == 0 && key.size() > suffix.size() &&
          key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0)
        highest = std::max(highest, metadata_u64(saved, key, where + " (rank " + std::to_string(r) + ")"));
  }
  return highest;
}

// Everything read, before anything is changed.
struct Loaded {
  int64_t step = 0;
  Metadata metadata;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, value)
  StateDict optimizer_state;
  bool has_optimizer_state = false;
  StateDict sampler_state;
  std::map<std::string, std::pair<uint64_t, uint64_t>> tracker_states;
  uint64_t rng_seed = 0, rng_offset = 0;
};

// What reading the weights and the optimizer state needs besides the checkpoint: this rank's
// place in the layout, the model's parameters and the saved optimizer state's keys.
struct ParameterSources {
  detail::Place place;
  std::map<const void*, std::string> names;  // parameter names by data, for a plain optimizer's
  std::map<std::string, Tensor> params;
  std::map<std::string, std::vector<std::string>> keys;  // optim.<name>.<key> by parameter name
  bool optimizer = false;                                // the optimizer state is read too
  int64_t optimizer_steps = 0;

  std::vector<std::string> keys_of(const std::string& name) const {
    auto it = keys.find(name);
    return it == keys.end() ? std::vector<std::string>{} : it->second;
  }
};

ParameterSources parameter_sources(const ShardedCheckpoint& c, const CheckpointTarget& t, const Metadata& metadata,
                                   bool weights_only, const std::string& where) {
  ParameterSources s;
  s.place = detail::place_of(t);
  s.params = detail::named_parameters_by_data(t.model, t.optimizer != nullptr ? &s.names : nullptr);
  s.keys = optimizer_keys(c);
  s.optimizer = !weights_only && (t.optimizer != nullptr || t.zero != nullptr);
  s.optimizer_steps = s.optimizer ? metadata_int(metadata, "optimizer.step", where) : 0;
  return s;
}

// With ZeRO this rank updates float32 master shards: each read from its range of the saved
// parameter, with the optimizer state of that range. `optimized` collects their names.
void read_zero_shards(const ShardedCheckpoint& c, parallel::ZeroOptimizer& zero, const ParameterSources& s, Loaded& out,
                      std::vector<std::string>& optimized) {
  for (const parallel::ZeroOptimizer::OwnedPiece& own : zero.owned_pieces()) {
    const Tensor& param = s.params.at(own.name);
    const LocalLayout layout = detail::layout_of(s.place, own.name, param.shape());
    Tensor master = zeros({own.numel}, {.dtype = own.master.dtype()});
    read_range(c, weight_source(c, own.name, master.dtype()), layout, own.offset, master);
    out.copies.emplace_back(own.master, master.reshape(own.master.shape()));
    if (s.optimizer) {
      optimized.push_back(own.name);
      read_optimizer_state(c, s.keys_of(own.name), own.name, layout, own.inner_index, own.offset, own.master,
                           out.optimizer_state);
    }
  }
  if (s.optimizer) {
    add_common_state(zero.optimizer(), s.optimizer_steps, out.optimizer_state);
    out.has_optimizer_state = true;
  }
}

// Without ZeRO this rank holds every parameter whole (or its tensor-parallel part) and, with a
// plain optimizer (null: none), that optimizer's state for each of its parameters. `optimized`
// collects their names.
void read_parameters(const ShardedCheckpoint& c, optim::Optimizer* optimizer, const ParameterSources& s, Loaded& out,
                     std::vector<std::string>& optimized) {
  for (const auto& [name, param] : s.params) {
    const LocalLayout layout = detail::layout_of(s.place, name, param.shape());
    out.copies.emplace_back(param,
                            read_local(c, weight_source(c, name, param.dtype()), layout, param.shape(), param.dtype()));
  }
  if (!s.optimizer || optimizer == nullptr) return;
  int64_t index = 0;
  for (const optim::ParamGroup& g : optimizer->param_groups())
    for (const Tensor& p : g.params) {
      auto name = s.names.find(p.raw_data());
      STRATA_CHECK(name != s.names.end(), "load_training_checkpoint: the optimizer's parameter ", index,
                   " is not a parameter of the model");
      const LocalLayout layout = detail::layout_of(s.place, name->second, p.shape());
      optimized.push_back(name->second);
      read_optimizer_state(c, s.keys_of(name->second), name->second, layout, index++, 0, p, out.optimizer_state);
    }
  add_common_state(*optimizer, s.optimizer_steps, out.optimizer_state);
  out.has_optimizer_state = true;
}

// The state a resume restores besides the model and optimizer: the sampler's position and
// the random streams.
void read_run_state(const ShardedCheckpoint& c, const CheckpointTarget& t, const detail::Place& place,
                    const std::string& where, Loaded& out) {
  if (t.sampler != nullptr)
    for (const auto& [key, value] : t.sampler->state_dict())
      out.sampler_state[key] =
          from_vector(std::vector<int64_t>{metadata_int(out.metadata, "sampler." + key, where)}, {});
  if (t.rng_tracker != nullptr) out.tracker_states = tracker_states(c, *t.rng_tracker, place, out.rng_offset, where);
  if (t.rng_tracker == nullptr) out.rng_offset = std::max(out.rng_offset, highest_tracker_offset(c, where));
}

Loaded read_everything(const std::string& path, const CheckpointTarget& t, bool weights_only) {
  NoGradGuard no_grad;
  STRATA_CHECK(t.optimizer == nullptr || t.zero == nullptr,
               "load_training_checkpoint: pass either a plain optimizer or a ZeroOptimizer, not both");
  const ShardedCheckpoint c = ShardedCheckpoint::open(path);
  const std::string where = "checkpoint '" + c.directory() + "'";
  Loaded out;
  out.metadata = c.metadata();
  // Starting from pretrained weights, only what decides the weights must match (dropout may differ).
  check_config(out.metadata, weights_only ? weight_config(t.config) : t.config, where);
  out.step = out.metadata.count("step") != 0 || !weights_only ? metadata_int(out.metadata, "step", where) : 0;
  if (!weights_only) {
    out.rng_seed = metadata_u64(out.metadata, "rng.seed", where);
    out.rng_offset = metadata_u64(out.metadata, "rng.offset", where);
  }
  const ParameterSources sources = parameter_sources(c, t, out.metadata, weights_only, where);
  const RecordedState recorded = recorded_state(c);
  std::vector<std::string> optimized;  // names of the parameters whose optimizer state this rank loads
  if (t.zero != nullptr) read_zero_shards(c, *t.zero, sources, out, optimized);
  else read_parameters(c, t.optimizer, sources, out, optimized);
  for (auto& [name, buffer] : t.model.named_buffers()) {
    const LocalLayout layout = detail::layout_of(sources.place, name, buffer.shape());
    out.copies.emplace_back(buffer, read_local(c, "model." + name, layout, buffer.shape(), buffer.dtype()));
  }
  if (sources.optimizer) check_recorded_state(c, recorded, optimized, where);
  if (!weights_only) read_run_state(c, t, sources.place, where, out);
  return out;
}

// The fp16 loss scaler's scale and growth counter, as saved.
void restore_loss_scaler(optim::GradScaler& scaler, const Metadata& metadata, const std::string& where) {
  scaler.load_state_dict(
      {{"scale", from_vector(std::vector<double>{detail::metadata_double(metadata, "loss_scaler.scale", where)}, {})},
       {"growth_tracker",
        from_vector(std::vector<int64_t>{metadata_int(metadata, "loss_scaler.growth_tracker", where, 0)}, {})}});
}

}  // namespace

int64_t load_training_checkpoint(const std::string& path, const CheckpointTarget& target, Metadata* extra,
                                 const LoadOptions& options) {
  const CheckpointTarget t = detail::with_zero_resolved(target);
  const std::string who = "load_training_checkpoint '" + path + "'";
  Loaded loaded;
  std::string error;
  try {
    loaded = read_everything(path, t, options.weights_only);
  } catch (const std::exception& e) {
    error = e.what();
  }
  dist::agree_on_success(t.world, error, who);

  // The optimizer and sampler check every entry before taking any.
  try {
    if (loaded.has_optimizer_state) {
      if (t.zero != nullptr) t.zero->optimizer().load_state_dict(loaded.optimizer_state);
      if (t.optimizer != nullptr) t.optimizer->load_state_dict(loaded.optimizer_state);
    }
    if (t.sampler != nullptr && !options.weights_only) t.sampler->load_state_dict(loaded.sampler_state);
  } catch (const std::exception& e) {
    error = e.what();
  }
  dist::agree_on_success(t.world, error, who);
  {
    NoGradGuard no_grad;
    for (auto& [dest, value] : loaded.copies) dest.copy_(value);
  }
  if (t.zero != nullptr) t.zero->reload_parameters_from_master();  // collective
  if (!options.weights_only) {
    default_generator().set_state(loaded.rng_seed, loaded.rng_offset);
    if (t.rng_tracker != nullptr) t.rng_tracker->set_states(loaded.tracker_states);
    if (t.scheduler != nullptr) t.scheduler->set_last_step(loaded.step);
    if (t.loss_scaler != nullptr && loaded.metadata.count("loss_scaler.scale") != 0)
      restore_loss_scaler(*t.loss_scaler, loaded.metadata, who);
  }
  if (extra != nullptr) {
    extra->clear();
    for (const auto& [key, value] : loaded.metadata)
      if (!detail::is_reserved_metadata_key(key)) (*extra)[key] = value;
  }
  return loaded.step;
}

}  // namespace strata::train
