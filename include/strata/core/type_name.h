#pragma once
// A C++ type's readable name for error messages ("strata::nn::Linear", not the mangled
// "N6strata2nn6LinearE" that std::type_info::name gives).
#include <string>
#include <typeinfo>

namespace strata {

std::string demangled_name(const std::type_info& type);

// The dynamic type of `value` (the most derived class of a polymorphic object).
template <class T>
std::string dynamic_type_name(const T& value) {
  return demangled_name(typeid(value));
}

}  // namespace strata
