// strata-ckpt: look into, check and convert strata's sharded checkpoints
// (docs/checkpoint-format.md, "strata-ckpt").
//
//   strata-ckpt inspect runs/ckpt [--json]
//   strata-ckpt verify runs/ckpt
//   strata-ckpt export runs/ckpt --out hf/ [--format gpt2|llama|mixtral] [--dtype param|f32]
//   strata-ckpt import hf/ --out runs/pretrained [--format gpt2|llama|mixtral] [--step 0] [--seed 1337]
//                      [--padded-vocab-multiple 1]
//   strata-ckpt convert old.ckpt --out runs/ckpt [--format gpt2|llama]   # an earlier single-file state
//
// Exit codes: 0 success; 1 verify found the save damaged (a checksum, the coverage, or an
// index.json that is there but corrupt); 2 the command could not do its work (bad command
// line, not a checkpoint, a missing or unreadable index or one of another format, a tensor or
// configuration an export/import needs is missing or wrong): the message names the file.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "strata/train/model_registry.h"
#include "strata_ckpt/commands.h"
#include "strata_ckpt/integer_option.h"

using namespace strata::ckpt_tool;

int main(int argc, char** argv) {
  CLI::App app{"Inspect, verify and convert strata sharded checkpoints"};
  app.require_subcommand(1);

  InspectOptions inspect_o;
  auto* inspect_cmd = app.add_subcommand("inspect", "print the step, metadata, tensors and shard files");
  inspect_cmd->add_option("path", inspect_o.path, "checkpoint directory (with 'latest') or a step directory")
      ->required();
  inspect_cmd->add_flag("--json", inspect_o.json, "machine-readable output");

  std::string verify_path;
  auto* verify_cmd = app.add_subcommand("verify", "read every piece and check every checksum and the coverage");
  verify_cmd->add_option("path", verify_path, "checkpoint directory (with 'latest') or a step directory")->required();

  ExportOptions export_o;
  auto* export_cmd = app.add_subcommand("export", "write the model weights as a Hugging Face model directory");
  export_cmd->add_option("path", export_o.path, "checkpoint directory (with 'latest') or a step directory")->required();
  export_cmd->add_option("--out", export_o.out, "Hugging Face model directory to write")->required();
  export_cmd->add_option("--format", export_o.format, "model family (default: the checkpoint's config.family)")
      ->check(CLI::IsMember(strata::train::model_family_names()));
  export_cmd
      ->add_option("--dtype", export_o.dtype,
                   "param: the model.* weights; f32: the float32 master.* weights where present")
      ->check(CLI::IsMember({"param", "f32"}))
      ->capture_default_str();

  ImportOptions import_o;
  auto* import_cmd = app.add_subcommand("import", "write a Hugging Face model as a sharded checkpoint");
  import_cmd
      ->add_option("hf_dir", import_o.hf_dir,
                   "Hugging Face model directory (config.json, and model.safetensors or model.safetensors.index.json "
                   "with its shards)")
      ->required()
      ->check(CLI::ExistingDirectory);
  import_cmd->add_option("--out", import_o.out, "checkpoint directory to create (must not hold one)")->required();
  import_cmd->add_option("--format", import_o.format, "model family (default: config.json's model_type)")
      ->check(CLI::IsMember(strata::train::model_family_names()));
  import_cmd->add_option("--step", import_o.step, "step recorded in the checkpoint")
      ->check(integer_at_most(INT64_MAX))
      ->capture_default_str();
  import_cmd->add_option("--seed", import_o.seed, "seed of the RNG stream a run loading it continues")
      ->check(integer_at_most(UINT64_MAX))
      ->capture_default_str();
  import_cmd
      ->add_option("--padded-vocab-multiple", import_o.padded_vocab_multiple,
                   "pad the vocabulary (zero rows) to a multiple of this, as the run that loads it does")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();

  ConvertOptions convert_o;
  auto* convert_cmd = app.add_subcommand(
      "convert", "write an earlier strata's single-file training state as a sharded checkpoint (what --resume reads)");
  convert_cmd->add_option("file", convert_o.file, "single-file training state")->required()->check(CLI::ExistingFile);
  convert_cmd->add_option("--out", convert_o.out, "checkpoint directory to create (must not hold one)")->required();
  convert_cmd->add_option("--format", convert_o.format, "model family (default: the file's config.family)")
      ->check(CLI::IsMember({"gpt2", "llama"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help or the error
    return code == 0 ? kExitOk : kExitUnusable;
  }

  // Every error is a message, never a crash: strata::Error, and whatever the standard
  // library or the JSON parser throw on a malformed file.
  try {
    if (*inspect_cmd) return inspect(inspect_o);
    if (*verify_cmd) return verify(verify_path);
    if (*export_cmd) return export_hf(export_o);
    if (*convert_cmd) return convert(convert_o);
    return import_hf(import_o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata-ckpt: %s\n", e.what());
    return kExitUnusable;
  }
}
