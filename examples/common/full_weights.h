#pragma once
// The whole model's weights as one process would hold them, whatever the layout: for
// exporting them (--export-hf) from rank 0.
#include "strata/distributed/process_group.h"
#include "strata/nn/module.h"
#include "strata/parallel/zero.h"
#include "strata/tensor/state_dict.h"

namespace strata::examples {

// Collective over the groups given: tensor parallelism's parts are gathered over `tensor`
// (null: none), ZeRO-3's shards over `zero`'s group (null: no ZeRO).
StateDict full_weights(nn::Module& model, dist::ProcessGroup* tensor, parallel::ZeroOptimizer* zero);

}  // namespace strata::examples
