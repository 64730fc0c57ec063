// save_training_checkpoint / load_training_checkpoint: the training state of any layout in
// global names and coordinates (see distributed_checkpoint.h for what is stored and who
// writes it).
#include "strata/train/distributed_checkpoint.h"

#include <map>
#include <set>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/core/random.h"
#include "strata/distributed/object_collectives.h"
#include "strata/parallel/tp_layers.h"
#include "strata/tensor/factory.h"
#include "strata/train/training_state.h"
#include "train/checkpoint_layout.h"
#include "train/metadata_fields.h"

namespace strata::train {
namespace {

using checkpoint::Metadata;
using checkpoint::Region;
using checkpoint::SavePiece;
using checkpoint::ShardedCheckpoint;
using detail::layout_of;
using detail::LocalLayout;
using detail::named_parameters_by_data;
using detail::Place;
using detail::place_of;
using detail::state_by_index;

// Whether this rank writes any of parameter/buffer `name`: not a pipeline stage's duplicate
// of a tied parameter, and, when tensor parallelism leaves it whole, only tensor rank 0.
bool writes(const CheckpointTarget& t, const Place& place, const std::string& name) {
  if (t.duplicate && t.duplicate(name)) return false;
  return place.split.count(name) != 0 || place.tensor_rank == 0;
}

// The flat range of replicated local tensor `name` of `numel` elements that this rank writes:
// its chunk over the ranks holding the same tensor (the data group; an expert's: the
// expert-data group).
std::pair<int64_t, int64_t> replica_chunk(const CheckpointTarget& t, const std::string& name, int64_t numel) {
  const dist::ProcessGroup* holders = t.expert_data != nullptr && t.is_expert(name) ? t.expert_data : t.data;
  if (holders == nullptr || holders->size() == 1) return {0, numel};
  const int64_t b = holders->chunk_begin(numel, holders->rank());
  return {b, b + holders->chunk_size(numel, holders->rank())};
}

// Adds the pieces of local flat elements [begin, end) of tensor `key`; `flat` holds local
// elements [flat_offset, flat_offset + flat.numel()).
void add_pieces(std::vector<SavePiece>& out, const std::string& key, const LocalLayout& layout, const Tensor& flat,
                int64_t flat_offset, int64_t begin, int64_t end) {
  for (const detail::RangePiece& rp : detail::pieces_in_range(layout, begin, end))
    out.push_back(
        {key, layout.global_shape, rp.region, flat.narrow(0, rp.local_offset - flat_offset, rp.region.numel())});
}

// Which optimizer state this rank wrote: the loader refuses an index that lacks some of it
// (an edited index would otherwise resume with a fresh optimizer without a word).
struct StateRecord {
  std::set<std::string> keys;       // per-parameter state keys written ("exp_avg", "step", ...)
  std::set<std::string> stateless;  // parameters written without state (no gradient yet)
  void add(const std::string& name, const std::map<std::string, Tensor>* state) {
    if (state == nullptr) {
      stateless.insert(name);
      return;
    }
    for (const auto& [key, value] : *state) keys.insert(key);
  }
};

std::string joined(const std::set<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// The tensors of a (whole) local parameter's optimizer state that this rank writes.
void add_optimizer_state(std::vector<SavePiece>& out, const std::string& name, const LocalLayout& layout,
                         const std::map<std::string, Tensor>& state, int64_t offset, int64_t begin, int64_t end) {
  bool writes_first = false;  // the piece holding the global element 0 writes the scalars
  for (const detail::RangePiece& rp : detail::pieces_in_range(layout, begin, end))
    writes_first = writes_first || checkpoint::runs_of(rp.region, layout.global_shape).front().global == 0;
  for (const auto& [key, value] : state) {
    const std::string global = "optim." + name + "." + key;
    if (value.dim() == 0) {
      if (writes_first) out.push_back({global, Shape{}, Region::whole(Shape{}), value});
    } else {
      add_pieces(out, global, layout, value.reshape({value.numel()}), offset, begin, end);
    }
  }
}

Metadata save_metadata(const CheckpointTarget& t, int64_t step, const Metadata& extra) {
  Metadata meta{{"step", std::to_string(step)},
                {"rng.seed", std::to_string(default_generator().seed())},
                {"rng.offset", std::to_string(default_generator().offset())},
                {"layout.world_size", std::to_string(t.world.size())},
                {"layout.data", std::to_string(t.data ? t.data->size() : 1)},
                {"layout.tensor", std::to_string(t.tensor ? t.tensor->size() : 1)},
                {"layout.zero_stage", t.zero ? std::to_string(t.zero->stage()) : "none"}};
  if (t.optimizer != nullptr) meta["optimizer.step"] = std::to_string(t.optimizer->step_count());
  if (t.zero != nullptr) meta["optimizer.step"] = std::to_string(t.zero->optimizer().step_count());
  if (t.sampler != nullptr)
    for (const auto& [key, value] : t.sampler->state_dict())
      meta["sampler." + key] = std::to_string(value.to_vector<int64_t>()[0]);
  if (t.loss_scaler != nullptr && t.loss_scaler->options().enabled) {
    meta["loss_scaler.scale"] = detail::exact_decimal(t.loss_scaler->scale_value());
    meta["loss_scaler.growth_tracker"] =
        std::to_string(t.loss_scaler->state_dict().at("growth_tracker").to_vector<int64_t>()[0]);
  }
  for (const auto& [key, value] : t.config) {
    STRATA_CHECK(key.rfind("config.", 0) == 0, "save_training_checkpoint: configuration key '", key,
                 "' must start with 'config.'");
    meta[key] = value;
  }
  for (const auto& [key, value] : t.layout) meta["layout." + key] = value;
  for (const auto& [key, value] : extra) {
    STRATA_CHECK(!detail::is_reserved_metadata_key(key), "save_training_checkpoint: metadata key '", key,
                 "' is reserved (the checkpoint stores it itself)");
    meta[key] = value;
  }
  return meta;
}

Metadata save_rank_metadata(const CheckpointTarget& t, const Place& place, const StateRecord* record) {
  Metadata meta{{"tensor_rank", std::to_string(place.tensor_rank)}};
  if (record != nullptr) {
    meta[detail::kStateKeysKey] = joined(record->keys);
    if (!record->stateless.empty()) meta[detail::kStatelessKey] = joined(record->stateless);
  }
  if (t.rng_tracker != nullptr)
    for (const auto& [name, state] : t.rng_tracker->states()) {
      meta["rng_tracker." + name + ".seed"] = std::to_string(state.first);
      meta["rng_tracker." + name + ".offset"] = std::to_string(state.second);
    }
  return meta;
}

}  // namespace

checkpoint::SaveSnapshot snapshot_training_state(const CheckpointTarget& target, int64_t step, const Metadata& extra,
                                                 bool own_copies) {
  NoGradGuard no_grad;
  const CheckpointTarget t = detail::with_zero_resolved(target);
  STRATA_CHECK(t.optimizer == nullptr || t.zero == nullptr,
               "save_training_checkpoint: pass either a plain optimizer or a ZeroOptimizer, not both");
  const Place place = place_of(t);
  std::map<const void*, std::string> names;
  const std::map<std::string, Tensor> params =
      named_parameters_by_data(t.model, t.optimizer != nullptr ? &names : nullptr);
  std::vector<SavePiece> pieces;
  StateRecord record;

  if (t.zero != nullptr) {
    // What ZeRO owns: master weights, the parameters (their cast) and the inner state.
    const int stage = t.zero->stage();
    const auto inner = state_by_index(t.zero->optimizer().state_dict());
    // HSDP: the replicas of a shard hold the same values; the first replica writes them.
    const dist::ProcessGroup* replicate = t.zero->options().replicate;
    const bool replica_writes = replicate == nullptr || replicate->rank() == 0;
    for (const parallel::ZeroOptimizer::OwnedPiece& own : t.zero->owned_pieces()) {
      if (!writes(t, place, own.name)) continue;
      if (!replica_writes) {
        auto st = inner.find(own.inner_index);
        record.add(own.name, st != inner.end() ? &st->second : nullptr);
        continue;
      }
      const Tensor& param = params.at(own.name);
      const LocalLayout layout = layout_of(place, own.name, param.shape());
      // Stage 0 holds whole parameters on every rank: each replica writes its chunk.
      auto [begin, end] =
          stage == 0 ? replica_chunk(t, own.name, own.numel) : std::pair{own.offset, own.offset + own.numel};
      const Tensor master = own.master.reshape({own.numel});
      add_pieces(pieces, "model." + own.name, layout, master.to(param.dtype()), own.offset, begin, end);
      if (master.dtype() != param.dtype())
        add_pieces(pieces, "master." + own.name, layout, master, own.offset, begin, end);
      auto st = inner.find(own.inner_index);
      record.add(own.name, st != inner.end() ? &st->second : nullptr);
      if (st != inner.end()) add_optimizer_state(pieces, own.name, layout, st->second, own.offset, begin, end);
    }
  } else {
    std::map<std::string, std::map<std::string, Tensor>> state;  // by parameter name
    if (t.optimizer != nullptr) {
      const auto by_index = state_by_index(t.optimizer->state_dict());
      int64_t index = 0;
      for (const optim::ParamGroup& g : t.optimizer->param_groups())
        for (const Tensor& p : g.params) {
          auto it = by_index.find(index++);
          if (it == by_index.end()) continue;
          auto name = names.find(p.raw_data());
          STRATA_CHECK(name != names.end(), "save_training_checkpoint: the optimizer's parameter ", index - 1,
                       " is not a parameter of the model");
          state[name->second] = it->second;
        }
    }
    for (const auto& [name, param] : params) {
      if (!writes(t, place, name)) continue;
      const LocalLayout layout = layout_of(place, name, param.shape());
      auto [begin, end] = replica_chunk(t, name, param.numel());
      add_pieces(pieces, "model." + name, layout, param.reshape({param.numel()}), 0, begin, end);
      auto st = state.find(name);
      if (t.optimizer != nullptr) record.add(name, st != state.end() ? &st->second : nullptr);
      if (st != state.end()) add_optimizer_state(pieces, name, layout, st->second, 0, begin, end);
    }
  }
  for (auto& [name, buffer] : t.model.named_buffers()) {
    if (!writes(t, place, name)) continue;
    const LocalLayout layout = layout_of(place, name, buffer.shape());
    auto [begin, end] = replica_chunk(t, name, buffer.numel());
    add_pieces(pieces, "model." + name, layout, buffer.reshape({buffer.numel()}), 0, begin, end);
  }
  const bool has_optimizer = t.optimizer != nullptr || t.zero != nullptr;
  return checkpoint::take_snapshot(step, pieces, save_metadata(t, step, extra),
                                   save_rank_metadata(t, place, has_optimizer ? &record : nullptr), own_copies);
}

checkpoint::SaveResult save_training_checkpoint(const std::string& dir, const CheckpointTarget& t, int64_t step,
                                                const Metadata& extra, const checkpoint::SaveOptions& options) {
  checkpoint::SaveSnapshot snapshot;
  std::string error;
  try {
    snapshot = snapshot_training_state(t, step, extra, /*own_copies=*/false);  // written before training resumes
  } catch (const std::exception& e) {
    error = e.what();
  }
  dist::agree_on_success(t.world, error, "save_training_checkpoint '" + dir + "'");
  return checkpoint::save_sharded(dir, t.world, snapshot, options);
}

}  // namespace strata::train
