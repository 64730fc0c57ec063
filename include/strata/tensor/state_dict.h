#pragma once
#include <map>
#include <string>

#include "strata/tensor/tensor.h"

namespace strata {

// Named tensors: a module's parameters and buffers ("h.0.attn.c_attn.weight"), an
// optimizer's state ("state.3.exp_avg", "step"), or a whole training state. Scalars are
// stored as one-element tensors so that everything saves through one format.
using StateDict = std::map<std::string, Tensor>;

}  // namespace strata
