#pragma once
// The safetensors format (Hugging Face): an 8-byte little-endian header length N, N bytes
// of JSON (space-padded to a multiple of 8) describing each tensor's dtype, shape and
// byte range, then the raw little-endian data. Readable by the `safetensors` Python
// package, transformers, and with json + struct alone. See docs/checkpoint-format.md.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "strata/core/dtype.h"
#include "strata/tensor/state_dict.h"

namespace strata::checkpoint {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  StateDict tensors;        // each owns its memory (contiguous, CPU)
  Metadata metadata;        // the header's "__metadata__" (empty when absent)
  uint32_t data_crc32 = 0;  // CRC-32 of the whole data section, computed while reading
};

// Writes `tensors` (CPU; any dtype strata has; non-contiguous ones are written
// contiguously) atomically to `path`. Tensors are laid out by decreasing element size,
// then by name, so every tensor starts aligned to its element size, as the reference
// writer does. Throws strata::Error naming the path and tensor on bad input or I/O error.
void save_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata = {});

// Reads and validates a whole file. Throws strata::Error naming the file and the field
// for a short file, a header length beyond the file, invalid JSON, an unknown dtype, a
// shape that does not match its byte range, overlapping/out-of-range/gapped offsets, or a
// data section whose size does not match the file (truncated or trailing bytes).
SafetensorsFile load_safetensors(const std::string& path);

// "F32", "F64", "BF16", "F16", "I32", "I64" and back; the parser throws on other names.
std::string_view safetensors_dtype_name(DType dtype);
DType parse_safetensors_dtype(std::string_view name);

}  // namespace strata::checkpoint
