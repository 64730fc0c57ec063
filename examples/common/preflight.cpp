#include "common/preflight.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "strata/core/error.h"
#include "strata/distributed/init.h"

namespace strata::examples {

void check_writable_dir(const std::filesystem::path& dir, const char* option) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  STRATA_CHECK(!ec, option, " '", dir.string(), "': cannot create the directory: ", ec.message());
  STRATA_CHECK(std::filesystem::is_directory(dir), option, " '", dir.string(), "' is not a directory");
  STRATA_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, option, " '", dir.string(), "': the directory is not writable");
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  if (std::filesystem::exists(a, ec) && std::filesystem::exists(b, ec)) return std::filesystem::equivalent(a, b, ec);
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
}

double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

void check_step_memory(double rank_bytes, const std::string& what, Device device) {
  if (device.is_cuda()) return;
  const double bytes = rank_bytes * dist::local_size();
  const double have = available_memory_bytes();
  if (have <= 0 || bytes <= have) return;
  char need[64];
  std::snprintf(need, sizeof need, "%.0f", bytes);
  char avail[64];
  std::snprintf(avail, sizeof avail, "%.0f", have);
  STRATA_FAIL("out of memory: requested ", need, " bytes for one training step's activations (", what, ", ",
              dist::local_size(), " rank(s) on this node), more than the ", avail,
              " bytes available (MemAvailable); lower --batch");
}

}  // namespace strata::examples
