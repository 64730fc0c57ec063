#pragma once
// A training-state file: one safetensors file (readable by any safetensors tool) whose
// __metadata__ also records the format and CRC-32 checksums of the data section and of
// the header, so that a corrupted or truncated file is refused instead of resumed from.
// The train loop stores "model.<name>" and "optim.<key>" tensors and metadata such as
// the step, RNG seed/offset and data position. See docs/checkpoint-format.md.
#include <string>

#include "strata/checkpoint/safetensors.h"

namespace strata::checkpoint {

inline constexpr const char* kCheckpointFormat = "strata-checkpoint-v1";
// __metadata__ keys the format owns; save_checkpoint refuses them in the caller's metadata.
inline constexpr const char* kCheckpointFormatKey = "format";
inline constexpr const char* kCheckpointDataCrcKey = "data_crc32";
inline constexpr const char* kCheckpointHeaderCrcKey = "header_crc32";

struct Checkpoint {
  StateDict tensors;
  Metadata metadata;  // the caller's metadata (the format's own keys removed)
  // The file's verified header checksum ("%08x"): it covers every name, shape, metadata value
  // and the data checksum, so it identifies the whole file (a sharded checkpoint's index
  // records it per shard).
  std::string header_crc32;
};

// Writes atomically: a failed save (I/O error, bad tensor, crash) leaves any previous file
// at `path` intact and loadable. Returns the header checksum written (see Checkpoint).
std::string save_checkpoint(const std::string& path, const StateDict& tensors, const Metadata& metadata = {});

// Validates the safetensors structure, the format tag and both checksums; throws
// strata::Error naming the file and what is wrong (e.g. "data checksum mismatch:
// expected 1a2b3c4d (header), found 5e6f7a8b (data)").
Checkpoint load_checkpoint(const std::string& path);

}  // namespace strata::checkpoint
