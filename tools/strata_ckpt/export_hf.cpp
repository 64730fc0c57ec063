// strata-ckpt export: a sharded checkpoint's model weights, read whole whatever layout saved
// them, as a Hugging Face model directory through the library's GPT-2 / LLaMA exporters.
#include <cstdio>
#include <string>

#include "strata/checkpoint/sharded.h"
#include "strata/core/error.h"
#include "strata_ckpt/commands.h"
#include "strata_ckpt/model_family.h"

namespace strata::ckpt_tool {

int export_hf(const ExportOptions& o) {
  const checkpoint::ShardedCheckpoint c = checkpoint::ShardedCheckpoint::open(o.path);
  const std::string where = "checkpoint '" + c.directory() + "'";
  const train::ModelFamily& family = family_of(c.metadata(), o.format, where);
  // The configuration first: a checkpoint without one fails before any tensor is read.
  family.check_config(c.metadata(), where);

  const std::string prefix = "model.";
  StateDict state;
  size_t from_master = 0;
  for (const auto& [tensor, entry] : c.tensors()) {
    if (tensor.rfind(prefix, 0) != 0) continue;
    const std::string name = tensor.substr(prefix.size());
    // A 16-bit run's master.* holds the float32 weights that model.* rounds.
    const std::string master = "master." + name;
    const bool use_master = o.dtype == "f32" && c.contains(master);
    state[name] = c.read_whole(use_master ? master : tensor);
    from_master += use_master ? 1 : 0;
  }
  STRATA_CHECK(!state.empty(), where, ": holds no model.* tensors to export");
  if (o.dtype == "f32" && from_master == 0)
    std::printf(
        "note: %s has no master.* weights (only ZeRO runs with 16-bit parameters save them): "
        "exporting model.*\n",
        where.c_str());

  family.export_hf(o.out, state, c.metadata(), where);
  std::printf("exported %zu tensors of step %lld (%s, %zu from master.*) to %s/model.safetensors and config.json\n",
              state.size(), static_cast<long long>(c.step()), family.name.c_str(), from_master, o.out.c_str());
  return kExitOk;
}

}  // namespace strata::ckpt_tool
