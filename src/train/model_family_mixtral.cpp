// The Mixtral family ("mixtral"): nn::Mixtral's config as config.* entries (LLaMA's and the
// mixture of experts'), its builder and its Hugging Face MixtralForCausalLM layout.
#include "strata/checkpoint/hf_mixtral.h"
#include "strata/train/training_state.h"
#include "train/metadata_fields.h"
#include "train/model_families.h"

namespace strata::train {
namespace {

const char* gating_name(nn::MoEGating g) { return g == nn::MoEGating::Softmax ? "softmax" : "sigmoid"; }

std::string entry(const checkpoint::Metadata& m, const std::string& key, const std::string& where) {
  auto it = m.find(key);
  STRATA_CHECK(it != m.end(), where, ": its metadata has no '", key, "' entry");
  return it->second;
}

nn::MoEGating gating_from(const std::string& value, const std::string& where) {
  STRATA_CHECK(value == "softmax" || value == "sigmoid", where, ": config.gating is '", value,
               "', not softmax or sigmoid");
  return value == "softmax" ? nn::MoEGating::Softmax : nn::MoEGating::Sigmoid;
}

bool bool_from(const std::string& value, const std::string& key, const std::string& where) {
  STRATA_CHECK(value == "true" || value == "false", where, ": ", key, " is '", value, "', not true or false");
  return value == "true";
}

}  // namespace

checkpoint::Metadata config_metadata(const nn::MixtralConfig& c) {
  checkpoint::Metadata m = config_metadata(c.llama);
  m["config.family"] = "mixtral";
  m["config.num_experts"] = std::to_string(c.num_experts);
  m["config.top_k"] = std::to_string(c.top_k);
  m["config.gating"] = gating_name(c.gating);
  m["config.normalize_gates"] = c.normalize_gates ? "true" : "false";
  m["config.capacity_factor"] = c.capacity_factor ? detail::exact_decimal(*c.capacity_factor) : "dropless";
  m["config.aux_loss_coef"] = detail::exact_decimal(c.aux_loss_coef);
  m["config.z_loss_coef"] = detail::exact_decimal(c.z_loss_coef);
  return m;
}

nn::MixtralConfig mixtral_config_from_metadata(const checkpoint::Metadata& m, const std::string& where) {
  detail::check_family_entry(m, "mixtral", where);
  checkpoint::Metadata llama = m;
  llama.erase("config.family");
  nn::MixtralConfig c;
  c.llama = llama_config_from_metadata(llama, where);
  c.num_experts = metadata_int(m, "config.num_experts", where, 1);
  c.top_k = metadata_int(m, "config.top_k", where, 1);
  c.gating = gating_from(entry(m, "config.gating", where), where);
  c.normalize_gates = bool_from(entry(m, "config.normalize_gates", where), "config.normalize_gates", where);
  if (entry(m, "config.capacity_factor", where) != "dropless")
    c.capacity_factor = detail::metadata_double(m, "config.capacity_factor", where);
  c.aux_loss_coef = detail::metadata_double(m, "config.aux_loss_coef", where);
  c.z_loss_coef = detail::metadata_double(m, "config.z_loss_coef", where);
  return c;
}

namespace {

// The load-balancing coefficient in transformers' normalisation. strata adds each block's
// loss (Megatron's way; 1 per block for balanced routing), transformers one loss over every
// layer's tokens together, top_k times nn::load_balancing_loss of them (top_k when
// balanced): router_aux_loss_coef = aux_loss_coef x n_layer / top_k makes the two equal for
// balanced routing (for one layer, always). transformers has no z-loss: z_loss_coef is not
// exported.
double hf_aux_coef(double aux_loss_coef, int64_t n_layer, int64_t top_k) {
  return aux_loss_coef * static_cast<double>(n_layer) / static_cast<double>(top_k);
}

checkpoint::HfMixtralConfig to_hf(const nn::MixtralConfig& c) {
  return {.llama = detail::llama_to_hf(c.llama),
          .num_experts = c.num_experts,
          .top_k = c.top_k,
          .router_aux_loss_coef = hf_aux_coef(c.aux_loss_coef, c.llama.n_layer, c.top_k),
          .output_router_logits = c.aux_loss_coef > 0.0};
}

nn::MixtralConfig from_hf(const checkpoint::HfMixtralConfig& hf) {
  nn::MixtralConfig m;
  m.llama = detail::llama_from_hf(hf.llama);
  m.num_experts = hf.num_experts;
  m.top_k = hf.top_k;
  m.aux_loss_coef =
      hf.output_router_logits ? hf.router_aux_loss_coef / hf_aux_coef(1.0, hf.llama.n_layer, hf.top_k) : 0.0;
  return m;
}

}  // namespace

namespace detail {

ModelFamily mixtral_family() {
  return {
      .name = "mixtral",
      .hf_model_type = "mixtral",
      .check_config =
          [](const checkpoint::Metadata& config, const std::string& where) {
            nn::check_mixtral_config(mixtral_config_from_metadata(config, where));
          },
      .build = [](const checkpoint::Metadata& config, std::shared_ptr<nn::LayerFactory> factory, nn::ModelPart part,
                  const std::string& where) -> std::unique_ptr<nn::CausalLM> {
        return std::make_unique<nn::Mixtral>(mixtral_config_from_metadata(config, where), std::move(factory),
                                             std::move(part));
      },
      .export_hf =
          [](const std::string& dir, const StateDict& state, const checkpoint::Metadata& config,
             const std::string& where) {
            checkpoint::export_mixtral_safetensors(dir, state, to_hf(mixtral_config_from_metadata(config, where)));
          },
      .import_hf =
          [](const std::string& dir, checkpoint::Metadata* config, int64_t padded_vocab_size) {
            checkpoint::HfMixtralConfig hf;
            StateDict state = checkpoint::import_mixtral_safetensors(dir, &hf, padded_vocab_size);
            if (config != nullptr) *config = config_metadata(from_hf(hf));
            return state;
          },
      // The degree divides the heads and each expert's width (check_mixtral_config).
      .check_tensor_parallel =
          [](const checkpoint::Metadata& config, int64_t degree, const std::string& where) {
            nn::check_mixtral_config(mixtral_config_from_metadata(config, where), degree);
          },
      .zero3_unit = nn::is_transformer_block,
  };
}

}  // namespace detail
}  // namespace strata::train
