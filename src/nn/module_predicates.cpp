#include "strata/nn/module_predicates.h"

#include "strata/nn/gpt.h"

namespace strata::nn {

bool is_transformer_block(const std::string&, const Module& module) {
  return dynamic_cast<const Block*>(&module) != nullptr;
}

}  // namespace strata::nn
