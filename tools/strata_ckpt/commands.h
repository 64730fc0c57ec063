#pragma once
// The subcommands of strata-ckpt. Each prints its report to stdout and returns its exit
// code, or throws (main.cpp prints the message and exits kExitUnusable).
#include <cstdint>
#include <string>

namespace strata::ckpt_tool {

// Exit codes, documented in docs/checkpoint-format.md.
inline constexpr int kExitOk = 0;
inline constexpr int kExitProblems = 1;  // verify found the save damaged (strata-run acts on this only)
// The command could not do its work: bad command line, not a checkpoint, an unreadable index,
// a tensor or configuration that an export or import needs is missing or wrong.
inline constexpr int kExitUnusable = 2;

struct InspectOptions {
  std::string path;
  bool json = false;
};
int inspect(const InspectOptions& options);

int verify(const std::string& path);

struct ExportOptions {
  std::string path;
  std::string out;
  std::string format;  // "" : from the checkpoint's config.* metadata
  // "param": the model.* weights as trained; "f32": the float32 master.* weights where the
  // checkpoint has them (a run with 16-bit parameters), model.* elsewhere.
  std::string dtype = "param";
};
int export_hf(const ExportOptions& options);

struct ImportOptions {
  std::string hf_dir;
  std::string out;
  std::string format;  // "": from config.json's model_type
  int64_t step = 0;
  uint64_t seed = 1337;  // the default RNG stream a run loading the checkpoint continues from
  // Pads the vocabulary tensors with zero rows to config.json's vocab_size rounded up to a
  // multiple of this (config.padded_vocab_size), as the trainers' --padded-vocab-multiple.
  int64_t padded_vocab_multiple = 1;
};
int import_hf(const ImportOptions& options);

struct ConvertOptions {
  std::string file;    // an earlier strata's single-file training state
  std::string out;     // checkpoint directory to create (must not hold one)
  std::string format;  // "": from the file's config.* metadata
};
int convert(const ConvertOptions& options);

// Refuses an output directory that holds a checkpoint or any save directory, naming them
// (save_sharded would prune them): `command` ("import") names what to do elsewhere.
void refuse_existing_saves(const std::string& out, const std::string& command);

}  // namespace strata::ckpt_tool
