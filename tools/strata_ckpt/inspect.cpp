// strata-ckpt inspect: what a sharded checkpoint holds, from its index alone (no tensor data
// is read, so it is quick on any size and works on a damaged save; verify reads the data).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "strata/checkpoint/sharded.h"
#include "strata_ckpt/commands.h"

namespace strata::ckpt_tool {
namespace {

namespace fs = std::filesystem;
using checkpoint::ShardedCheckpoint;
using checkpoint::TensorEntry;

struct TensorRow {
  std::string name, dtype, shape;
  size_t pieces = 0;
  uint64_t bytes = 0;
};

struct FileRow {
  std::string name;
  std::optional<uint64_t> bytes;  // unset: missing or unreadable
};

std::string shape_text(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<TensorRow> tensor_rows(const ShardedCheckpoint& c) {
  std::vector<TensorRow> rows;
  for (const auto& [name, e] : c.tensors()) {
    TensorRow r{name, std::string(dtype_name(e.dtype)), shape_text(e.shape), e.pieces.size(), 0};
    for (const checkpoint::PieceLocation& p : e.pieces) r.bytes += p.byte_end - p.byte_begin;
    rows.push_back(std::move(r));
  }
  return rows;
}

// Shard files in rank order (shard_2 before shard_10), with their sizes on disk.
std::vector<FileRow> file_rows(const ShardedCheckpoint& c) {
  std::vector<std::string> names = c.files();
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  std::vector<FileRow> rows;
  for (const std::string& name : names) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(fs::path(c.directory()) / name, ec);
    rows.push_back({name, ec ? std::nullopt : std::optional<uint64_t>(size)});
  }
  return rows;
}

int print_json(const ShardedCheckpoint& c) {
  nlohmann::ordered_json j;
  j["directory"] = c.directory();
  j["step"] = c.step();
  j["save_id"] = c.save_id();
  j["world_size"] = c.world_size();
  j["metadata"] = c.metadata();
  j["rank_metadata"] = nlohmann::json::array();
  for (int r = 0; r < c.world_size(); ++r) j["rank_metadata"].push_back(c.rank_metadata(r));
  j["tensors"] = nlohmann::json::array();
  for (const TensorRow& r : tensor_rows(c)) {
    j["tensors"].push_back({{"name", r.name},
                            {"dtype", r.dtype},
                            {"shape", c.tensor(r.name).shape.vec()},
                            {"pieces", r.pieces},
                            {"bytes", r.bytes}});
  }
  j["files"] = nlohmann::json::array();
  for (const FileRow& f : file_rows(c))
    j["files"].push_back({{"name", f.name}, {"bytes", f.bytes ? nlohmann::json(*f.bytes) : nlohmann::json()}});
  std::printf("%s\n", j.dump(2).c_str());
  return kExitOk;
}

int print_text(const ShardedCheckpoint& c) {
  std::printf("checkpoint  %s\nstep        %lld\nsave id     %s\nworld size  %d\n", c.directory().c_str(),
              static_cast<long long>(c.step()), c.save_id().c_str(), c.world_size());
  // The layout first: it is what a reader most often wants to know (how the run was split).
  for (const bool layout : {true, false}) {
    std::printf("%s\n", layout ? "layout:" : "metadata:");
    for (const auto& [key, value] : c.metadata())
      if ((key.rfind("layout.", 0) == 0) == layout) std::printf("  %s = %s\n", key.c_str(), value.c_str());
  }
  for (int r = 0; r < c.world_size(); ++r) {
    std::printf("rank %d:", r);
    for (const auto& [key, value] : c.rank_metadata(r)) std::printf(" %s=%s", key.c_str(), value.c_str());
    std::printf("\n");
  }

  const std::vector<TensorRow> rows = tensor_rows(c);
  size_t name_w = 4, shape_w = 5, pieces = 0;
  uint64_t total = 0;
  for (const TensorRow& r : rows) {
    name_w = std::max(name_w, r.name.size());
    shape_w = std::max(shape_w, r.shape.size());
    pieces += r.pieces;
    total += r.bytes;
  }
  const int nw = static_cast<int>(name_w), sw = static_cast<int>(shape_w);
  std::printf("tensors: %zu, pieces: %zu, bytes: %llu\n", rows.size(), pieces, static_cast<unsigned long long>(total));
  std::printf("  %-*s  %-8s  %-*s  %6s  %12s\n", nw, "name", "dtype", sw, "shape", "pieces", "bytes");
  for (const TensorRow& r : rows)
    std::printf("  %-*s  %-8s  %-*s  %6zu  %12llu\n", nw, r.name.c_str(), r.dtype.c_str(), sw, r.shape.c_str(),
                r.pieces, static_cast<unsigned long long>(r.bytes));
  std::printf("files:\n");
  for (const FileRow& f : file_rows(c)) {
    if (f.bytes) std::printf("  %s  %llu bytes\n", f.name.c_str(), static_cast<unsigned long long>(*f.bytes));
    else std::printf("  %s  MISSING\n", f.name.c_str());
  }
  return kExitOk;
}

}  // namespace

int inspect(const InspectOptions& o) {
  const ShardedCheckpoint c = ShardedCheckpoint::open(o.path);
  return o.json ? print_json(c) : print_text(c);
}

}  // namespace strata::ckpt_tool
