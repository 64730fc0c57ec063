#pragma once
// Model families by name, so that code that knows a model only from a checkpoint (strata-ckpt,
// a resumed run, a trainer's export) handles it without knowing the concrete model type or
// guessing it from which metadata keys exist. A checkpoint records its family as the
// metadata entry "config.family" beside the family's "config.<field>" entries.
//
// Each family bundles: its config (as config.* entries, read and written in one place), a
// builder, its Hugging Face layout (export and import), its tensor-parallel plan (which sizes
// the degree splits; the split itself is the nn::LayerFactory's) and ZeRO-3's unit predicate.
// GPT-2 ("gpt2"), LLaMA ("llama") and Mixtral ("mixtral") are registered; register_model_family adds others.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/checkpoint/checkpoint.h"
#include "strata/nn/causal_lm.h"
#include "strata/nn/gpt.h"
#include "strata/nn/llama.h"
#include "strata/nn/mixtral.h"
#include "strata/nn/module_predicates.h"
#include "strata/tensor/state_dict.h"

namespace strata::train {

struct ModelFamily {
  std::string name;           // "gpt2": the value of config.family
  std::string hf_model_type;  // config.json's model_type in its Hugging Face layout
  // Checks that config.* entries describe a model of this family (every field there and
  // well-formed); errors name `where` and the field.
  std::function<void(const checkpoint::Metadata& config, const std::string& where)> check_config;
  // The model the config.* entries describe (the part `part` of it, its split layers from
  // `factory`; null: one process). Throws naming `where` and the field that is missing or bad.
  std::function<std::unique_ptr<nn::CausalLM>(const checkpoint::Metadata& config, std::shared_ptr<nn::LayerFactory>,
                                              nn::ModelPart, const std::string& where)>
      build;
  // Hugging Face layout: writes `dir`/model.safetensors and config.json from a whole model's
  // state dict (without the padding rows of a padded vocabulary: vocab_size rows); reads one
  // back, its config as config.* entries, its vocabulary tensors padded with zero rows to
  // padded_vocab_size (0: none).
  std::function<void(const std::string& dir, const StateDict& state, const checkpoint::Metadata& config,
                     const std::string& where)>
      export_hf;
  std::function<StateDict(const std::string& dir, checkpoint::Metadata* config, int64_t padded_vocab_size)> import_hf;
  // Tensor-parallel plan: refuses a degree that does not divide what the family splits.
  std::function<void(const checkpoint::Metadata& config, int64_t degree, const std::string& where)>
      check_tensor_parallel;
  nn::ModulePredicate zero3_unit = nn::is_transformer_block;  // ZeRO-3's gather/free units
};

// Adds a family (its name must be new).
void register_model_family(ModelFamily family);
// The family registered as `name`; an unknown name throws listing the known ones.
const ModelFamily& model_family(const std::string& name);
std::vector<std::string> model_family_names();
// The family a checkpoint's metadata records in config.family. A checkpoint written before
// families were recorded has none: refused, naming the field (`where` names the checkpoint);
// tools take the family from the user instead (strata-ckpt's --format).
const ModelFamily& family_of(const checkpoint::Metadata& metadata, const std::string& where);

// A configuration as config.* entries, with config.family: the fields a checkpoint must match
// beyond its parameter shapes. GPT: vocab_size, context, n_layer, n_head, n_embd, dropout,
// dtype, param_dtype. LLaMA: vocab_size, context, n_layer, n_head, n_kv_head, n_embd,
// intermediate_size, rope_theta, rms_norm_eps, dtype, param_dtype. Both: padded_vocab_size
// when it pads (absent: no padding, as in checkpoints written before it existed). (The initialisation
// fields, seed and init_std, are left out: they change nothing a checkpoint holds.)
checkpoint::Metadata config_metadata(const nn::GPTConfig& config);
checkpoint::Metadata config_metadata(const nn::LlamaConfig& config);
// Mixtral: LLaMA's fields and num_experts, top_k, gating (softmax|sigmoid), normalize_gates,
// capacity_factor ("dropless" when unset), aux_loss_coef, z_loss_coef.
checkpoint::Metadata config_metadata(const nn::MixtralConfig& config);
// The configuration those entries describe, back. Fields they do not hold keep their
// defaults; a missing "config.param_dtype" means the parameters are in `dtype`. Throws
// strata::Error naming `where` and the field when one is missing or malformed, or when
// config.family names another family.
nn::GPTConfig gpt_config_from_metadata(const checkpoint::Metadata& metadata, const std::string& where);
nn::LlamaConfig llama_config_from_metadata(const checkpoint::Metadata& metadata, const std::string& where);
nn::MixtralConfig mixtral_config_from_metadata(const checkpoint::Metadata& metadata, const std::string& where);

// The names these had before the registry (the same functions).
inline checkpoint::Metadata gpt_config_metadata(const nn::GPTConfig& c) { return config_metadata(c); }
inline checkpoint::Metadata llama_config_metadata(const nn::LlamaConfig& c) { return config_metadata(c); }

}  // namespace strata::train
