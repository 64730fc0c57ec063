#include "strata/nn/containers.h"

namespace strata::nn {

Sequential::Sequential(std::initializer_list<AnyModule> modules) {
  for (const AnyModule& m : modules) push_back(m);
}

void Sequential::push_back(AnyModule module) { push_back(std::to_string(items_.size()), std::move(module)); }

void Sequential::push_back(std::string name, AnyModule module) {
  register_module(std::move(name), module.module());
  items_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  auto hooks = forward_hooks();
  Tensor y = x;
  for (const AnyModule& m : items_) y = m.forward(y);
  return hooks.output(y);
}

std::shared_ptr<Module> Sequential::operator[](size_t i) const {
  STRATA_CHECK(i < items_.size(), "Sequential: index ", i, " out of range (size ", items_.size(), ")");
  return items_[i].module();
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  STRATA_CHECK(module != nullptr, "ModuleList: null module at index ", items_.size());
  register_module(std::to_string(items_.size()), module);
  items_.push_back(std::move(module));
}

std::shared_ptr<Module> ModuleList::operator[](size_t i) const {
  STRATA_CHECK(i < items_.size(), "ModuleList: index ", i, " out of range (size ", items_.size(), ")");
  return items_[i];
}

ModuleDict::ModuleDict(std::initializer_list<Entry> entries) {
  for (const auto& [key, m] : entries) insert(key, m);
}

void ModuleDict::insert(std::string key, std::shared_ptr<Module> module) {
  STRATA_CHECK(module != nullptr, "ModuleDict: null module for key '", key, "'");
  register_module(std::move(key), std::move(module));  // refuses a taken or dotted key
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, _] : child_entries())
    if (k == key) return true;
  return false;
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  for (const auto& [k, m] : child_entries())
    if (k == key) return m;
  STRATA_CHECK(false, "ModuleDict: no entry '", key, "'");
  return nullptr;
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, _] : child_entries()) out.push_back(k);
  return out;
}

}  // namespace strata::nn
