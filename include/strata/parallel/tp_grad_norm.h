#pragma once
// Gradient clipping for tensor-parallel models: the global L2 norm counts every parameter
// once. A split parameter's squares are summed over the tensor-parallel group; a replicated
// one (a norm weight, a row-parallel bias) has the same gradient on every rank and is
// counted once, not degree times. With ZeRO, set ZeroOptions::tensor_parallel instead and
// call ZeroOptimizer::clip_grad_norm.
#include <functional>
#include <string>

#include "strata/distributed/process_group.h"
#include "strata/nn/module.h"
#include "strata/optim/grad_clip.h"

namespace strata::parallel {

// The global norm of `model`'s gradients (collective over `tp`: one 8-byte all-reduce).
double tp_grad_norm(nn::Module& model, dist::ProcessGroup& tp);
// Scales every gradient by max_norm / (norm + 1e-6) when below 1, as
// optim::clip_grad_norm; returns the norm before clipping (inf or nan: gradients untouched,
// and with options.error_if_nonfinite an error on every rank, which all see the same norm).
double tp_clip_grad_norm(nn::Module& model, double max_norm, dist::ProcessGroup& tp,
                         const optim::ClipOptions& options = {});
// The global norm under tensor and pipeline parallelism together: split parameters summed
// over `tensor`, each stage's part summed over `pipeline`, and a parameter for which
// `duplicate(name)` holds (a pipeline stage's copy of a tied parameter, counted by the stage
// holding the original: parallel::Pipeline::duplicate_parameters()) left out. Unset members
// mean no such parallelism. Collective over both groups.
struct ModelParallelGroups {
  dist::ProcessGroup* tensor = nullptr;
  dist::ProcessGroup* pipeline = nullptr;
  std::function<bool(const std::string&)> duplicate = {};
};
double grad_norm(nn::Module& model, const ModelParallelGroups& groups);
// Clips to max_norm as tp_clip_grad_norm does, with that norm; returns the norm before clipping.
double clip_grad_norm(nn::Module& model, double max_norm, const ModelParallelGroups& groups,
                      const optim::ClipOptions& options = {});

// Whether a parameter name belongs to a tensor-parallel layer's split parameters in `model`
// (for ZeroOptions::tensor_parallel.is_split). Holds a copy of the names.
std::function<bool(const std::string&)> split_parameter_predicate(nn::Module& model);

}  // namespace strata::parallel
