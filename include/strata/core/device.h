#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

namespace strata {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // GPU ordinal; 0 for CPU

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};

std::ostream& operator<<(std::ostream& os, const Device& device);

}  // namespace strata
