// ZeroOptimizer::save / load: one checkpoint file per rank (its shard of the master weights
// and its optimizer state) plus index.json naming each shard's global offsets, written into a
// temporary directory that is renamed into place once every rank has succeeded.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "strata/autograd/grad_mode.h"
#include "strata/checkpoint/atomic_file.h"
#include "strata/checkpoint/checkpoint.h"
#include "strata/core/error.h"
#include "strata/tensor/factory.h"
#include "zero_state.h"

namespace strata::parallel {
namespace {

constexpr const char* kZeroFormat = "strata-zero-v1";
namespace fs = std::filesystem;

std::string shard_file(int rank) { return "shard_" + std::to_string(rank) + ".safetensors"; }

// Every rank learns whether all succeeded; the first failing rank's message is shared as the
// rank number (each rank reports its own message).
void agree(dist::ProcessGroup& group, const std::string& error, const std::string& what) {
  Tensor flag = full({1}, error.empty() ? 0.0 : 1.0 + group.rank(), {.dtype = DType::Int64});
  if (group.size() > 1) group.all_reduce(flag, dist::ReduceOp::Max)->wait();
  const auto failed = static_cast<int64_t>(flag.item());
  if (failed == 0) return;
  STRATA_CHECK(error.empty(), what, ": ", error);
  STRATA_FAIL(what, ": rank ", failed - 1, " failed (see its error); nothing was changed here");
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
  const fs::path target = fs::path(dir);
  const fs::path tmp = fs::path(dir + ".tmp");
  std::string error;
  if (s.rank == 0) {
    try {
      fs::remove_all(tmp);
      fs::create_directories(tmp);
    } catch (const std::exception& e) {
      error = std::string("cannot create '") + tmp.string() + "': " + e.what();
    }
  }
  agree(group_, error, "ZeroOptimizer::save '" + dir + "'");

  try {
    StateDict tensors;
    for (size_t b = 0; b < s.buckets.size(); ++b) tensors["master." + std::to_string(b)] = s.buckets[b].master;
    for (auto& [key, t] : s.inner->state_dict()) tensors["optim." + key] = t;
    checkpoint::Metadata meta{{"zero_stage", std::to_string(s.options.stage)},
                  {"rank", std::to_string(s.rank)},
                  {"world_size", std::to_string(s.world)}};
    checkpoint::save_checkpoint((tmp / shard_file(s.rank)).string(), tensors, meta);
  } catch (const Error& e) {
    error = e.what();
  }
  agree(group_, error, "ZeroOptimizer::save '" + dir + "'");

  if (s.rank == 0) {
    try {
      nlohmann::json index;
      index["format"] = kZeroFormat;
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
        shards.push_back({{"rank", r}, {"file", shard_file(r)}, {"ranges", ranges}});
      }
      index["shards"] = shards;
      nlohmann::json meta = nlohmann::json::object();
      for (auto& [k, v] : metadata) meta[k] = v;
      index["metadata"] = meta;
      checkpoint::write_file_atomic((tmp / "index.json").string(), index.dump(1));
      checkpoint::fsync_directory(tmp.string());
      // Swap in: the old directory (if any) is moved aside first, then removed.
      const fs::path old = fs::path(dir + ".old");
      fs::remove_all(old);
      if (fs::exists(target)) fs::rename(target, old);
      fs::rename(tmp, target);
      fs::remove_all(old);
      checkpoint::fsync_directory(target.has_parent_path() ? target.parent_path().string() : ".");
    } catch (const std::exception& e) {
      error = std::string("writing the index / renaming into place: ") + e.what();
    }
  }
  agree(group_, error, "ZeroOptimizer::save '" + dir + "'");
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
    const fs::path path = fs::path(dir) / "index.json";
    std::ifstream in(path);
    STRATA_CHECK(in.good(), "cannot open '", path.string(), "' (not a ZeRO checkpoint directory?)");
    index = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    STRATA_CHECK(index.is_object(), "'", path.string(), "' is not valid JSON");
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
    shard = checkpoint::load_checkpoint((fs::path(dir) / shard_file(s.rank)).string());
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
  agree(group_, error, who);

  try {
    s.inner->load_state_dict(optim_state);
  } catch (const Error& e) {
    error = e.what();
  }
  agree(group_, error, who);

  for (size_t b = 0; b < s.buckets.size(); ++b) {
    State::Bucket& bk = s.buckets[b];
    bk.master.copy_(shard.tensors.at("master." + std::to_string(b)));
    if (bk.master_separate) {
      if (s.options.stage == 0) {
        bk.param->data().copy_(bk.master);
      } else {
        bk.param_shard.copy_(bk.master);
      }
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
  checkpoint::Metadata out;
  if (index.contains("metadata") && index["metadata"].is_object())
    for (auto& [k, v] : index["metadata"].items()) out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  return out;
}

}  // namespace strata::parallel
