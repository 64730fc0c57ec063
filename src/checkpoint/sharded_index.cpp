#include "checkpoint/sharded_index.h"

#include <cstdio>
#include <filesystem>

#include "checkpoint/checksum.h"
#include "checkpoint/posix_file.h"
#include "strata/core/error.h"

namespace strata::checkpoint::detail {
namespace fs = std::filesystem;
using nlohmann::json;

std::string hex32(uint32_t value) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", value);
  return buf;
}

uint32_t parse_hex32(const std::string& text, const std::string& where) {
  STRATA_CHECK(text.size() == 8 && text.find_first_not_of("0123456789abcdef") == std::string::npos, where,
               ": expected 8 lowercase hex digits, found '", text, "'");
  return static_cast<uint32_t>(std::stoul(text, nullptr, 16));
}

uint32_t index_crc32(json index) {
  index.erase(kIndexCrcKey);
  const std::string text = index.dump();
  return crc32(text.data(), text.size());
}

std::string shard_file_name(int rank) { return "shard_" + std::to_string(rank) + ".safetensors"; }

std::string step_directory_name(int64_t step, const std::string& save_id) {
  return "step-" + std::to_string(step) + "-" + save_id;
}

json piece_json(const PieceLocation& p) {
  return {{"file", p.file},
          {"offsets", p.region.offsets.vec()},
          {"extents", p.region.extents.vec()},
          {"begin", p.region.begin},
          {"end", p.region.end},
          {"byte_range", {p.byte_begin, p.byte_end}},
          {"crc32", hex32(p.crc32)}};
}

namespace {

int64_t json_int(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  STRATA_CHECK(it != j.end() && it->is_number_integer(), where, ": field \"", key, "\" must be an integer, found ",
               it == j.end() ? std::string("nothing") : it->dump());
  return it->get<int64_t>();
}

Shape json_shape(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  STRATA_CHECK(it != j.end() && it->is_array(), where, ": field \"", key, "\" must be an array of integers");
  Shape out;
  for (const json& d : *it) {
    STRATA_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, where, ": field \"", key,
                 "\" must hold non-negative integers, found ", d.dump());
    out.push_back(d.get<int64_t>());
  }
  return out;
}

}  // namespace

PieceLocation parse_piece(const json& j, const std::string& where) {
  STRATA_CHECK(j.is_object(), where, ": a piece must be an object, found ", j.dump());
  PieceLocation p;
  auto file = j.find("file");
  STRATA_CHECK(file != j.end() && file->is_string(), where, ": field \"file\" must be a string");
  p.file = file->get<std::string>();
  STRATA_CHECK(!p.file.empty() && p.file.find('/') == std::string::npos && p.file[0] != '.', where,
               ": field \"file\" must name a file in the step directory, found '", p.file, "'");
  p.region.offsets = json_shape(j, "offsets", where);
  p.region.extents = json_shape(j, "extents", where);
  p.region.begin = json_int(j, "begin", where);
  p.region.end = json_int(j, "end", where);
  auto range = j.find("byte_range");
  STRATA_CHECK(range != j.end() && range->is_array() && range->size() == 2 && (*range)[0].is_number_unsigned() &&
                   (*range)[1].is_number_unsigned(),
               where, ": field \"byte_range\" must be [begin, end]");
  p.byte_begin = (*range)[0].get<uint64_t>();
  p.byte_end = (*range)[1].get<uint64_t>();
  STRATA_CHECK(p.byte_begin <= p.byte_end, where, ": byte_range [", p.byte_begin, ", ", p.byte_end,
               "] ends before it begins");
  auto crc = j.find("crc32");
  STRATA_CHECK(crc != j.end() && crc->is_string(), where, ": field \"crc32\" must be a string");
  p.crc32 = parse_hex32(crc->get<std::string>(), where + ": crc32");
  return p;
}

std::string resolve_latest(const std::string& dir) {
  const fs::path root(dir);
  const fs::path latest = root / kLatestFile;
  STRATA_CHECK(fs::exists(latest), "'", dir, "' is not a complete sharded checkpoint: it has no '", kLatestFile,
               "' file (no save into it has completed)");
  std::string name = read_text_file(latest.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  STRATA_CHECK(name.rfind("step-", 0) == 0 && name.find('/') == std::string::npos, "'", latest.string(),
               "' does not name a step directory: '", name, "'");
  const fs::path target = root / name;
  STRATA_CHECK(fs::is_directory(target), "'", latest.string(), "' names '", name, "', which does not exist in '", dir,
               "'");
  return target.string();
}

}  // namespace strata::checkpoint::detail
