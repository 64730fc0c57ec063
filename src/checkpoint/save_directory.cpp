// Listing a checkpoint directory's saves, and choosing the one a resume-if-present run
// continues from when `latest` is missing.
#include "strata/checkpoint/save_directory.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "checkpoint/sharded_index.h"
#include "strata/checkpoint/sharded.h"
#include "strata/core/error.h"
#include "strata/distributed/object_collectives.h"
#include "strata/distributed/process_group.h"

namespace strata::checkpoint {
namespace {
namespace fs = std::filesystem;

// Rank 0's part of resume_latest_path.
std::string choose_resume(const std::string& dir, std::string* note) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / detail::kLatestFile, ec)) return dir;
  std::vector<SaveEntry> complete;
  for (const SaveEntry& s : list_saves(dir))
    if (s.complete) complete.push_back(s);
  if (complete.empty()) return "";
  std::string passed_over;
  for (const SaveEntry& s : complete) {
    std::string path = (fs::path(dir) / s.name).string();
    std::string problem;
    try {
      const std::vector<std::string> problems = ShardedCheckpoint::open(path).verify();
      if (!problems.empty()) problem = problems.front();
      if (problems.size() > 1) problem += " (and " + std::to_string(problems.size() - 1) + " more)";
    } catch (const std::exception& e) {
      problem = e.what();
    }
    if (problem.empty()) {
      if (note != nullptr)
        *note = "'" + dir + "' has no 'latest' file: resuming from " + s.name + ", its newest complete save that " +
                "verifies" + (passed_over.empty() ? "" : "; passed over (kept): " + passed_over);
      return path;
    }
    passed_over += (passed_over.empty() ? "" : "; ") + s.name + ": " + problem;
  }
  STRATA_FAIL("'", dir, "' has no 'latest' file and none of its saves verifies (", passed_over,
              "): refusing to start from step 0 beside them; move them away to start afresh");
}

}  // namespace

int64_t save_step(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return -1;
  const size_t dash = name.find('-', 5);
  const std::string digits = name.substr(5, dash == std::string::npos ? std::string::npos : dash - 5);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

std::vector<SaveEntry> list_saves(const std::string& dir) {
  std::vector<std::pair<fs::file_time_type, SaveEntry>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const int64_t step = save_step(name);
    std::error_code entry_ec;
    if (step < 0 || !entry.is_directory(entry_ec)) continue;
    const bool complete = fs::is_regular_file(entry.path() / detail::kIndexFile, entry_ec);
    found.push_back({fs::last_write_time(entry.path(), entry_ec), {name, step, complete}});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.second.step != b.second.step ? a.second.step > b.second.step : a.first > b.first;
  });
  std::vector<SaveEntry> saves;
  saves.reserve(found.size());
  for (auto& [time, save] : found) saves.push_back(std::move(save));
  return saves;
}

std::vector<std::string> newer_saves(const std::string& dir, int64_t step) {
  std::vector<std::string> names;
  for (const SaveEntry& s : list_saves(dir))
    if (s.step > step) names.push_back(s.name);
  return names;
}

std::string resume_latest_path(const std::string& dir, dist::ProcessGroup& group, std::string* note) {
  std::string chosen, error;
  if (group.rank() == 0) {
    try {
      chosen = choose_resume(dir, note);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  dist::agree_on_success(group, error, "resuming from '" + dir + "'");
  return dist::broadcast_string(group, chosen);
}

}  // namespace strata::checkpoint
