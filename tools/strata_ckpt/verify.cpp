// strata-ckpt verify: reads every byte the index points at and reports each problem that
// ShardedCheckpoint::verify finds (checksums, shard headers, coverage), not just the first,
// so that one run tells how much of a damaged save is affected. A save whose index.json is
// there but corrupt is damaged too (exit 1, what strata-run acts on); a path that is no
// checkpoint, or one of another format, is not (exit 2).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "strata/checkpoint/sharded.h"
#include "strata_ckpt/commands.h"

namespace strata::ckpt_tool {
namespace {
namespace fs = std::filesystem;

// The index.json that opening `path` reads: that of the save `latest` names, or its own.
fs::path index_of(const std::string& path) {
  std::ifstream latest(fs::path(path) / "latest");
  std::string name;
  if (latest && std::getline(latest, name) && !name.empty()) return fs::path(path) / name / "index.json";
  return fs::path(path) / "index.json";
}

// Whether a save that failed to open is damaged (exit 1) rather than not a checkpoint this
// version reads (exit 2): its index.json is a readable file, and is not JSON or claims this
// format. strata-run sets aside only what verify calls damaged, so a missing or unreadable
// index, or one of another format or version, must not count.
bool index_is_damaged(const fs::path& index) {
  std::error_code ec;
  if (!fs::is_regular_file(index, ec)) return false;
  std::ifstream in(index, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || in.bad()) return false;
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return true;
  const auto format = j.find("format");
  return format == j.end() || !format->is_string() || format->get<std::string>() == checkpoint::kShardedFormat;
}

int report(const checkpoint::ShardedCheckpoint& c) {
  const std::vector<std::string> problems = c.verify();
  if (!problems.empty()) {
    for (const std::string& p : problems) std::printf("PROBLEM: %s\n", p.c_str());
    std::printf("FAILED: %zu problem%s in %s\n", problems.size(), problems.size() == 1 ? "" : "s",
                c.directory().c_str());
    return kExitProblems;
  }
  size_t pieces = 0;
  uint64_t bytes = 0;
  for (const auto& [name, e] : c.tensors()) {
    pieces += e.pieces.size();
    for (const checkpoint::PieceLocation& p : e.pieces) bytes += p.byte_end - p.byte_begin;
  }
  std::printf("OK: %zu tensors, %zu pieces, %llu bytes verified (%s)\n", c.tensors().size(), pieces,
              static_cast<unsigned long long>(bytes), c.directory().c_str());
  return kExitOk;
}

}  // namespace

int verify(const std::string& path) {
  std::optional<checkpoint::ShardedCheckpoint> c;
  try {
    c = checkpoint::ShardedCheckpoint::open(path);
  } catch (const std::exception& e) {
    const fs::path index = index_of(path);
    if (!index_is_damaged(index)) throw;  // exit 2: not a checkpoint this version can judge
    std::printf("PROBLEM: %s\nFAILED: 1 problem in %s\n", e.what(), index.parent_path().string().c_str());
    return kExitProblems;
  }
  return report(*c);
}

}  // namespace strata::ckpt_tool
