#pragma once
// What the Hugging Face exports and imports (hf_gpt2.cpp, hf_llama.cpp) share (internal):
// matching a state dict against a model family's list of tensors, writing the model
// directory, and reading config.json with errors that name the file and the field.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/tensor/state_dict.h"

namespace strata::checkpoint::hf {

// One parameter of a model family.
struct TensorSpec {
  std::string name;         // strata's
  std::string file_name;    // in model.safetensors
  Shape shape;              // strata's layout
  bool transposed = false;  // HF stores it [in, out] (GPT-2's Conv1D)
  Shape file_shape() const { return transposed ? Shape{shape[1], shape[0]} : shape; }
};

// The float32 tensors to write, keyed by file name. Every spec must be in `state` (strata's
// names) with its shape and a floating dtype; any other name in `state` is an error unless
// `skippable` is set and says true for it. `where` starts every error; `what` names the family's parameters in the
// error for an unexpected tensor ("GPT-2 parameter for n_layer=2").
StateDict tensors_for_export(const StateDict& state, const std::vector<TensorSpec>& specs,
                             const std::function<bool(const std::string&)>& skippable, const std::string& where,
                             const std::string& what);

// The config.json fields of every transformers model, for float32 weights; a family adds
// its own with update().
nlohmann::json common_config(const char* model_type, const char* architecture, int64_t vocab_size,
                             bool tie_word_embeddings, double initializer_range);

// dir/name ("config.json", "model.safetensors").
std::string file_in(const std::string& dir, const char* name);

// Creates `dir` if needed and writes model.safetensors (metadata format "pt", which
// transformers requires) and config.json, each atomically.
void write_model_dir(const std::string& dir, const StateDict& tensors, const nlohmann::json& config,
                     const std::string& where);

// strata's float32 tensors from `file_tensors` (keyed by file name, ignored entries already
// dropped): every spec must be there with its file shape and a floating dtype, and no other
// tensor may be.
StateDict tensors_from_import(const StateDict& file_tensors, const std::vector<TensorSpec>& specs,
                              const std::string& where, const std::string& what);

// Fails, naming `field` ("n_layer") and its value, unless the file's layer tensors
// ("<prefix><i>.<rest>") number exactly n_layer distinct layers. Run before building per-layer
// lists, so that a huge value costs nothing: the layers checked are bounded by the file.
void check_layer_count(const StateDict& file_tensors, const std::string& prefix, const char* field, int64_t n_layer,
                       const std::string& where);

// Fails, naming the config.json fields that give `tensor` its shape (`fields`: "vocab_size 11
// and n_embd 8"), when the file holds `tensor` with another shape than `expected`. A missing
// tensor is left to tensors_from_import.
void check_shape_from_fields(const StateDict& file_tensors, const std::string& tensor, const Shape& expected,
                             const std::string& fields, const std::string& where);

// A parsed config.json. Every error starts "<family> config '<path>'".
class ConfigJson {
 public:
  ConfigJson(const std::string& path, const std::string& family);
  const std::string& where() const { return where_; }
  const nlohmann::json& json() const { return j_; }
  bool has(const char* key) const;         // present and not null
  int64_t integer(const char* key) const;  // required
  int64_t integer_or(const char* key, int64_t fallback) const;
  double number_or(const char* key, double fallback) const;
  bool boolean_or(const char* key, bool fallback) const;
  // When the file names a model_type, it must be `type`.
  void expect_model_type(const char* type) const;

 private:
  nlohmann::json j_;
  std::string where_;
};

}  // namespace strata::checkpoint::hf
