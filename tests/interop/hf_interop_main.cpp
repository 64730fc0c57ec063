// strata's half of the Hugging Face interop test (driven by hf_interop.py):
//   strata_hf_interop export gpt2|llama|mixtral[_bf16] DIR   builds a small seeded model, exports it to DIR
//                                             and writes its logits on fixed tokens
//   strata_hf_interop logits gpt2|llama|mixtral DIR   imports DIR (written by save_pretrained) and
//                                             writes its logits on DIR/tokens.safetensors
// Logits go to DIR/strata_logits.safetensors ("tokens" int64 [B, T], "logits" float32).
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "strata/strata.h"

using namespace strata;

namespace {

// Every parameter moved off its initial value (norm weights of 1, biases of 0), so that a
// tensor read from the wrong place changes the logits.
void perturb(nn::Module& model) {
  NoGradGuard no_grad;
  Generator gen(77);
  for (auto& [name, p] : model.named_parameters()) {
    Tensor moved = p.to(DType::Float32);  // bfloat16 parameters move in float32, then round
    add_(moved, randn(p.shape(), {}, &gen), 0.05);
    p.copy_(moved);
  }
}

void write_logits(nn::CausalLM& model, const Tensor& tokens, const std::string& dir) {
  NoGradGuard no_grad;
  model.eval();
  StateDict out{{"tokens", tokens}, {"logits", model.forward(tokens)}};
  checkpoint::save_safetensors(dir + "/strata_logits.safetensors", out);
}

Tensor fixed_tokens(int64_t vocab, int64_t T) {
  Generator gen(3);
  return randint(0, vocab, {2, T}, {.dtype = DType::Int64}, &gen);
}

// Mixtral through the model registry (its config.* entries and HF layout), as strata-ckpt does;
// `bf16`: bfloat16 parameters (computed in float32), as train_llama --param-dtype bf16 keeps them.
std::unique_ptr<nn::CausalLM> exported_mixtral(const std::string& dir, bool bf16) {
  nn::MixtralConfig c;
  c.llama = {.vocab_size = 50,
             .context = 16,
             .n_layer = 2,
             .n_head = 4,
             .n_kv_head = 2,
             .n_embd = 32,
             .intermediate_size = 24,
             .rope_theta = 1000.0,
             .rms_norm_eps = 1e-5,
             .seed = 5};
  if (bf16) c.llama.param_dtype = DType::BFloat16;
  c.num_experts = 4;
  c.top_k = 2;
  auto model = std::make_unique<nn::Mixtral>(c);
  perturb(*model);
  train::model_family("mixtral").export_hf(dir, model->state_dict(), train::config_metadata(c), "interop");
  return model;
}

std::unique_ptr<nn::CausalLM> imported_mixtral(const std::string& dir) {
  const train::ModelFamily& family = train::model_family("mixtral");
  checkpoint::Metadata config;
  StateDict state = family.import_hf(dir, &config, 0);
  auto model = family.build(config, nullptr, {}, dir);
  model->load_state_dict(state);
  return model;
}

std::unique_ptr<nn::CausalLM> exported(const std::string& family, const std::string& dir) {
  if (family == "mixtral" || family == "mixtral_bf16") return exported_mixtral(dir, family == "mixtral_bf16");
  if (family == "gpt2") {
    const checkpoint::Gpt2Config c{
        .vocab_size = 50, .n_positions = 16, .n_embd = 32, .n_layer = 2, .n_head = 4, .dropout = 0.0};
    auto model = std::make_unique<nn::GPT>(nn::GPTConfig{.vocab_size = c.vocab_size,
                                                         .context = c.n_positions,
                                                         .n_layer = c.n_layer,
                                                         .n_head = c.n_head,
                                                         .n_embd = c.n_embd,
                                                         .seed = 5});
    perturb(*model);
    checkpoint::export_gpt2_safetensors(dir, model->state_dict(), c);
    return model;
  }
  const checkpoint::HfLlamaConfig c{.vocab_size = 50,
                                    .context = 16,
                                    .n_layer = 2,
                                    .n_head = 4,
                                    .n_kv_head = 2,
                                    .n_embd = 32,
                                    .intermediate_size = 48,
                                    .rope_theta = 1000.0,
                                    .rms_norm_eps = 1e-5};
  auto model = std::make_unique<nn::Llama>(nn::LlamaConfig{.vocab_size = c.vocab_size,
                                                           .context = c.context,
                                                           .n_layer = c.n_layer,
                                                           .n_head = c.n_head,
                                                           .n_kv_head = c.n_kv_head,
                                                           .n_embd = c.n_embd,
                                                           .intermediate_size = c.intermediate_size,
                                                           .rope_theta = c.rope_theta,
                                                           .rms_norm_eps = c.rms_norm_eps,
                                                           .seed = 5});
  perturb(*model);
  checkpoint::export_llama_safetensors(dir, model->state_dict(), c);
  return model;
}

std::unique_ptr<nn::CausalLM> imported(const std::string& family, const std::string& dir) {
  if (family == "mixtral") return imported_mixtral(dir);
  if (family == "gpt2") {
    checkpoint::Gpt2Config c;
    StateDict state = checkpoint::import_gpt2_safetensors(dir, &c);
    auto model = std::make_unique<nn::GPT>(nn::GPTConfig{.vocab_size = c.vocab_size,
                                                         .context = c.n_positions,
                                                         .n_layer = c.n_layer,
                                                         .n_head = c.n_head,
                                                         .n_embd = c.n_embd});
    model->load_state_dict(state);
    return model;
  }
  checkpoint::HfLlamaConfig c;
  StateDict state = checkpoint::import_llama_safetensors(dir, &c);
  auto model = std::make_unique<nn::Llama>(nn::LlamaConfig{.vocab_size = c.vocab_size,
                                                           .context = c.context,
                                                           .n_layer = c.n_layer,
                                                           .n_head = c.n_head,
                                                           .n_kv_head = c.n_kv_head,
                                                           .n_embd = c.n_embd,
                                                           .intermediate_size = c.intermediate_size,
                                                           .rope_theta = c.rope_theta,
                                                           .rms_norm_eps = c.rms_norm_eps,
                                                           .init_std = c.init_std});
  model->load_state_dict(state);
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage =
      "usage: strata_hf_interop export|logits gpt2|llama|mixtral DIR (export also mixtral_bf16)\n";
  if (argc != 4) {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }
  const std::string mode = argv[1], family = argv[2], dir = argv[3];
  const bool known =
      family == "gpt2" || family == "llama" || family == "mixtral" || (mode == "export" && family == "mixtral_bf16");
  if ((mode != "export" && mode != "logits") || !known) {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }
  try {
    if (mode == "export") {
      write_logits(*exported(family, dir), fixed_tokens(50, 16), dir);
    } else {
      std::unique_ptr<nn::CausalLM> model = imported(family, dir);
      write_logits(*model, checkpoint::load_safetensors(dir + "/tokens.safetensors").tensors.at("tokens"), dir);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_hf_interop: %s\n", e.what());
    return 1;
  }
  return 0;
}
