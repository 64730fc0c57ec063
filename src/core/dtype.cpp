#include "strata/core/dtype.h"

#include <ostream>

#include "strata/core/device.h"
#include "strata/core/error.h"
#include "strata_kernels/common/half.h"

namespace strata {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  STRATA_FAIL("unknown dtype ", static_cast<int>(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

bool is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16 || dtype == DType::Float16;
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

bfloat16::bfloat16(float f) : bits(strata_kernels::float_to_bf16_bits(f)) {}
bfloat16::operator float() const { return strata_kernels::bf16_bits_to_float(bits); }
float16::float16(float f) : bits(strata_kernels::float_to_half_bits(f)) {}
float16::operator float() const { return strata_kernels::half_bits_to_float(bits); }

std::string Device::str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }
std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

}  // namespace strata
