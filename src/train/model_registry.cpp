#include "strata/train/model_registry.h"

#include <map>
#include <mutex>

#include "train/model_families.h"

namespace strata::train {
namespace {

// Built on first use with the library's own families.
struct Registry {
  Registry() {
    for (ModelFamily f : {detail::gpt2_family(), detail::llama_family(), detail::mixtral_family()})
      families.emplace(f.name, std::move(f));
  }
  std::mutex mutex;
  std::map<std::string, ModelFamily> families;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string known_names() {
  std::string out;
  for (const std::string& n : model_family_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void register_model_family(ModelFamily family) {
  STRATA_CHECK(!family.name.empty() && family.check_config && family.build && family.export_hf && family.import_hf &&
                   family.check_tensor_parallel && family.zero3_unit,
               "register_model_family: family '", family.name, "' needs a name and every function");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  STRATA_CHECK(r.families.count(family.name) == 0, "register_model_family: '", family.name, "' is already registered");
  std::string name = family.name;
  r.families.emplace(std::move(name), std::move(family));
}

std::vector<std::string> model_family_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [name, _] : r.families) out.push_back(name);
  return out;
}

const ModelFamily& model_family(const std::string& name) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.families.find(name);
    if (it != r.families.end()) return it->second;  // entries are never removed: the reference stays valid
  }
  STRATA_FAIL("unknown model family '", name, "': known families are ", known_names());
}

const ModelFamily& family_of(const checkpoint::Metadata& metadata, const std::string& where) {
  auto it = metadata.find("config.family");
  STRATA_CHECK(it != metadata.end(), where, ": its metadata has no 'config.family' entry (the model family; ",
               "checkpoints saved before families were recorded, or saved without a configuration, lack it): ",
               "name the family yourself (strata-ckpt: --format ", known_names(), ")");
  return model_family(it->second);
}

namespace detail {

void check_family_entry(const checkpoint::Metadata& metadata, const std::string& family, const std::string& where) {
  auto it = metadata.find("config.family");
  STRATA_CHECK(it == metadata.end() || it->second == family, where, ": 'config.family' is '",
               it == metadata.end() ? "" : it->second, "', not ", family);
}

}  // namespace detail
}  // namespace strata::train
