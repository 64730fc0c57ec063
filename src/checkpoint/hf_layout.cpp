#include "checkpoint/hf_layout.h"

#include <filesystem>
#include <set>
#include <system_error>

#include "checkpoint/posix_file.h"
#include "strata/autograd/grad_mode.h"
#include "strata/checkpoint/atomic_file.h"
#include "strata/checkpoint/safetensors.h"

namespace strata::checkpoint::hf {

using nlohmann::json;

StateDict tensors_for_export(const StateDict& state, const std::vector<TensorSpec>& specs,
                             const std::function<bool(const std::string&)>& skippable, const std::string& where,
                             const std::string& what) {
  NoGradGuard no_grad;
  StateDict out;
  size_t taken = 0;
  for (const TensorSpec& p : specs) {
    auto it = state.find(p.name);
    STRATA_CHECK(it != state.end(), where, ": model_state has no tensor '", p.name, "' (expected shape ", p.shape, ")");
    const Tensor& t = it->second;
    STRATA_CHECK(t.defined(), where, ": tensor '", p.name, "' is undefined");
    STRATA_CHECK(t.shape() == p.shape, where, ": tensor '", p.name, "' has shape ", t.shape(), ", expected ", p.shape,
                 p.transposed ? " (strata Linear layout [out, in])" : "");
    STRATA_CHECK(is_floating(t.dtype()), where, ": tensor '", p.name, "' has dtype ", t.dtype(),
                 ", expected a floating type");
    Tensor f = t.to(DType::Float32);
    out.emplace(p.file_name, p.transposed ? f.transpose(0, 1) : f);  // written contiguously by the saver
    ++taken;
  }
  if (state.size() != taken) {
    std::set<std::string> expected;
    for (const TensorSpec& p : specs) expected.insert(p.name);
    for (const auto& [name, t] : state) {
      STRATA_CHECK(expected.contains(name) || (skippable && skippable(name)), where, ": unexpected tensor '", name,
                   "' in model_state (not a ", what, ")");
    }
  }
  return out;
}

json common_config(const char* model_type, const char* architecture, int64_t vocab_size, bool tie_word_embeddings,
                   double initializer_range) {
  return {{"model_type", model_type},
          {"architectures", {architecture}},
          {"vocab_size", vocab_size},
          {"tie_word_embeddings", tie_word_embeddings},
          {"initializer_range", initializer_range},
          {"use_cache", true},
          {"torch_dtype", "float32"}};
}

std::string file_in(const std::string& dir, const char* name) { return (std::filesystem::path(dir) / name).string(); }

void write_model_dir(const std::string& dir, const StateDict& tensors, const json& config, const std::string& where) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  STRATA_CHECK(!ec, where, ": cannot create the directory: ", ec.message());
  save_safetensors(file_in(dir, "model.safetensors"), tensors, {{"format", "pt"}});
  write_file_atomic(file_in(dir, "config.json"), config.dump(2) + "\n");
}

StateDict tensors_from_import(const StateDict& file_tensors, const std::vector<TensorSpec>& specs,
                              const std::string& where, const std::string& what) {
  NoGradGuard no_grad;
  StateDict out;
  std::set<std::string> expected;
  for (const TensorSpec& p : specs) {
    expected.insert(p.file_name);
    auto it = file_tensors.find(p.file_name);
    STRATA_CHECK(it != file_tensors.end(), where, ": missing tensor '", p.file_name, "' (expected shape ",
                 p.file_shape(), ")");
    const Tensor& t = it->second;
    STRATA_CHECK(t.shape() == p.file_shape(), where, ": tensor '", p.file_name, "' has shape ", t.shape(),
                 ", expected ", p.file_shape(), p.transposed ? " (HF Conv1D layout [in, out])" : "");
    STRATA_CHECK(is_floating(t.dtype()), where, ": tensor '", p.file_name, "' has dtype ", t.dtype(),
                 ", expected a floating type");
    Tensor f = t.to(DType::Float32);
    out.emplace(p.name, p.transposed ? f.transpose(0, 1).contiguous() : f);
  }
  for (const auto& [name, t] : file_tensors) {
    STRATA_CHECK(expected.contains(name), where, ": unexpected tensor '", name, "' (not a ", what, ")");
  }
  return out;
}

void check_layer_count(const StateDict& file_tensors, const std::string& prefix, const char* field, int64_t n_layer,
                       const std::string& where) {
  std::set<int64_t> layers;
  for (const auto& [name, t] : file_tensors) {
    if (!name.starts_with(prefix)) continue;
    const size_t dot = name.find('.', prefix.size());
    const std::string digits = name.substr(prefix.size(), dot == std::string::npos ? 0 : dot - prefix.size());
    // Up to 18 digits fit an int64_t; anything else is not a layer (and is refused later as unexpected).
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    layers.insert(std::stoll(digits));
  }
  const int64_t found = static_cast<int64_t>(layers.size());
  STRATA_CHECK(found == n_layer, where, ": config.json's ", field, " ", n_layer, " does not match the file's ", found,
               " layers",
               found == 0 ? std::string()
                          : " ('" + prefix + std::to_string(*layers.begin()) + ".' to '" + prefix +
                                std::to_string(*layers.rbegin()) + ".')");
}

void check_shape_from_fields(const StateDict& file_tensors, const std::string& tensor, const Shape& expected,
                             const std::string& fields, const std::string& where) {
  auto it = file_tensors.find(tensor);
  if (it == file_tensors.end()) return;
  STRATA_CHECK(it->second.shape() == expected, where, ": config.json's ", fields, " give '", tensor, "' the shape ",
               expected, ", but the file's is ", it->second.shape());
}

ConfigJson::ConfigJson(const std::string& path, const std::string& family) : where_(family + " config '" + path + "'") {
  try {
    j_ = nlohmann::json::parse(detail::read_text_file(path));
  } catch (const nlohmann::json::exception& ex) {
    STRATA_FAIL(where_, " is not valid JSON: ", ex.what());
  }
  STRATA_CHECK(j_.is_object(), where_, " must be a JSON object");
}

bool ConfigJson::has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

int64_t ConfigJson::integer(const char* key) const {
  auto it = j_.find(key);
  STRATA_CHECK(it != j_.end(), where_, ": missing field \"", key, "\"");
  STRATA_CHECK(it->is_number_integer(), where_, ": field \"", key, "\" must be an integer, found ", it->dump());
  // The JSON parser keeps integers above INT64_MAX as unsigned: never let one wrap to a negative size.
  STRATA_CHECK(!it->is_number_unsigned() || it->get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX), where_,
               ": field \"", key, "\" is ", it->dump(), ", beyond the largest integer strata reads (", INT64_MAX, ")");
  return it->get<int64_t>();
}

int64_t ConfigJson::integer_or(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }

double ConfigJson::number_or(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = j_[key];
  STRATA_CHECK(v.is_number(), where_, ": field \"", key, "\" must be a number, found ", v.dump());
  return v.get<double>();
}

bool ConfigJson::boolean_or(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = j_[key];
  STRATA_CHECK(v.is_boolean(), where_, ": field \"", key, "\" must be true or false, found ", v.dump());
  return v.get<bool>();
}

void ConfigJson::expect_model_type(const char* type) const {
  if (!j_.contains("model_type")) return;
  STRATA_CHECK(j_["model_type"] == type, where_, ": model_type is ", j_["model_type"].dump(), ", expected \"", type,
               "\"");
}

}  // namespace strata::checkpoint::hf
