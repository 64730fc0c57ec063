// The GPT-2 family ("gpt2"): nn::GPT's config as config.* entries, its builder and its
// Hugging Face GPT2LMHeadModel layout.
#include "strata/checkpoint/hf_gpt2.h"
#include "strata/train/training_state.h"
#include "train/metadata_fields.h"
#include "train/model_families.h"

namespace strata::train {

checkpoint::Metadata config_metadata(const nn::GPTConfig& c) {
  checkpoint::Metadata m{{"config.family", "gpt2"},
                         {"config.vocab_size", std::to_string(c.vocab_size)},
                         {"config.context", std::to_string(c.context)},
                         {"config.n_layer", std::to_string(c.n_layer)},
                         {"config.n_head", std::to_string(c.n_head)},
                         {"config.n_embd", std::to_string(c.n_embd)},
                         {"config.dropout", detail::exact_decimal(c.dropout)},
                         {"config.dtype", std::string(dtype_name(c.dtype))},
                         {"config.param_dtype", std::string(dtype_name(c.parameter_dtype()))}};
  detail::add_padded_vocab_size(m, c.vocab_size, c.padded_vocab_size);
  return m;
}

nn::GPTConfig gpt_config_from_metadata(const checkpoint::Metadata& m, const std::string& where) {
  detail::check_family_entry(m, "gpt2", where);
  nn::GPTConfig c;
  c.vocab_size = metadata_int(m, "config.vocab_size", where, 1);
  c.padded_vocab_size = detail::metadata_padded_vocab_size(m, c.vocab_size, where);
  c.context = metadata_int(m, "config.context", where, 1);
  c.n_layer = metadata_int(m, "config.n_layer", where, 1);
  c.n_head = metadata_int(m, "config.n_head", where, 1);
  c.n_embd = metadata_int(m, "config.n_embd", where, 1);
  c.dropout = detail::metadata_double(m, "config.dropout", where);
  c.dtype = detail::metadata_dtype(m, "config.dtype", where);
  if (m.count("config.param_dtype") != 0) c.param_dtype = detail::metadata_dtype(m, "config.param_dtype", where);
  return c;
}

namespace {

checkpoint::Gpt2Config to_hf(const nn::GPTConfig& c) {
  return {.vocab_size = c.vocab_size,
          .n_positions = c.context,
          .n_embd = c.n_embd,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .dropout = c.dropout,
          .padded_vocab_size = c.padded_vocab_size};
}

// Imported weights are float32: so is the configuration (a run may load them into any dtype).
nn::GPTConfig from_hf(const checkpoint::Gpt2Config& c) {
  return {.vocab_size = c.vocab_size,
          .padded_vocab_size = c.padded_vocab_size,
          .context = c.n_positions,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .n_embd = c.n_embd,
          .dropout = c.dropout};
}

}  // namespace

namespace detail {

ModelFamily gpt2_family() {
  return {
      .name = "gpt2",
      .hf_model_type = "gpt2",
      .check_config = [](const checkpoint::Metadata& config,
                         const std::string& where) { (void)gpt_config_from_metadata(config, where); },
      .build = [](const checkpoint::Metadata& config, std::shared_ptr<nn::LayerFactory> factory, nn::ModelPart part,
                  const std::string& where) -> std::unique_ptr<nn::CausalLM> {
        return std::make_unique<nn::GPT>(gpt_config_from_metadata(config, where), std::move(factory), std::move(part));
      },
      .export_hf =
          [](const std::string& dir, const StateDict& state, const checkpoint::Metadata& config,
             const std::string& where) {
            checkpoint::export_gpt2_safetensors(dir, state, to_hf(gpt_config_from_metadata(config, where)));
          },
      .import_hf =
          [](const std::string& dir, checkpoint::Metadata* config, int64_t padded_vocab_size) {
            checkpoint::Gpt2Config hf;
            StateDict state = checkpoint::import_gpt2_safetensors(dir, &hf, padded_vocab_size);
            if (config != nullptr) *config = config_metadata(from_hf(hf));
            return state;
          },
      // Attention splits by head; the MLP's 4 x n_embd divides, and the vocabulary's rows
      // (padded_vocab_size when set) are padded further to a multiple of the degree.
      .check_tensor_parallel =
          [](const checkpoint::Metadata& config, int64_t degree, const std::string& where) {
            const nn::GPTConfig c = gpt_config_from_metadata(config, where);
            STRATA_CHECK(degree >= 1 && c.n_head % degree == 0, where, ": the tensor-parallel degree ", degree,
                         " does not divide config.n_head ", c.n_head);
          },
      .zero3_unit = nn::is_transformer_block,
  };
}

}  // namespace detail
}  // namespace strata::train
