#include "checkpoint/hf_weights.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/posix_file.h"
#include "strata/checkpoint/safetensors.h"
#include "strata/core/error.h"

namespace strata::checkpoint::hf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// The index's weight_map: tensor name -> shard file name (in the index's directory).
std::map<std::string, std::string> read_weight_map(const std::string& path, const std::string& where) {
  json index;
  try {
    index = json::parse(detail::read_text_file(path));
  } catch (const json::exception& e) {
    STRATA_FAIL(where, " is not valid JSON: ", e.what());
  }
  STRATA_CHECK(index.is_object(), where, " must be a JSON object");
  auto map = index.find("weight_map");
  STRATA_CHECK(map != index.end() && map->is_object(), where, ": missing object \"weight_map\"");
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : map->items()) {
    STRATA_CHECK(file.is_string(), where, ": weight_map[\"", name, "\"] must be a file name, found ", file.dump());
    const std::string f = file.get<std::string>();
    // A shard lies beside the index: a path could make the import read any file.
    STRATA_CHECK(!f.empty() && f.find('/') == std::string::npos && f != "." && f != "..", where, ": weight_map[\"",
                 name, "\"] ", file.dump(), " is not a file name in the model directory");
    out.emplace(name, f);
  }
  STRATA_CHECK(!out.empty(), where, ": weight_map lists no tensor");
  return out;
}

ModelWeights read_sharded(const std::string& dir, const std::string& index_path) {
  const std::string where = "sharded model index '" + index_path + "'";
  const std::map<std::string, std::string> weight_map = read_weight_map(index_path, where);
  // Each shard once, with the first tensor mapped to it (to name in a message).
  std::map<std::string, std::string> shards;
  for (const auto& [name, file] : weight_map) shards.emplace(file, name);
  for (const auto& [file, name] : shards) {
    const fs::path p = fs::path(dir) / file;
    std::error_code ec;
    STRATA_CHECK(fs::exists(p, ec), where, ": '", name, "' is in shard '", file, "', which is missing");
    STRATA_CHECK(fs::is_regular_file(p, ec), where, ": '", name, "' is in shard '", file,
                 "', which is not a regular file");
  }

  ModelWeights out{{}, index_path};
  for (const auto& [file, first] : shards) {
    const std::string path = (fs::path(dir) / file).string();
    SafetensorsFile shard = load_safetensors(path);
    for (auto& [name, t] : shard.tensors) {
      auto mapped = weight_map.find(name);
      STRATA_CHECK(mapped != weight_map.end(), "shard '", path, "' holds tensor '", name,
                   "', which the index's weight_map does not list (", where, ")");
      STRATA_CHECK(mapped->second == file, "shard '", path, "' holds tensor '", name, "', which ", where,
                   " puts in shard '", mapped->second, "'");
      out.tensors.emplace(name, std::move(t));
    }
  }
  for (const auto& [name, file] : weight_map)
    STRATA_CHECK(out.tensors.contains(name), where, ": tensor '", name, "' is not in its shard '", file, "'");
  return out;
}

}  // namespace

ModelWeights read_model_weights(const std::string& dir) {
  const std::string single = (fs::path(dir) / kSingleFile).string();
  const std::string index = (fs::path(dir) / kIndexFile).string();
  std::error_code ec;
  if (fs::exists(single, ec)) return {load_safetensors(single).tensors, single};
  if (fs::exists(index, ec)) return read_sharded(dir, index);
  STRATA_FAIL("Hugging Face model directory '", dir, "' has neither ", kSingleFile, " nor ", kIndexFile,
              " (the files save_pretrained writes; PyTorch's pytorch_model.bin is not read)");
}

}  // namespace strata::checkpoint::hf
