// continuation_compare: how far a resumed run ended from the uninterrupted run it continues.
//
//   continuation_compare PAIRS_FILE
//
// Each line of PAIRS_FILE: "LABEL BOUND RESUMED UNINTERRUPTED_END UNINTERRUPTED_AT_RESUME",
// three sharded checkpoints (a directory with `latest`, or a step directory). For each line it
// prints the relative difference
//
//   rho = ||resumed - uninterrupted_end|| / ||uninterrupted_end - uninterrupted_at_resume||
//
// over every weight (2-norms over all elements, in float64; a weight is master.<name> where
// the checkpoint has it, the float32 master of bf16 parameters, else model.<name>): the
// difference measured against the progress the uninterrupted run made after the resume point.
// The line fails when rho exceeds BOUND or a weight is missing or shaped differently. Exit 0
// when every line passes, 1 when one fails, 2 on bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "strata/checkpoint/sharded.h"
#include "strata/core/error.h"

namespace {

using strata::checkpoint::ShardedCheckpoint;

// Every weight of a checkpoint in float64, by parameter (or buffer) name.
std::map<std::string, std::vector<double>> weights(const std::string& path) {
  const ShardedCheckpoint c = ShardedCheckpoint::open(path);
  std::map<std::string, std::vector<double>> out;
  for (const auto& [tensor, entry] : c.tensors()) {
    if (tensor.rfind("model.", 0) != 0) continue;
    const std::string name = tensor.substr(6);
    const std::string source = c.contains("master." + name) ? "master." + name : tensor;
    out[name] = c.read_whole(source).to_vector<double>();
  }
  return out;
}

// rho of one line, or throws naming what does not match.
double relative_difference(const std::string& resumed, const std::string& end, const std::string& at_resume) {
  const auto r = weights(resumed), e = weights(end), k = weights(at_resume);
  double diff = 0, progress = 0;
  for (const auto& [name, ev] : e) {
    auto rv = r.find(name);
    auto kv = k.find(name);
    STRATA_CHECK(rv != r.end() && kv != k.end(), "weight '", name, "' is missing from '",
                 rv == r.end() ? resumed : at_resume, "'");
    STRATA_CHECK(rv->second.size() == ev.size() && kv->second.size() == ev.size(), "weight '", name,
                 "' has another size in '", resumed, "' or '", at_resume, "'");
    for (size_t i = 0; i < ev.size(); ++i) {
      diff += (rv->second[i] - ev[i]) * (rv->second[i] - ev[i]);
      progress += (ev[i] - kv->second[i]) * (ev[i] - kv->second[i]);
    }
  }
  STRATA_CHECK(r.size() == e.size(), "'", resumed, "' holds ", r.size(), " weights, '", end, "' ", e.size());
  STRATA_CHECK(progress > 0, "'", end, "' equals '", at_resume, "': the uninterrupted run made no progress");
  return std::sqrt(diff / progress);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: continuation_compare PAIRS_FILE\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "continuation_compare: cannot read '%s'\n", argv[1]);
    return 2;
  }
  int failed = 0, lines = 0;
  double worst = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string label, resumed, end, at_resume;
    double bound = 0;
    if (!(fields >> label >> bound >> resumed >> end >> at_resume)) {
      std::fprintf(stderr, "continuation_compare: malformed line '%s'\n", line.c_str());
      return 2;
    }
    ++lines;
    try {
      const double rho = relative_difference(resumed, end, at_resume);
      worst = std::max(worst, rho);
      const bool ok = rho <= bound;
      failed += !ok;
      std::printf("%-4s %-28s rho %.3e (bound %.1e)\n", ok ? "ok" : "FAIL", label.c_str(), rho, bound);
    } catch (const std::exception& e) {
      ++failed;
      std::printf("FAIL %-28s %s\n", label.c_str(), e.what());
    }
  }
  std::printf("%d of %d continuations within their bounds (largest rho %.3e)\n", lines - failed, lines, worst);
  return failed == 0 && lines > 0 ? 0 : 1;
}
