#include "backend/cuda/cudnn_plan.h"

namespace strata::cudnn {
namespace {

std::string last_error() {
  char text[512] = {0};
  cudnnGetLastErrorString(text, sizeof text);
  return text;
}

int64_t engine_index(const Desc& config) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine of a configuration");
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t count = 0, index = -1;
  if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                               &raw) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index) !=
          CUDNN_STATUS_SUCCESS)
    return -1;
  return index;
}

}  // namespace

Desc described_device(const std::string& json) {
  Desc d(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "device properties");
  d.set_array(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, std::vector<char>(json.begin(), json.end()));
  d.finalize();
  return d;
}

std::vector<Desc> proposed_configs(const Desc& graph, const Target& target) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics of " + graph.name());
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, CUDNN_HEUR_MODE_A);
  if (target.device) heur.set_desc(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, *target.device);
  heur.finalize();
  int64_t count = 0;
  check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr),
        "counting the engine configurations of " + graph.name());
  std::vector<Desc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration of " + graph.name());
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (count > 0)
    check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                   &returned, raw.data()),
          "reading the engine configurations of " + graph.name());
  configs.resize(static_cast<size_t>(returned));
  return configs;
}

std::optional<Plan> make_plan(const Desc& graph, const Target& target, std::string* why) {
  std::vector<Desc> configs = proposed_configs(graph, target);
  std::string reason = configs.empty() ? "no engine configuration passed cuDNN's support checks: " + last_error() : "";
  for (const Desc& config : configs) {
    Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan of " + graph.name());
    plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
    if (target.handle) plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, target.handle);
    if (target.device) plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, *target.device);
    const cudnnStatus_t status = cudnnBackendFinalize(plan.get());
    if (status != CUDNN_STATUS_SUCCESS) {
      reason = std::string("engine ") + std::to_string(engine_index(config)) + ": " + cudnnGetErrorString(status) +
               " " + last_error();
      continue;
    }
    int64_t bytes = 0, count = 0;
    check(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                   &bytes),
          "reading the workspace size of " + graph.name());
    return Plan{plan, bytes, engine_index(config)};
  }
  if (why) *why = reason;
  return std::nullopt;
}

}  // namespace strata::cudnn
