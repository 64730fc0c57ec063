#pragma once
#include <string>
#include <utility>
#include <vector>

#include "strata/optim/optimizer.h"

namespace strata::optim {

// Splits parameters into two groups by the nanoGPT rule: tensors with dim() >= 2 (matmul
// weights, embeddings) decay with `weight_decay`; tensors with dim() < 2 (biases, LayerNorm
// gains and shifts) do not decay. Returns {decay group, no-decay group}, always both (one
// may be empty), each with `lr`, parameters in the order given. Parameters that do not
// require grad are left out, and a tensor listed under several names (tied weights) is
// taken once, at its first name. The names only serve error messages.
std::vector<ParamGroup> weight_decay_groups(const std::vector<std::pair<std::string, Tensor>>& named_params, double lr,
                                            double weight_decay);

// One group of `params` with `lr` and `weight_decay`: what an optimizer built from a plain
// parameter list holds.
std::vector<ParamGroup> one_group(std::vector<Tensor> params, double lr, double weight_decay);

}  // namespace strata::optim
