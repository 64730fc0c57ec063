#pragma once
// Containers of modules, like torch.nn's. Their children are registered modules, so
// parameters, state_dict, train()/eval(), to() and apply() reach them, under the names
// PyTorch gives: "0", "1", ... for Sequential and ModuleList, the keys for ModuleDict.
#include <concepts>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "strata/core/type_name.h"
#include "strata/nn/module.h"

namespace strata::nn {

// A module whose forward takes one tensor and returns one: what Sequential can chain.
template <class M>
concept UnaryModule = std::derived_from<M, Module> && requires(M& m, const Tensor& x) {
  { m.forward(x) } -> std::convertible_to<Tensor>;
};

// A unary module with its forward, type-erased, so that Linear, activations, containers and
// user modules sit in one list. Its forward runs the module's hooks (nn::call). Implicit from std::shared_ptr<M>:
// Sequential({a, b, c}).
class AnyModule {
 public:
  template <UnaryModule M>
  AnyModule(std::shared_ptr<M> module)  // NOLINT(google-explicit-constructor)
      : module_(module), forward_([m = module.get()](const Tensor& x) -> Tensor { return call(*m, x); }) {
    STRATA_CHECK(module_ != nullptr, "AnyModule: null module");
  }
  Tensor forward(const Tensor& x) const { return forward_(x); }
  const std::shared_ptr<Module>& module() const { return module_; }

 private:
  std::shared_ptr<Module> module_;  // owns what forward_ points at
  std::function<Tensor(const Tensor&)> forward_;
};

namespace detail {
// `module` as an M, or an error naming the container and the entry.
template <class M>
std::shared_ptr<M> entry_as(const std::shared_ptr<Module>& module, const char* container, const std::string& key) {
  std::shared_ptr<M> cast = std::dynamic_pointer_cast<M>(module);
  STRATA_CHECK(cast != nullptr, container, ": entry '", key, "' is a ", dynamic_type_name(*module), ", not a ",
               demangled_name(typeid(M)));
  return cast;
}
}  // namespace detail

// Runs its modules one after the other: forward(x) = m_n(...m_1(m_0(x))).
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<AnyModule> modules);
  void push_back(AnyModule module);                    // named by its index
  void push_back(std::string name, AnyModule module);  // named (torch's OrderedDict form)
  Tensor forward(const Tensor& x);
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::shared_ptr<Module> operator[](size_t i) const;  // checked
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    return detail::entry_as<M>((*this)[i], "Sequential", std::to_string(i));
  }

 private:
  std::vector<AnyModule> items_;
};

// Holds modules by index; its owner calls them (a list of blocks).
class ModuleList : public Module {
 public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);  // named by its index
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::shared_ptr<Module> operator[](size_t i) const;  // checked
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    return detail::entry_as<M>((*this)[i], "ModuleList", std::to_string(i));
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

// Holds modules by name, in insertion order (iteration, parameters, state_dict).
class ModuleDict : public Module {
 public:
  using Entry = std::pair<std::string, std::shared_ptr<Module>>;
  ModuleDict() = default;
  ModuleDict(std::initializer_list<Entry> entries);
  void insert(std::string key, std::shared_ptr<Module> module);  // a new key without '.'
  bool contains(const std::string& key) const;
  std::shared_ptr<Module> operator[](const std::string& key) const;  // checked
  template <class M>
  std::shared_ptr<M> at(const std::string& key) const {
    return detail::entry_as<M>((*this)[key], "ModuleDict", key);
  }
  std::vector<std::string> keys() const;
  size_t size() const { return child_entries().size(); }
  bool empty() const { return child_entries().empty(); }
  auto begin() const { return child_entries().begin(); }
  auto end() const { return child_entries().end(); }
};

}  // namespace strata::nn
