// The LLaMA family ("llama"): nn::Llama's config as config.* entries, its builder and its
// Hugging Face LlamaForCausalLM layout.
#include "strata/checkpoint/hf_llama.h"
#include "strata/train/training_state.h"
#include "train/metadata_fields.h"
#include "train/model_families.h"

namespace strata::train {

checkpoint::Metadata config_metadata(const nn::LlamaConfig& c) {
  checkpoint::Metadata m{{"config.family", "llama"},
                         {"config.vocab_size", std::to_string(c.vocab_size)},
                         {"config.context", std::to_string(c.context)},
                         {"config.n_layer", std::to_string(c.n_layer)},
                         {"config.n_head", std::to_string(c.n_head)},
                         {"config.n_kv_head", std::to_string(c.n_kv_head)},
                         {"config.n_embd", std::to_string(c.n_embd)},
                         {"config.intermediate_size", std::to_string(c.intermediate_size)},
                         {"config.rope_theta", detail::exact_decimal(c.rope_theta)},
                         {"config.rms_norm_eps", detail::exact_decimal(c.rms_norm_eps)},
                         {"config.dtype", std::string(dtype_name(c.dtype))},
                         {"config.param_dtype", std::string(dtype_name(c.parameter_dtype()))}};
  detail::add_padded_vocab_size(m, c.vocab_size, c.padded_vocab_size);
  return m;
}

nn::LlamaConfig llama_config_from_metadata(const checkpoint::Metadata& m, const std::string& where) {
  detail::check_family_entry(m, "llama", where);
  nn::LlamaConfig c;
  c.vocab_size = metadata_int(m, "config.vocab_size", where, 1);
  c.padded_vocab_size = detail::metadata_padded_vocab_size(m, c.vocab_size, where);
  c.context = metadata_int(m, "config.context", where, 1);
  c.n_layer = metadata_int(m, "config.n_layer", where, 1);
  c.n_head = metadata_int(m, "config.n_head", where, 1);
  c.n_kv_head = metadata_int(m, "config.n_kv_head", where, 1);
  c.n_embd = metadata_int(m, "config.n_embd", where, 1);
  c.intermediate_size = metadata_int(m, "config.intermediate_size", where, 1);
  c.rope_theta = detail::metadata_double(m, "config.rope_theta", where);
  c.rms_norm_eps = detail::metadata_double(m, "config.rms_norm_eps", where);
  c.dtype = detail::metadata_dtype(m, "config.dtype", where);
  if (m.count("config.param_dtype") != 0) c.param_dtype = detail::metadata_dtype(m, "config.param_dtype", where);
  return c;
}

namespace detail {

checkpoint::HfLlamaConfig llama_to_hf(const nn::LlamaConfig& c) {
  return {.vocab_size = c.vocab_size,
          .context = c.context,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .n_kv_head = c.n_kv_head,
          .n_embd = c.n_embd,
          .intermediate_size = c.intermediate_size,
          .rope_theta = c.rope_theta,
          .rms_norm_eps = c.rms_norm_eps,
          .init_std = c.init_std,
          .padded_vocab_size = c.padded_vocab_size};
}

nn::LlamaConfig llama_from_hf(const checkpoint::HfLlamaConfig& c) {
  return {.vocab_size = c.vocab_size,
          .padded_vocab_size = c.padded_vocab_size,
          .context = c.context,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .n_kv_head = c.n_kv_head,
          .n_embd = c.n_embd,
          .intermediate_size = c.intermediate_size,
          .rope_theta = c.rope_theta,
          .rms_norm_eps = c.rms_norm_eps,
          .init_std = c.init_std};
}

ModelFamily llama_family() {
  return {
      .name = "llama",
      .hf_model_type = "llama",
      .check_config = [](const checkpoint::Metadata& config,
                         const std::string& where) { (void)llama_config_from_metadata(config, where); },
      .build = [](const checkpoint::Metadata& config, std::shared_ptr<nn::LayerFactory> factory, nn::ModelPart part,
                  const std::string& where) -> std::unique_ptr<nn::CausalLM> {
        return std::make_unique<nn::Llama>(llama_config_from_metadata(config, where), std::move(factory),
                                           std::move(part));
      },
      .export_hf =
          [](const std::string& dir, const StateDict& state, const checkpoint::Metadata& config,
             const std::string& where) {
            checkpoint::export_llama_safetensors(dir, state, llama_to_hf(llama_config_from_metadata(config, where)));
          },
      .import_hf =
          [](const std::string& dir, checkpoint::Metadata* config, int64_t padded_vocab_size) {
            checkpoint::HfLlamaConfig hf;
            StateDict state = checkpoint::import_llama_safetensors(dir, &hf, padded_vocab_size);
            if (config != nullptr) *config = config_metadata(llama_from_hf(hf));
            return state;
          },
      // Query and key/value heads and the SwiGLU width split; the vocabulary's rows
      // (padded_vocab_size when set) are padded further to a multiple of the degree.
      .check_tensor_parallel =
          [](const checkpoint::Metadata& config, int64_t degree, const std::string& where) {
            nn::check_llama_config(llama_config_from_metadata(config, where), degree);
          },
      .zero3_unit = nn::is_transformer_block,
  };
}

}  // namespace detail
}  // namespace strata::train
