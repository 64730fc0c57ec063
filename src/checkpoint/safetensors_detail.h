#pragma once
// The pieces of the safetensors reader/writer, shared with checkpoint.cpp and hf_gpt2.cpp
// (and later the sharded checkpoint): plan the layout, build the header, write, read.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/checkpoint/safetensors.h"

namespace strata::checkpoint::detail {

// One tensor of a file being written: contiguous on the CPU, at [begin, end) of the data
// section.
struct SafetensorsEntry {
  std::string name;
  Tensor tensor;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Checks names and tensors (errors name `path` and the tensor), makes each contiguous on
// the CPU and assigns byte ranges: decreasing element size, then name.
std::vector<SafetensorsEntry> plan_safetensors(const StateDict& tensors, const std::string& path);
// CRC-32 of the data section the entries will form.
uint32_t data_crc32(const std::vector<SafetensorsEntry>& entries);
// The header object ("__metadata__" only when metadata is non-empty).
nlohmann::json safetensors_header(const std::vector<SafetensorsEntry>& entries, const Metadata& metadata);
// Compact JSON text; strata::Error naming `path` when a string is not valid UTF-8.
std::string dump_json(const nlohmann::json& json, const std::string& path);
// Where a written file's parts lie: the data section starts at data_start (8 + padded
// header); header_crc32 covers the padded header text (bytes [8, data_start)).
struct SafetensorsWritten {
  uint64_t data_start = 0;
  uint64_t file_bytes = 0;
  uint32_t header_crc32 = 0;
};
// Writes length + padded header + data atomically.
SafetensorsWritten write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                                     const nlohmann::json& header);

struct SafetensorsRead {
  SafetensorsFile file;
  nlohmann::json header;  // as parsed, for callers that verify more than the format does
};
SafetensorsRead read_safetensors(const std::string& path);

}  // namespace strata::checkpoint::detail
