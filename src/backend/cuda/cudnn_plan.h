#pragma once
// Execution plans for cuDNN graphs: engine heuristics (mode A) over an operation graph, then
// the first proposed engine configuration whose plan finalizes. A plan is built for a live
// cuDNN handle (a GPU) or for a described device (cuDNN >= 9.8 takes a JSON description of
// a GPU's properties), which lets CPU tests run cuDNN's support checks on strata's graphs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cudnn_backend.h"

namespace strata::cudnn {

// What a plan is built for: exactly one of a handle and a device description.
struct Target {
  cudnnHandle_t handle = nullptr;
  const Desc* device = nullptr;
};

struct Plan {
  Desc plan;
  int64_t workspace_bytes = 0;
  int64_t engine = -1;  // cuDNN's global engine index, for diagnostics
};

// The finalized device-properties descriptor of a JSON description (cuDNN's schema).
Desc described_device(const std::string& json);

// The engine configurations heuristics propose for the graph, best first, after cuDNN's own
// support checks (which drop those that cannot run it on the target).
std::vector<Desc> proposed_configs(const Desc& graph, const Target& target);

// The first proposed configuration that finalizes into a plan; nullopt when none does, with
// the reason in *why (cuDNN's last error text).
std::optional<Plan> make_plan(const Desc& graph, const Target& target, std::string* why);

}  // namespace strata::cudnn
