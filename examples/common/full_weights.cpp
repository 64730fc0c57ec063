#include "common/full_weights.h"

#include <optional>

#include "strata/parallel/tp_layers.h"

namespace strata::examples {

StateDict full_weights(nn::Module& model, dist::ProcessGroup* tensor, parallel::ZeroOptimizer* zero) {
  if (tensor == nullptr) return zero != nullptr ? zero->full_parameters() : model.state_dict();
  // ZeRO-3 holds only shards of the tensor-parallel parts: gather those first.
  std::optional<parallel::ZeroOptimizer::GatheredParameters> gathered;
  if (zero != nullptr) gathered.emplace(*zero);
  return parallel::full_state_dict(model, *tensor);
}

}  // namespace strata::examples
