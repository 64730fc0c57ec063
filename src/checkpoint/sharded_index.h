#pragma once
// index.json of a sharded checkpoint (internal): the JSON schema, its checksum and the
// pointer file, shared by the writer (sharded_save.cpp) and the reader (sharded_read.cpp).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/checkpoint/sharded.h"

namespace strata::checkpoint::detail {

inline constexpr const char* kIndexFile = "index.json";
inline constexpr const char* kLatestFile = "latest";
inline constexpr const char* kIndexCrcKey = "index_crc32";

std::string hex32(uint32_t value);
// Parses 8 hex digits, or throws naming `where`.
uint32_t parse_hex32(const std::string& text, const std::string& where);

// CRC-32 of the index's compact JSON (sorted keys) without index_crc32 itself.
uint32_t index_crc32(nlohmann::json index);

std::string shard_file_name(int rank);
// "step-<step>-<id>"
std::string step_directory_name(int64_t step, const std::string& save_id);

// A piece as one rank describes it to rank 0 and as the index records it.
nlohmann::json piece_json(const PieceLocation& piece);
PieceLocation parse_piece(const nlohmann::json& json, const std::string& where);

// The step directory `latest` in `dir` names; errors name the file and what it holds.
std::string resolve_latest(const std::string& dir);

}  // namespace strata::checkpoint::detail
