#include "strata/nn/module_predicates.h"

#include "strata/nn/causal_lm.h"

namespace strata::nn {

bool is_transformer_block(const std::string&, const Module& module) {
  return dynamic_cast<const TransformerBlock*>(&module) != nullptr;
}

}  // namespace strata::nn
