#pragma once
// Predicates that pick modules out of a model by what they are, for code that must not know
// the concrete model: parallel/ (ZeRO-3's units) includes this header, never a model's header.
#include <functional>
#include <string>

#include "strata/nn/module.h"

namespace strata::nn {

// `name` is the module's dotted path in the model ("h.0").
using ModulePredicate = std::function<bool(const std::string& name, const Module& module)>;

// Matches every module of type M or derived from it.
template <class M>
ModulePredicate module_type_predicate() {
  return [](const std::string&, const Module& m) { return dynamic_cast<const M*>(&m) != nullptr; };
}

// Matches each nn::TransformerBlock (GPT's Block, Llama's LlamaDecoderLayer): ZeRO-3's
// default unit.
bool is_transformer_block(const std::string& name, const Module& module);

}  // namespace strata::nn
