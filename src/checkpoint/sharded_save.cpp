// save_sharded: every rank writes its shard file into a temporary step directory, rank 0
// checks coverage and writes index.json last, then renames the directory into place and
// moves `latest` (see sharded.h for the protocol and its crash safety).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "checkpoint/checksum.h"
#include "checkpoint/crash_point.h"
#include "checkpoint/safetensors_detail.h"
#include "checkpoint/sharded_index.h"
#include "strata/autograd/grad_mode.h"
#include "strata/checkpoint/atomic_file.h"
#include "strata/checkpoint/save_directory.h"
#include "strata/checkpoint/sharded.h"
#include "strata/core/error.h"
#include "strata/distributed/object_collectives.h"
#include "strata/distributed/process_group.h"
#include "strata/tensor/factory.h"

namespace strata::checkpoint {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string draw_save_id() {
  std::random_device device;
  const uint64_t id = (static_cast<uint64_t>(device()) << 32) ^ device();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

// A piece's bytes as stored: the box itself when the piece is all of it (readable as a
// tensor by any safetensors tool), else the flat range.
Tensor stored_form(const SavePiece& p) {
  const bool whole_box = p.region.begin == 0 && p.region.end == p.region.box_numel();
  return p.data.reshape(whole_box ? p.region.extents : Shape{p.region.numel()});
}

// Writes this rank's shard file; returns its description for the index:
// {"file", "header_crc32", "bytes", "pieces": [{"name", "dtype", "shape", "piece"}]}. A tensor
// of which this rank holds several pieces (the q, k and v parts of a fused projection) is
// stored as "<name>", "<name>#1", "<name>#2", ...
json write_shard_file(const std::string& temp_dir, int rank, const SaveSnapshot& snapshot, const std::string& save_id) {
  const std::string file = detail::shard_file_name(rank);
  const std::string path = (fs::path(temp_dir) / file).string();
  StateDict tensors;
  std::map<std::string, const SavePiece*> by_key;
  std::map<std::string, int> count;
  for (const SavePiece& p : snapshot.pieces) {
    check_region(p.region, p.global_shape, "save_sharded: tensor '" + p.name + "'");
    STRATA_CHECK(p.data.defined() && p.data.numel() == p.region.numel(), "save_sharded: tensor '", p.name,
                 "': the piece holds ", p.data.defined() ? p.data.numel() : 0, " elements, its region ",
                 p.region.numel());
    const int k = count[p.name]++;
    const std::string key = k == 0 ? p.name : p.name + "#" + std::to_string(k);
    STRATA_CHECK(by_key.count(key) == 0, "save_sharded: rank ", rank, ": two pieces are named '", key, "'");
    by_key[key] = &p;
    tensors.emplace(key, stored_form(p));
  }
  std::vector<detail::SafetensorsEntry> entries = detail::plan_safetensors(tensors, path);
  const Metadata meta{{"format", kShardedFormat},
                      {"step", std::to_string(snapshot.step)},
                      {"save_id", save_id},
                      {"rank", std::to_string(rank)}};
  const detail::SafetensorsWritten written =
      detail::write_safetensors(path, entries, detail::safetensors_header(entries, meta));
  json described = json::array();
  for (const detail::SafetensorsEntry& e : entries) {
    const SavePiece& p = *by_key.at(e.name);
    const PieceLocation loc{.file = file,
                            .region = p.region,
                            .byte_begin = written.data_start + e.begin,
                            .byte_end = written.data_start + e.end,
                            .crc32 = detail::crc32(e.tensor.raw_data(), e.tensor.nbytes())};
    described.push_back({{"name", p.name},
                         {"dtype", safetensors_dtype_name(e.tensor.dtype())},
                         {"shape", p.global_shape.vec()},
                         {"piece", detail::piece_json(loc)}});
  }
  return {{"file", file},
          {"header_crc32", detail::hex32(written.header_crc32)},
          {"bytes", written.file_bytes},
          {"pieces", described}};
}

// Why pieces overlap, when the likely cause shows: several ranks each wrote the whole tensor,
// as every rank of a data-parallel group does when the save was not told the group (its ranks
// hold replicas, and one of them must write each). Empty otherwise.
std::string overlap_hint(const std::vector<std::vector<Run>>& pieces, int64_t numel) {
  int64_t whole = 0;
  for (const auto& runs : pieces) {
    int64_t n = 0;
    for (const Run& r : runs) n += r.length;
    if (n == numel) ++whole;
  }
  if (whole < 2) return "";
  return ". " + std::to_string(whole) +
         " pieces each hold the whole tensor: ranks that hold replicas of it (data parallelism: DDP or ZeRO) "
         "must save it once. Did the save miss the data-parallel group? Pass it as train::CheckpointTarget::data "
         "(and a tensor-parallel group as ::tensor) so that each replica is written by one rank";
}

// Rank 0: the index from every rank's shard description, after checking that every tensor
// has one dtype and shape and that its pieces cover it exactly once.
json build_index(const SaveSnapshot& snapshot, const std::string& save_id, const std::vector<json>& shards,
                 const std::vector<json>& rank_metadata) {
  json tensors = json::object();
  json files = json::object();
  for (size_t r = 0; r < shards.size(); ++r) {
    const json& shard = shards[r];
    files[shard["file"].get<std::string>()] = {{"header_crc32", shard["header_crc32"]}, {"bytes", shard["bytes"]}};
    for (const json& t : shard["pieces"]) {
      const std::string name = t["name"].get<std::string>();
      auto it = tensors.find(name);
      if (it == tensors.end()) {
        tensors[name] = {{"dtype", t["dtype"]}, {"shape", t["shape"]}, {"pieces", json::array()}};
        it = tensors.find(name);
      }
      STRATA_CHECK((*it)["dtype"] == t["dtype"] && (*it)["shape"] == t["shape"], "save_sharded: tensor '", name,
                   "' is ", t["dtype"].dump(), " ", t["shape"].dump(), " on rank ", r, " but ", (*it)["dtype"].dump(),
                   " ", (*it)["shape"].dump(), " on a lower rank");
      (*it)["pieces"].push_back(t["piece"]);
    }
  }
  for (const auto& [name, t] : tensors.items()) {
    const Shape shape(t["shape"].get<std::vector<int64_t>>());
    std::vector<std::vector<Run>> runs;
    for (const json& p : t["pieces"]) runs.push_back(runs_of(detail::parse_piece(p, name).region, shape));
    const std::string problem = coverage_problem(runs, shape.numel());
    STRATA_CHECK(problem.empty(), "save_sharded: the ranks' pieces of tensor '", name, "' (shape ", shape,
                 ") do not cover it exactly once: ", problem, overlap_hint(runs, shape.numel()));
  }
  json index = {{"format", kShardedFormat},
                {"version", kShardedFormatVersion},
                {"step", snapshot.step},
                {"save_id", save_id},
                {"world_size", shards.size()},
                {"metadata", snapshot.metadata},
                {"rank_metadata", rank_metadata},
                {"files", files},
                {"tensors", tensors}};
  index[detail::kIndexCrcKey] = detail::hex32(detail::index_crc32(index));
  return index;
}

// Removes a save directory without ever leaving a partly deleted "step-*": it is first
// renamed (atomically) to ".deleting-<name>", which no reader takes for a save, and a crash
// during the removal leaves only that. Best effort: what cannot be removed stays.
void remove_save(const fs::path& dir) {
  std::error_code ec;
  const std::string name = dir.filename().string();
  fs::path doomed = dir;
  if (name.rfind(".deleting-", 0) != 0) {
    doomed = dir.parent_path() / (".deleting-" + name);
    fs::rename(dir, doomed, ec);
    if (ec) return;
  }
  fs::remove_all(doomed, ec);
}

// Keeps `current`, every save of a higher step than `current_step` (never removed: a run that
// resumed from an older save must not delete newer progress; checkpoint::newer_saves lists
// them for the caller's note) and the newest `keep` - 1 others (by step, then modification
// time); removes the rest, leftovers of failed saves and of interrupted removals, and
// temporaries of `latest` that a crash left behind.
void prune(const fs::path& root, const std::string& current, int64_t current_step, int keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-step-", 0) == 0 || name.rfind(".deleting-", 0) == 0) {
      remove_save(entry.path());
    } else if (name.rfind(std::string(".") + detail::kLatestFile + ".tmp.", 0) == 0) {
      // Only rank 0 of the run holding the directory lock writes `latest`, and its own
      // temporary is renamed by now: any other is a crashed writer's.
      std::error_code remove_ec;
      fs::remove(entry.path(), remove_ec);
    }
  }
  int kept = 1;  // current
  for (const SaveEntry& save : list_saves(root.string())) {
    if (save.name == current || save.step > current_step) continue;
    if (kept < keep) {
      ++kept;
    } else {
      remove_save(root / save.name);
    }
  }
}

}  // namespace

SaveSnapshot take_snapshot(int64_t step, const std::vector<SavePiece>& pieces, const Metadata& metadata,
                           const Metadata& rank_metadata, bool own_copies) {
  NoGradGuard no_grad;
  SaveSnapshot s{.step = step, .pieces = {}, .metadata = metadata, .rank_metadata = rank_metadata};
  s.pieces.reserve(pieces.size());
  for (const SavePiece& p : pieces) {
    STRATA_CHECK(p.data.defined(), "take_snapshot: tensor '", p.name, "' is undefined");
    Tensor copy = p.data.to(Device::cpu()).contiguous();
    if (own_copies && copy.raw_data() == p.data.raw_data()) copy = copy.clone();  // own memory, not a view
    s.pieces.push_back({p.name, p.global_shape, p.region, copy});
  }
  return s;
}

SaveTicket begin_save(const std::string& dir, dist::ProcessGroup& group, int64_t step, const SaveOptions& options) {
  const std::string who = "save_sharded '" + dir + "' (step " + std::to_string(step) + ")";
  STRATA_CHECK(options.keep_last >= 1, who, ": keep_last must be at least 1, got ", options.keep_last);
  STRATA_CHECK(step >= 0, who, ": the step must be >= 0");
  SaveTicket t;
  t.start = Clock::now();
  t.dir = dir;
  t.step = step;
  t.save_id = dist::broadcast_string(group, group.rank() == 0 ? draw_save_id() : std::string());
  t.temp_dir = (fs::path(dir) / (".tmp-" + detail::step_directory_name(step, t.save_id))).string();
  std::string error;
  if (group.rank() == 0) {
    try {
      fs::create_directories(t.temp_dir);
    } catch (const std::exception& e) {
      error = std::string("cannot create '") + t.temp_dir + "': " + e.what();
    }
  }
  dist::agree_on_success(group, error, who);
  return t;
}

ShardWrite write_shard(const SaveTicket& ticket, int rank, const SaveSnapshot& snapshot) noexcept {
  ShardWrite out;
  const auto start = Clock::now();
  try {
    STRATA_CHECK(snapshot.step == ticket.step, "save_sharded: the snapshot is of step ", snapshot.step,
                 ", the save of step ", ticket.step);
    const json shard = write_shard_file(ticket.temp_dir, rank, snapshot, ticket.save_id);
    out.bytes = shard["bytes"].get<uint64_t>();
    out.description = shard.dump();
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  out.seconds = seconds_since(start);
  return out;
}

SaveResult finish_save(const SaveTicket& ticket, dist::ProcessGroup& group, const SaveSnapshot& snapshot,
                       const ShardWrite& mine, const SaveOptions& options) {
  const std::string who = "save_sharded '" + ticket.dir + "' (step " + std::to_string(ticket.step) + ")";
  const fs::path root(ticket.dir);
  const fs::path temp(ticket.temp_dir);
  const std::string final_name = detail::step_directory_name(ticket.step, ticket.save_id);
  // Whether every rank wrote its shard; if not, rank 0 removes the unreferenced directory.
  Tensor failed = full({1}, mine.error.empty() ? 0.0 : 1.0, {.dtype = DType::Int64});
  if (group.size() > 1) group.all_reduce(failed, dist::ReduceOp::Max)->wait();
  std::string error = mine.error;
  if (failed.to_vector<int64_t>()[0] != 0) {
    if (group.rank() == 0) remove_save(temp);
    dist::agree_on_success(group, error, who);  // throws on every rank: one of them failed
  }
  const std::vector<std::string> texts = dist::all_gather_strings(group, mine.description);
  const std::vector<std::string> rank_meta = dist::all_gather_strings(group, json(snapshot.rank_metadata).dump());
  if (group.rank() == 0) {
    bool pointer_moved = false;
    try {
      std::vector<json> shards, metas;
      for (const std::string& t : texts) shards.push_back(json::parse(t));
      for (const std::string& t : rank_meta) metas.push_back(json::parse(t));
      const json index = build_index(snapshot, ticket.save_id, shards, metas);
      write_file_atomic((temp / detail::kIndexFile).string(), detail::dump_json(index, ticket.dir));
      fsync_directory(temp.string());
      detail::crash_point("sharded_save.before_rename");
      fs::rename(temp, root / final_name);
      fsync_directory(root.string());
      detail::crash_point("sharded_save.before_pointer");
      write_file_atomic((root / detail::kLatestFile).string(), final_name + "\n");
      pointer_moved = true;
      detail::crash_point("sharded_save.after_pointer");
      prune(root, final_name, ticket.step, options.keep_last);
    } catch (const std::exception& e) {
      error = e.what();
      if (!pointer_moved) {  // nothing refers to this save: remove it
        remove_save(temp);
        if (fs::exists(root / final_name)) remove_save(root / final_name);
      }
    }
  }
  dist::agree_on_success(group, error, who);
  SaveResult result;
  result.directory = (root / final_name).string();
  result.bytes_written = mine.bytes;
  result.write_seconds = mine.seconds;
  result.total_seconds = seconds_since(ticket.start);
  return result;
}

SaveResult save_sharded(const std::string& dir, dist::ProcessGroup& group, const SaveSnapshot& snapshot,
                        const SaveOptions& options) {
  const SaveTicket ticket = begin_save(dir, group, snapshot.step, options);
  return finish_save(ticket, group, snapshot, write_shard(ticket, group.rank(), snapshot), options);
}

}  // namespace strata::checkpoint
