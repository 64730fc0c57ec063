// strata-ckpt convert: an earlier strata's single-file training state (train::save_training_state:
// model.*, optim.<flat index>.*, sampler.*, step, rng_seed/rng_offset, config.*) as a sharded
// checkpoint of the same training state, the one format the trainers resume (in any layout).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "strata/checkpoint/checkpoint.h"
#include "strata/checkpoint/directory_lock.h"
#include "strata/core/error.h"
#include "strata/distributed/init.h"
#include "strata/optim/adam.h"
#include "strata/optim/param_groups.h"
#include "strata/train/distributed_checkpoint.h"
#include "strata/train/training_state.h"
#include "strata_ckpt/commands.h"
#include "strata_ckpt/model_family.h"

namespace strata::ckpt_tool {
namespace {

// The model the file's config.* entries describe, and that configuration as the trainers
// record it.
std::unique_ptr<nn::Module> model_of(const checkpoint::Metadata& meta, const train::ModelFamily& family,
                                     const std::string& where, checkpoint::Metadata& config) {
  STRATA_CHECK(family.name == "gpt2" || family.name == "llama", where,
               ": convert reads GPT-2 and LLaMA states; family '", family.name, "' had no single-file state");
  if (family.name == "gpt2") {
    const nn::GPTConfig c = train::gpt_config_from_metadata(meta, where);
    config = train::gpt_config_metadata(c);
    return std::make_unique<nn::GPT>(c);
  }
  const nn::LlamaConfig c = train::llama_config_from_metadata(meta, where);
  config = train::llama_config_metadata(c);
  return std::make_unique<nn::Llama>(c);
}

// The sampler the file's sampler.* entries were saved from (one process: its batch is the
// global batch).
data::BatchSampler sampler_of(const StateDict& tensors, const std::string& where) {
  auto field = [&](const std::string& key) {
    auto it = tensors.find("sampler." + key);
    STRATA_CHECK(it != tensors.end() && it->second.numel() == 1, where, ": tensor 'sampler.", key,
                 "' is missing or not a scalar");
    return it->second.to_vector<int64_t>()[0];
  };
  return data::BatchSampler({.dataset_size = field("dataset_size"),
                             .batch_size = field("global_batch_size"),
                             .seed = static_cast<uint64_t>(field("seed"))});
}

}  // namespace

int convert(const ConvertOptions& o) {
  refuse_existing_saves(o.out, "convert");
  const std::string where = "single-file training state '" + o.file + "'";
  const checkpoint::Checkpoint old = checkpoint::load_checkpoint(o.file);
  checkpoint::Metadata config;
  const std::unique_ptr<nn::Module> model =
      model_of(old.metadata, family_of(old.metadata, o.format, where), where, config);
  // The trainers' optimizer: AdamW over the weight-decay groups (the decay value is not
  // state: only the grouping numbers the parameters).
  optim::AdamW adamw(optim::weight_decay_groups(model->named_parameters(), 1e-3, 0.1), optim::AdamWOptions{});
  data::BatchSampler sampler = sampler_of(old.tensors, where);
  // Restores the model, the AdamW state, the sampler and the default RNG stream, checking
  // every entry against the model the configuration describes.
  const int64_t step = train::load_training_state(o.file, {*model, adamw, sampler, config});

  // One process writes every shard; no MPI (as import).
  dist::ProcessGroup& world = dist::init({.start_mpi = false});
  const checkpoint::DirectoryLock lock(o.out);
  refuse_existing_saves(o.out, "convert");
  config.erase("config.param_dtype");  // the trainers record it as part of the layout
  const train::CheckpointTarget target{
      .model = *model, .world = world, .optimizer = &adamw, .sampler = &sampler, .config = config};
  const checkpoint::SaveResult r = train::save_training_checkpoint(
      o.out, target, step, {{"converted_from", std::filesystem::absolute(o.file).string()}});
  std::printf("converted %s (step %lld) to %s (%llu bytes)\n", o.file.c_str(), static_cast<long long>(step),
              r.directory.c_str(), static_cast<unsigned long long>(r.bytes_written));
  return kExitOk;
}

}  // namespace strata::ckpt_tool
