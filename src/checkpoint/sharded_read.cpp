// ShardedCheckpoint: opens a save through its index and reads any region of any tensor from
// whichever pieces cover it, checking each piece's CRC-32 (see sharded.h).
#include <cstring>
#include <filesystem>

#include "checkpoint/checksum.h"
#include "checkpoint/posix_file.h"
#include "checkpoint/sharded_index.h"
#include "strata/autograd/grad_mode.h"
#include "strata/checkpoint/sharded.h"
#include "strata/core/error.h"
#include "strata/tensor/factory.h"

namespace strata::checkpoint {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const json& field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  STRATA_CHECK(it != j.end(), where, ": missing field \"", key, "\"");
  return *it;
}

Metadata string_map(const json& j, const std::string& where) {
  STRATA_CHECK(j.is_object(), where, " must be an object of strings, found ", j.dump());
  Metadata out;
  for (const auto& [k, v] : j.items()) {
    STRATA_CHECK(v.is_string(), where, "[\"", k, "\"] must be a string, found ", v.dump());
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

// Reads a piece's bytes into `dst` (room for all of them) and checks them against the
// index's CRC-32; on a mismatch `dst` holds the bad bytes and this throws.
void read_piece_into(const std::string& dir, const std::string& name, DType dtype, const PieceLocation& p, void* dst) {
  const std::string path = (fs::path(dir) / p.file).string();
  const std::string where = "sharded checkpoint '" + dir + "': tensor '" + name + "' in '" + path + "'";
  const auto expected = static_cast<uint64_t>(p.region.numel()) * dtype_size(dtype);
  STRATA_CHECK(p.byte_end - p.byte_begin == expected, where, ": the index gives ", p.byte_end - p.byte_begin,
               " bytes for ", p.region.numel(), " elements of ", dtype_name(dtype), " (", expected, " expected)");
  try {
    detail::ReadOnlyFile file(path);
    STRATA_CHECK(p.byte_end <= file.size(), "the piece's bytes [", p.byte_begin, ", ", p.byte_end,
                 ") lie beyond the end of the file (", file.size(), " bytes): truncated");
    if (expected > 0) file.read_at(p.byte_begin, dst, expected);
  } catch (const std::exception& e) {
    throw Error(where + ": " + e.what());
  }
  const uint32_t crc = detail::crc32(dst, expected);
  STRATA_CHECK(crc == p.crc32, where, ": checksum mismatch at bytes [", p.byte_begin, ", ", p.byte_end, "): expected ",
               detail::hex32(p.crc32), " (index.json), found ", detail::hex32(crc), " (the shard is corrupted)");
}

// A piece's bytes in a tensor of their own.
Tensor read_piece(const std::string& dir, const std::string& name, DType dtype, const PieceLocation& p) {
  Tensor t = empty({p.region.numel()}, {.dtype = dtype});
  read_piece_into(dir, name, dtype, p, t.raw_data());
  return t;
}

// The index's "format" is this version's; a newer strata's or the previous release's ZeRO
// format is refused saying so.
void check_format(const json& index, const std::string& where) {
  const json& format = field(index, "format", where);
  STRATA_CHECK(format.is_string(), where, ": field \"format\" must be a string");
  if (format.get<std::string>() != kShardedFormat) {
    const json& version = index.value("version", json());
    STRATA_CHECK(!(format.get<std::string>().rfind("strata-sharded-", 0) == 0 && version.is_number_integer() &&
                   version.get<int64_t>() > kShardedFormatVersion),
                 where, ": format '", format.get<std::string>(), "' (version ", version.dump(),
                 ") was written by a newer strata; this version reads ", kShardedFormat, " (version ",
                 kShardedFormatVersion, ")");
    STRATA_FAIL(where, ": format '", format.get<std::string>(), "' is not ", kShardedFormat,
                format.get<std::string>() == "strata-zero-v2"
                    ? " (a ZeRO checkpoint of the previous release, which this version does not read: resume it "
                      "with that release and save again to convert it)"
                    : "");
  }
}

// One tensor's entry of the index (`tw` names it in errors): its pieces must lie in the files
// the index lists (`files`) and cover the tensor exactly once.
TensorEntry tensor_entry(const json& t, const std::map<std::string, uint32_t>& files, const std::string& tw) {
  TensorEntry e;
  e.dtype = parse_safetensors_dtype(field(t, "dtype", tw).get<std::string>());
  e.shape = Shape(field(t, "shape", tw).get<std::vector<int64_t>>());
  for (const json& p : field(t, "pieces", tw)) {
    e.pieces.push_back(detail::parse_piece(p, tw));
    check_region(e.pieces.back().region, e.shape, tw);
    STRATA_CHECK(files.count(e.pieces.back().file) != 0, tw, ": piece in '", e.pieces.back().file,
                 "', a file the index does not list");
  }
  // Every element exactly once: a piece missing from (or doubled in) the index fails here,
  // on every rank, rather than on the rank that happens to need it.
  std::vector<std::vector<Run>> runs;
  for (const PieceLocation& p : e.pieces) runs.push_back(runs_of(p.region, e.shape));
  const std::string problem = coverage_problem(runs, e.shape.numel());
  STRATA_CHECK(problem.empty(), tw, ": the pieces do not cover the tensor exactly once: ", problem);
  return e;
}

}  // namespace

bool ShardedCheckpoint::is_sharded(const std::string& path) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / detail::kLatestFile, ec)) return true;
  const fs::path index = fs::path(path) / detail::kIndexFile;
  if (!fs::exists(index, ec)) return false;
  try {
    return json::parse(detail::read_text_file(index.string())).value("format", "") == kShardedFormat;
  } catch (const std::exception&) {
    return false;
  }
}

ShardedCheckpoint ShardedCheckpoint::open(const std::string& path) {
  ShardedCheckpoint c;
  std::error_code ec;
  c.directory_ = fs::exists(fs::path(path) / detail::kLatestFile, ec) ? detail::resolve_latest(path) : path;
  const std::string index_path = (fs::path(c.directory_) / detail::kIndexFile).string();
  STRATA_CHECK(fs::exists(index_path, ec), "'", path, "' is not a sharded checkpoint: neither a 'latest' file nor '",
               index_path, "' exists");
  const std::string where = "sharded checkpoint index '" + index_path + "'";
  json index;
  try {
    index = json::parse(detail::read_text_file(index_path));
  } catch (const json::exception& e) {
    STRATA_FAIL(where, ": not valid JSON (", e.what(), ")");
  }
  STRATA_CHECK(index.is_object(), where, ": expected a JSON object");
  check_format(index, where);
  const json& crc = field(index, detail::kIndexCrcKey, where);
  STRATA_CHECK(crc.is_string(), where, ": field \"index_crc32\" must be a string");
  const uint32_t stored = detail::parse_hex32(crc.get<std::string>(), where + ": index_crc32");
  const uint32_t computed = detail::index_crc32(index);
  STRATA_CHECK(stored == computed, where, ": index checksum mismatch: expected ", detail::hex32(stored), ", found ",
               detail::hex32(computed), " (the index was edited or corrupted)");

  const json& step = field(index, "step", where);
  STRATA_CHECK(step.is_number_integer() && step.get<int64_t>() >= 0, where, ": field \"step\" must be >= 0");
  c.step_ = step.get<int64_t>();
  c.save_id_ = field(index, "save_id", where).get<std::string>();
  c.metadata_ = string_map(field(index, "metadata", where), where + ": metadata");
  const json& ranks = field(index, "rank_metadata", where);
  STRATA_CHECK(ranks.is_array() && !ranks.empty(), where, ": field \"rank_metadata\" must be a non-empty array");
  for (size_t r = 0; r < ranks.size(); ++r)
    c.rank_metadata_.push_back(string_map(ranks[r], where + ": rank_metadata[" + std::to_string(r) + "]"));
  for (const auto& [file, info] : field(index, "files", where).items()) {
    const std::string fw = where + ": file '" + file + "'";
    c.file_header_crc_[file] = detail::parse_hex32(field(info, "header_crc32", fw).get<std::string>(), where);
    // The file's size, recorded by every save of this format; an index without it (written by
    // hand) is still read, without the size check.
    auto bytes = info.find("bytes");
    if (bytes != info.end()) {
      STRATA_CHECK(bytes->is_number_unsigned(), fw, ": field \"bytes\" must be a non-negative integer, found ",
                   bytes->dump());
      c.file_bytes_[file] = bytes->get<uint64_t>();
    }
  }
  for (const auto& [name, t] : field(index, "tensors", where).items())
    c.tensors_.emplace(name, tensor_entry(t, c.file_header_crc_, where + ": tensor '" + name + "'"));
  return c;
}

void ShardedCheckpoint::check_header(const std::string& file) const {
  if (headers_checked_.count(file) != 0) return;
  const std::string path = (fs::path(directory_) / file).string();
  try {
    detail::ReadOnlyFile f(path);
    // Bytes appended after the save are read by nobody, so no piece checksum would see them.
    auto recorded = file_bytes_.find(file);
    if (recorded != file_bytes_.end())
      STRATA_CHECK(f.size() == recorded->second, "the file has ", f.size(), " bytes but index.json records ",
                   recorded->second, f.size() < recorded->second ? " (truncated)" : " (bytes appended after the save)");
    uint64_t n = 0;
    STRATA_CHECK(f.size() >= 8, "shorter than 8 bytes (truncated)");
    f.read_at(0, &n, sizeof n);
    STRATA_CHECK(n <= f.size() - 8, "header length ", n, " exceeds the file (truncated)");
    std::string text(n, '\0');
    f.read_at(8, text.data(), n);
    const uint32_t crc = detail::crc32(text.data(), text.size());
    const uint32_t expected = file_header_crc_.at(file);
    STRATA_CHECK(crc == expected, "header checksum mismatch: expected ", detail::hex32(expected),
                 " (index.json), found ", detail::hex32(crc), " (a shard of another save, or a replaced file)");
  } catch (const std::exception& e) {
    throw Error("sharded checkpoint '" + directory_ + "': '" + path + "': " + e.what());
  }
  headers_checked_.insert(file);
}

const Metadata& ShardedCheckpoint::rank_metadata(int rank) const {
  STRATA_CHECK(rank >= 0 && rank < world_size(), "sharded checkpoint '", directory_, "': no rank ", rank, " (saved by ",
               world_size(), " ranks)");
  return rank_metadata_[static_cast<size_t>(rank)];
}

std::vector<std::string> ShardedCheckpoint::files() const {
  std::vector<std::string> out;
  for (const auto& [file, crc] : file_header_crc_) out.push_back(file);
  return out;
}

const TensorEntry& ShardedCheckpoint::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  STRATA_CHECK(it != tensors_.end(), "sharded checkpoint '", directory_, "' has no tensor '", name, "' (it holds ",
               tensors_.size(), " tensors)");
  return it->second;
}

void ShardedCheckpoint::read(const std::string& name, const Shape& expected_shape, const Region& region,
                             Tensor& dest) const {
  NoGradGuard no_grad;
  const TensorEntry& e = tensor(name);
  const std::string where = "sharded checkpoint '" + directory_ + "': tensor '" + name + "'";
  STRATA_CHECK(e.shape == expected_shape, where, " has shape ", e.shape, " but the model expects ", expected_shape,
               " (not a difference that resharding explains)");
  check_region(region, e.shape, where);
  STRATA_CHECK(dest.defined() && dest.is_contiguous() && dest.device().is_cpu() && dest.numel() == region.numel(),
               where, ": the destination must be a contiguous CPU tensor of ", region.numel(), " elements");
  const std::vector<Run> want = runs_of(region, e.shape);
  const size_t elem = dtype_size(dest.dtype());
  auto* out = static_cast<char*>(dest.raw_data());
  int64_t filled = 0;
  for (const PieceLocation& p : e.pieces) {
    const std::vector<Run> have = runs_of(p.region, e.shape);
    // Skip pieces that share nothing before reading their bytes. A piece that lies whole in
    // `dest`, in order and in dest's dtype (a rank reading back what it saved), is read
    // straight into place: no buffer and no second copy.
    int64_t shared = 0, shift = -1;
    bool in_order = dest.dtype() == e.dtype;
    for_each_overlap(have, want, [&](int64_t src, int64_t dst, int64_t n) {
      if (shared == 0) shift = dst - src;
      in_order = in_order && dst - src == shift;
      shared += n;
    });
    if (shared == 0) continue;
    check_header(p.file);
    if (in_order && shared == p.region.numel()) {
      read_piece_into(directory_, name, e.dtype, p, out + static_cast<size_t>(shift) * elem);
      filled += shared;
      continue;
    }
    if (!last_piece_.defined() || last_piece_key_ != std::make_pair(p.file, p.byte_begin)) {
      last_piece_ = read_piece(directory_, name, e.dtype, p);
      last_piece_key_ = {p.file, p.byte_begin};
    }
    Tensor bytes = last_piece_;
    if (bytes.dtype() != dest.dtype()) bytes = bytes.to(dest.dtype());
    const auto* in = static_cast<const char*>(bytes.raw_data());
    filled += for_each_overlap(have, want, [&](int64_t src, int64_t dst, int64_t n) {
      std::memcpy(out + static_cast<size_t>(dst) * elem, in + static_cast<size_t>(src) * elem,
                  static_cast<size_t>(n) * elem);
    });
  }
  STRATA_CHECK(filled == region.numel(), where, ": the pieces cover ", filled, " of the ", region.numel(),
               " elements asked for (the index is incomplete)");
  dest.bump_version();  // written through its pointer: a graph that saved dest must not run
}

Tensor ShardedCheckpoint::read_whole(const std::string& name) const {
  const TensorEntry& e = tensor(name);
  Tensor out = empty(e.shape, {.dtype = e.dtype});
  read(name, e.shape, Region::whole(e.shape), out);
  return out;
}

std::vector<std::string> ShardedCheckpoint::verify() const {
  std::vector<std::string> problems;
  for (const auto& [file, header_crc] : file_header_crc_) {
    try {
      check_header(file);
    } catch (const std::exception& e) {
      problems.emplace_back(e.what());
    }
  }
  // (Coverage was checked when the index was opened.)
  for (const auto& [name, e] : tensors_) {
    for (const PieceLocation& p : e.pieces) {
      try {
        read_piece(directory_, name, e.dtype, p);
      } catch (const std::exception& ex) {
        problems.emplace_back(ex.what());
      }
    }
  }
  return problems;
}

}  // namespace strata::checkpoint
