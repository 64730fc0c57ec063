// strata-ckpt import: a Hugging Face model directory as a sharded checkpoint of strata's
// training state (model.* weights, config.*, and the metadata load_training_checkpoint
// requires), so that a run of any layout can start from pretrained weights.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/checkpoint/directory_lock.h"
#include "strata/checkpoint/save_directory.h"
#include "strata/checkpoint/sharded.h"
#include "strata/core/error.h"
#include "strata/distributed/init.h"
#include "strata/nn/causal_lm.h"
#include "strata/train/training_state.h"
#include "strata_ckpt/commands.h"
#include "strata_ckpt/model_family.h"

namespace strata::ckpt_tool {
namespace {

std::string config_json_path(const ImportOptions& o) {
  return (std::filesystem::path(o.hf_dir) / "config.json").string();
}

// config.json's field `key` (`fallback` where it has none); errors name the file and `hint`.
template <class T>
T config_json_field(const ImportOptions& o, const char* key, const T& fallback, const char* hint) {
  const std::string path = config_json_path(o);
  try {
    std::ifstream in(path);
    STRATA_CHECK(in.good(), "cannot open it");
    return nlohmann::json::parse(in).value(key, fallback);
  } catch (const std::exception& e) {
    STRATA_FAIL("'", path, "': cannot read ", key, " (", e.what(), ")", hint);
  }
}

// The family config.json's model_type names, unless --format gave one.
const train::ModelFamily& import_family(const ImportOptions& o) {
  if (!o.format.empty()) return train::model_family(o.format);
  const std::string type =
      config_json_field<std::string>(o, "model_type", "", ": pass --format gpt2 or --format llama");
  return family_of_hf_type(type, "'" + config_json_path(o) + "'");
}

// The padded vocabulary --padded-vocab-multiple asks for (0: none).
int64_t padded_vocab_size(const ImportOptions& o) {
  if (o.padded_vocab_multiple <= 1) return 0;
  const int64_t vocab = config_json_field<int64_t>(o, "vocab_size", 0, "");
  STRATA_CHECK(vocab > 0, "'", config_json_path(o), "': vocab_size ", vocab,
               " is missing or not positive; --padded-vocab-multiple needs it");
  return nn::pad_vocab_size(vocab, o.padded_vocab_multiple);
}

// What save_training_checkpoint writes for one process with an optimizer that has not
// stepped: load_training_checkpoint requires step, rng.* and, when given an optimizer,
// optimizer.step; no optim.* tensors means the optimizer starts fresh.
checkpoint::Metadata import_metadata(const ImportOptions& o, const train::ModelFamily& family,
                                     const checkpoint::Metadata& config) {
  checkpoint::Metadata meta = config;
  meta["step"] = std::to_string(o.step);
  meta["optimizer.step"] = "0";
  meta["rng.seed"] = std::to_string(o.seed);
  meta["rng.offset"] = "0";
  meta["layout.world_size"] = "1";
  meta["layout.data"] = "1";
  meta["layout.tensor"] = "1";
  meta["layout.zero_stage"] = "none";
  meta["imported_from"] = std::filesystem::absolute(o.hf_dir).string();
  meta["imported_format"] = family.name;
  return meta;
}

}  // namespace

void refuse_existing_saves(const std::string& out, const std::string& command) {
  STRATA_CHECK(!checkpoint::ShardedCheckpoint::is_sharded(out), "'", out,
               "' already holds a sharded checkpoint: ", command, " into a new or empty directory");
  std::string names;
  for (const checkpoint::SaveEntry& s : checkpoint::list_saves(out)) names += (names.empty() ? "" : ", ") + s.name;
  STRATA_CHECK(names.empty(), "'", out, "' holds saves (", names, ") although it has no 'latest' file: ", command,
               " there would prune them; ", command, " into a new or empty directory");
}

int import_hf(const ImportOptions& o) {
  // save_sharded prunes all but the newest saves of its directory: never let an import
  // delete a run's checkpoints, whether or not `latest` still names one of them.
  refuse_existing_saves(o.out, "import");
  const train::ModelFamily& family = import_family(o);
  checkpoint::Metadata config;
  const StateDict state = family.import_hf(o.hf_dir, &config, padded_vocab_size(o));
  std::vector<checkpoint::SavePiece> pieces;
  for (const auto& [name, t] : state)
    pieces.push_back({"model." + name, t.shape(), checkpoint::Region::whole(t.shape()), t});

  // One process writes every shard; no MPI (init refuses a launcher of several ranks, before
  // anything is created). The lock keeps a run from saving there meanwhile; under it, look again.
  dist::ProcessGroup& world = dist::init({.start_mpi = false});
  const checkpoint::DirectoryLock lock(o.out);
  refuse_existing_saves(o.out, "import");
  const checkpoint::SaveResult r = checkpoint::save_sharded(
      o.out, world,
      checkpoint::take_snapshot(o.step, pieces, import_metadata(o, family, config), {{"tensor_rank", "0"}}));
  std::printf("imported %zu tensors (%s) from %s as step %lld: %s (%llu bytes)\n", pieces.size(), family.name.c_str(),
              o.hf_dir.c_str(), static_cast<long long>(o.step), r.directory.c_str(),
              static_cast<unsigned long long>(r.bytes_written));
  return kExitOk;
}

}  // namespace strata::ckpt_tool
