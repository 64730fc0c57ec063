// Walks over the module tree: named_modules() and apply().
#include <unordered_set>

#include "strata/nn/module.h"

namespace strata::nn {
namespace {

void collect_modules(const std::string& path, Module& m, std::unordered_set<Module*>& seen,
                     std::vector<std::pair<std::string, Module*>>& out) {
  if (!seen.insert(&m).second) return;
  out.emplace_back(path, &m);
  for (auto& [name, child] : m.named_children())
    collect_modules(path.empty() ? name : path + "." + name, *child, seen, out);
}

void apply_children_first(Module& m, const std::function<void(Module&)>& fn, std::unordered_set<Module*>& seen) {
  if (!seen.insert(&m).second) return;
  for (auto& [_, child] : m.named_children()) apply_children_first(*child, fn, seen);
  fn(m);
}

}  // namespace

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  std::unordered_set<Module*> seen;
  collect_modules("", *this, seen, out);
  return out;
}

std::vector<Module*> Module::modules() {
  std::vector<Module*> out;
  for (auto& [_, m] : named_modules()) out.push_back(m);
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  std::unordered_set<Module*> seen;
  apply_children_first(*this, fn, seen);
}

}  // namespace strata::nn
