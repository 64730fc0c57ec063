#include "distributed/launcher_env.h"

#include <cstdlib>
#include <initializer_list>

namespace strata::dist::detail {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int first_of(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    const int v = env_nonnegative(name, -1);
    if (v >= 0) return v;
  }
  return fallback;
}

std::string sanitized(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    const bool keep =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (!keep) c = '_';
  }
  return out;
}

}  // namespace

int env_nonnegative(const char* name, int fallback) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && x >= 0 && x <= 1 << 30) ? static_cast<int>(x) : fallback;
}

bool under_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

LauncherView launcher_view() {
  LauncherView v;
  v.rank = first_of({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}, -1);
  v.size = first_of({"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "PMI_SIZE"}, 0);
  v.local_size = env_nonnegative("OMPI_COMM_WORLD_LOCAL_SIZE", 0);
  if (v.local_size == 0 && env_nonnegative("SLURM_STEP_NUM_NODES", 0) == 1) v.local_size = v.size;
  if (const char* ns = env("PMIX_NAMESPACE")) {
    v.job = sanitized(ns);
  } else if (const char* id = env("OMPI_MCA_ess_base_jobid")) {
    v.job = sanitized(id);
  } else if (const char* job = env("SLURM_JOB_ID")) {
    const char* step = env("SLURM_STEP_ID");
    v.job = sanitized(std::string(job) + "." + (step != nullptr ? step : "0"));
  }
  return v;
}

}  // namespace strata::dist::detail
