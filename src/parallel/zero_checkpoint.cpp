// ZeroOptimizer::save / load: one checkpoint file per rank (its shard of the master weights
// and its optimizer state) plus index.json naming each shard's global offsets and checksum,
// written into a new step directory <dir>/step-<step>-<save id>/; the file <dir>/latest,
// replaced atomically once every rank has succeeded, names the complete one
// (docs/checkpoint-format.md).
#include <cstdio>
#include <filesystem>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "strata/autograd/grad_mode.h"
#include "strata/checkpoint/atomic_file.h"
#include "strata/checkpoint/checkpoint.h"
#include "checkpoint/checksum.h"
#include "strata/core/error.h"
#include "strata/distributed/object_collectives.h"
#include "strata/tensor/factory.h"
#include "checkpoint/crash_point.h"
#include "zero_state.h"

namespace strata::parallel {
namespace {

constexpr const char* kZeroFormat = "strata-zero-v2";
constexpr const char* kLegacyZeroFormat = "strata-zero-v1";
constexpr const char* kLatestFile = "latest";
constexpr const char* kIndexCrcKey = "index_crc32";
namespace fs = std::filesystem;

std::string shard_file(int rank) { return "shard_" + std::to_string(rank) + ".safetensors"; }

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// CRC-32 of the index's compact JSON (sorted keys, as nlohmann::json keeps them) without the
// checksum itself: any edited value (the step, the sampler position) changes it.
uint32_t index_crc32(nlohmann::json index) {
  index.erase(kIndexCrcKey);
  const std::string text = index.dump();
  return checkpoint::detail::crc32(text.data(), text.size());
}

// The step of a save's identity: the caller's "step" when it is a plain number, else the
// optimizer's step count.
std::string save_step(const checkpoint::Metadata& metadata, int64_t optimizer_steps) {
  auto it = metadata.find("step");
  if (it != metadata.end() && !it->second.empty() && it->second.size() <= 19 &&
      it->second.find_first_not_of("0123456789") == std::string::npos)
    return it->second;
  return std::to_string(optimizer_steps);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_CHECK(in.good(), "cannot open '", path.string(), "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The step directory `latest` names, refusing what this version cannot verify.
fs::path resolve_latest(const std::string& dir) {
  const fs::path root(dir);
  const fs::path latest = root / kLatestFile;
  if (!fs::exists(latest)) {
    STRATA_CHECK(!fs::exists(root / "index.json"), "'", dir, "' holds a ZeRO checkpoint in the previous layout (",
                 kLegacyZeroFormat, ": index.json and shard files directly in the directory, shards without a save "
                 "identity), which this version does not load because shards mixed from different saves could not "
                 "be detected; resume it with the release that wrote it, or start a new run");
    STRATA_FAIL("'", dir, "' is not a complete ZeRO checkpoint: it has no '", kLatestFile,
                "' file (no save into it has completed)");
  }
  std::string name = read_text(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  STRATA_CHECK(name.rfind("step-", 0) == 0 && name.find('/') == std::string::npos, "'", latest.string(),
               "' does not name a step directory: '", name, "'");
  const fs::path target = root / name;
  STRATA_CHECK(fs::is_directory(target), "'", latest.string(), "' names '", name, "', which does not exist in '", dir,
               "'");
  return target;
}

nlohmann::json layout_json(const ZeroOptimizer::State& s) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& b : s.buckets) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : b.param->entries())
      entries.push_back({{"name", e.name}, {"shape", std::vector<int64_t>(e.shape.begin(), e.shape.end())},
                         {"offset", e.offset}});
    buckets.push_back({{"global_offset", b.param->global_offset()},
                       {"numel", b.param->numel()},
                       {"shard_numel", b.own_numel},
                       {"entries", entries}});
  }
  return buckets;
}

}  // namespace

void ZeroOptimizer::save(const std::string& dir, const checkpoint::Metadata& metadata) {
  NoGradGuard no_grad;
  State& s = *state_;
  STRATA_CHECK(!dir.empty(), "ZeroOptimizer::save: empty directory name");
  const std::string who = "ZeroOptimizer::save '" + dir + "'";
  const fs::path root = fs::path(dir);
  // The save's identity: its step and a random id drawn by rank 0, shared with every rank.
  Tensor id_tensor = full({1}, 0.0, {.dtype = DType::Int64});
  if (s.rank == 0) {
    std::random_device rd;
    const uint64_t id = (uint64_t{rd()} << 32 | rd()) & 0x7fffffffffffffffULL;  // non-negative as an int64
    id_tensor.data<int64_t>()[0] = static_cast<int64_t>(id);
  }
  if (s.world > 1) group_.broadcast(id_tensor, 0)->wait();
  const std::string save_id = hex64(static_cast<uint64_t>(id_tensor.data<int64_t>()[0]));
  const std::string step = save_step(metadata, s.inner->step_count());
  const std::string name = "step-" + step + "-" + save_id;
  const fs::path target = root / name;

  std::string error;
  if (s.rank == 0) {
    try {
      STRATA_CHECK(!fs::exists(root) || fs::is_directory(root), "'", dir, "' exists and is not a directory");
      fs::create_directories(target);
    } catch (const std::exception& e) {
      error = std::string("cannot create '") + target.string() + "': " + e.what();
    }
  }
  dist::agree_on_success(group_, error, who);

  Tensor crcs = zeros({s.world}, {.dtype = DType::Int64});
  try {
    StateDict tensors;
    for (size_t b = 0; b < s.buckets.size(); ++b) tensors["master." + std::to_string(b)] = s.buckets[b].master;
    for (auto& [key, t] : s.inner->state_dict()) tensors["optim." + key] = t;
    checkpoint::Metadata meta{{"zero_stage", std::to_string(s.options.stage)},
                              {"rank", std::to_string(s.rank)},
                              {"world_size", std::to_string(s.world)},
                              {"save_id", save_id},
                              {"step", step}};
    const std::string crc = checkpoint::save_checkpoint((target / shard_file(s.rank)).string(), tensors, meta);
    crcs.data<int64_t>()[s.rank] = static_cast<int64_t>(std::stoul(crc, nullptr, 16));
  } catch (const std::exception& e) {
    error = e.what();
  }
  dist::agree_on_success(group_, error, who);
  // Every shard's header checksum, for the index (the ranks' other entries are zero).
  if (s.world > 1) group_.all_reduce(crcs, dist::ReduceOp::Sum)->wait();

  if (s.rank == 0) {
    try {
      nlohmann::json index;
      index["format"] = kZeroFormat;
      index["save_id"] = save_id;
      index["step"] = step;
      index["stage"] = s.options.stage;
      index["world_size"] = s.world;
      index["param_dtype"] = std::string(checkpoint::safetensors_dtype_name(s.param_dtype));
      index["master_dtype"] = std::string(checkpoint::safetensors_dtype_name(s.options.master_dtype));
      index["optimizer_steps"] = s.inner->step_count();
      index["buckets"] = layout_json(s);
      nlohmann::json shards = nlohmann::json::array();
      for (int r = 0; r < s.world; ++r) {
        nlohmann::json ranges = nlohmann::json::array();
        for (size_t b = 0; b < s.buckets.size(); ++b) {
          const auto& fb = *s.buckets[b].param;
          const int64_t begin = s.options.stage >= 1 ? fb.shard_begin(r) : 0;
          ranges.push_back({{"tensor", "master." + std::to_string(b)},
                            {"global_offset", fb.global_offset() + begin},
                            {"numel", s.buckets[b].own_numel}});
        }
        shards.push_back({{"rank", r},
                          {"file", shard_file(r)},
                          {"header_crc32", hex32(static_cast<uint32_t>(crcs.data<int64_t>()[r]))},
                          {"ranges", ranges}});
      }
      index["shards"] = shards;
      nlohmann::json meta = nlohmann::json::object();
      for (auto& [k, v] : metadata) meta[k] = v;
      index["metadata"] = meta;
      index[kIndexCrcKey] = hex32(index_crc32(index));
      checkpoint::write_file_atomic((target / "index.json").string(), index.dump(1) + "\n");
      checkpoint::fsync_directory(target.string());
      // The step directory is complete and durable: one atomic rename of the pointer makes
      // it the checkpoint. Until then `latest` names the previous complete save.
      checkpoint::detail::crash_point("zero_save.before_pointer");
      checkpoint::write_file_atomic((root / kLatestFile).string(), name + "\n");
      checkpoint::detail::crash_point("zero_save.after_pointer");
      // Only now may older saves go: other step directories (complete or abandoned by a
      // crash) and the files of the previous release's layout.
      for (const auto& entry : fs::directory_iterator(root)) {
        const std::string n = entry.path().filename().string();
        const bool stale_step = n.rfind("step-", 0) == 0 && n != name && entry.is_directory();
        const bool legacy = n == "index.json" || (n.rfind("shard_", 0) == 0 && entry.path().extension() == ".safetensors");
        if (stale_step || legacy) fs::remove_all(entry.path());
      }
    } catch (const std::exception& e) {
      error = std::string("writing the index / moving 'latest': ") + e.what();
    }
  }
  dist::agree_on_success(group_, error, who);
}

checkpoint::Metadata ZeroOptimizer::load(const std::string& dir) {
  NoGradGuard no_grad;
  State& s = *state_;
  const std::string who = "ZeroOptimizer::load '" + dir + "'";
  nlohmann::json index;
  checkpoint::Checkpoint shard;
  StateDict optim_state;
  std::string error;
  try {
    const fs::path step_dir = resolve_latest(dir);
    const fs::path path = step_dir / "index.json";
    index = nlohmann::json::parse(read_text(path), nullptr, /*allow_exceptions=*/false);
    STRATA_CHECK(index.is_object(), "'", path.string(), "' is not valid JSON");
    STRATA_CHECK(index.contains(kIndexCrcKey) && index[kIndexCrcKey].is_string(), "'", path.string(), "' has no \"",
                 kIndexCrcKey, "\"; not a complete strata ZeRO index");
    const std::string stored_crc = index[kIndexCrcKey].get<std::string>();
    const std::string found_crc = hex32(index_crc32(index));
    STRATA_CHECK(stored_crc == found_crc, "'", path.string(), "': index checksum mismatch: expected ", stored_crc,
                 " (stored), found ", found_crc, " (a value such as the step or the sampler position was edited or "
                 "corrupted)");
    const std::string format = index.value("format", "");
    STRATA_CHECK(format == kZeroFormat, "index.json has format \"", format, "\", expected \"", kZeroFormat, "\"");
    const int stage = index.value("stage", -1);
    const int world = index.value("world_size", -1);
    STRATA_CHECK(stage == s.options.stage && world == s.world, "the checkpoint was written at ZeRO stage ", stage,
                 " on ", world, " rank(s); this run is stage ", s.options.stage, " on ", s.world,
                 " rank(s). Resuming at another stage or world size (resharding) is not supported yet");
    const std::string pd = index.value("param_dtype", ""), md = index.value("master_dtype", "");
    STRATA_CHECK(pd == checkpoint::safetensors_dtype_name(s.param_dtype) && md == checkpoint::safetensors_dtype_name(s.options.master_dtype),
                 "the checkpoint holds ", pd, " parameters with ", md, " master weights; this run has ",
                 checkpoint::safetensors_dtype_name(s.param_dtype), " and ", checkpoint::safetensors_dtype_name(s.options.master_dtype));
    const nlohmann::json mine = layout_json(s);
    if (index["buckets"] != mine) {
      // Name the first bucket that differs, and its first differing entry when there is one.
      std::ostringstream os;
      const auto& theirs = index["buckets"];
      size_t b = 0;
      while (b < mine.size() && b < theirs.size() && theirs[b] == mine[b]) ++b;
      os << "the parameter layout differs from this run's at bucket " << b << " (the checkpoint has "
         << theirs.size() << " buckets, this run " << mine.size() << ")";
      if (b < mine.size() && b < theirs.size() && theirs[b].contains("entries")) {
        const auto& te = theirs[b]["entries"];
        const auto& me = mine[b]["entries"];
        size_t e = 0;
        while (e < te.size() && e < me.size() && te[e] == me[e]) ++e;
        if (e < te.size() && e < me.size())
          os << ": found " << te[e].dump() << ", expected " << me[e].dump();
      }
      STRATA_FAIL(os.str(), "; was it written for another model or bucket size?");
    }
    const fs::path shard_path = step_dir / shard_file(s.rank);
    shard = checkpoint::load_checkpoint(shard_path.string());
    // The shard must come from the save the index describes, byte for byte.
    const std::string want_id = index.value("save_id", ""), want_step = index.value("step", "");
    auto meta_of = [&](const char* key) {
      auto it = shard.metadata.find(key);
      return it == shard.metadata.end() ? std::string("(none)") : it->second;
    };
    const std::string got_id = meta_of("save_id"), got_step = meta_of("step");
    STRATA_CHECK(got_id == want_id && got_step == want_step, "'", shard_path.string(),
                 "' comes from another save: the shard is step ", got_step, " save id ", got_id,
                 ", index.json is step ", want_step, " save id ", want_id,
                 " (shards mixed from different saves are refused)");
    const auto& shards = index["shards"];
    STRATA_CHECK(shards.is_array() && static_cast<int>(shards.size()) == s.world &&
                     shards[s.rank].contains("header_crc32"),
                 "'", path.string(), "' has no checksum for shard ", s.rank);
    const std::string want_crc = shards[s.rank]["header_crc32"].get<std::string>();
    STRATA_CHECK(shard.header_crc32 == want_crc, "'", shard_path.string(), "': shard checksum mismatch: index.json "
                 "records ", want_crc, ", the file has ", shard.header_crc32, " (the shard was replaced)");
    for (size_t b = 0; b < s.buckets.size(); ++b) {
      const std::string key = "master." + std::to_string(b);
      auto it = shard.tensors.find(key);
      STRATA_CHECK(it != shard.tensors.end(), shard_file(s.rank), " has no tensor \"", key, "\"");
      const Tensor& t = it->second;
      STRATA_CHECK(t.shape() == s.buckets[b].master.shape() && t.dtype() == s.buckets[b].master.dtype(),
                   shard_file(s.rank), ": \"", key, "\" is ", t.shape(), " ", t.dtype(), ", expected ",
                   s.buckets[b].master.shape(), " ", s.buckets[b].master.dtype());
    }
    for (auto& [key, t] : shard.tensors)
      if (key.rfind("optim.", 0) == 0) optim_state[key.substr(6)] = t;
    // Validates every key, shape and dtype before changing anything (Optimizer's contract);
    // a failure on any rank leaves every rank unchanged only for the optimizer: check first.
  } catch (const Error& e) {
    error = e.what();
  } catch (const std::exception& e) {
    error = e.what();
  }
  dist::agree_on_success(group_, error, who);

  try {
    s.inner->load_state_dict(optim_state);
  } catch (const Error& e) {
    error = e.what();
  }
  dist::agree_on_success(group_, error, who);

  for (size_t b = 0; b < s.buckets.size(); ++b)
    s.buckets[b].master.copy_(shard.tensors.at("master." + std::to_string(b)));
  reload_parameters_from_master();
  checkpoint::Metadata out;
  if (index.contains("metadata") && index["metadata"].is_object())
    for (auto& [k, v] : index["metadata"].items()) out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  return out;
}

std::vector<ZeroOptimizer::OwnedPiece> ZeroOptimizer::owned_pieces() const {
  const State& s = *state_;
  // The inner optimizer numbers its parameters group by group.
  std::map<const void*, int64_t> inner_index;
  int64_t next = 0;
  for (const optim::ParamGroup& g : s.inner->param_groups())
    for (const Tensor& p : g.params) inner_index[p.raw_data()] = next++;
  std::vector<OwnedPiece> out;
  for (const State::Bucket& b : s.buckets) {
    const std::vector<FlatBuffer::Piece> pieces =
        s.options.stage >= 1 ? b.param->pieces(s.rank) : std::vector<FlatBuffer::Piece>{};
    for (size_t k = 0; k < b.pieces.size(); ++k) {
      const Tensor& master = b.pieces[k];
      const FlatBuffer::Entry* entry = nullptr;
      int64_t offset = 0;
      if (s.options.stage >= 1) {
        entry = &b.param->entries()[pieces[k].entry];
        offset = pieces[k].entry_offset;
      } else {
        // Stage 0: piece k is entry k, whole.
        entry = &b.param->entries()[k];
      }
      out.push_back({.name = entry->name, .offset = offset, .numel = master.numel(), .master = master,
                     .inner_index = inner_index.at(master.raw_data())});
    }
  }
  return out;
}

void ZeroOptimizer::reload_parameters_from_master() {
  NoGradGuard no_grad;
  State& s = *state_;
  for (State::Bucket& bk : s.buckets) {
    if (!bk.master_separate) continue;
    if (s.options.stage == 0) {
      bk.param->data().copy_(bk.master);
    } else {
      bk.param_shard.copy_(bk.master);
    }
  }
  if (s.options.stage == 1 || s.options.stage == 2) {
    std::vector<dist::WorkPtr> works;
    for (State::Bucket& bk : s.buckets) {
      Tensor full_params = bk.param->data();
      works.push_back(group_.all_gather(full_params, bk.param_shard));
    }
    for (auto& w : works) w->wait();
  }
  zero_grad();
}

}  // namespace strata::parallel
