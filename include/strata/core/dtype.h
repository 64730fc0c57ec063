#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace strata {

// New dtypes go at the end: code and files may hold the numeric values.
// Bool: one byte holding 0 or 1 (comparison results, masks); not arithmetic.
enum class DType : uint8_t { Float32, Float64, BFloat16, Float16, Int32, Int64, Bool };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "float32", "bfloat16", ...
bool is_floating(DType dtype);             // false for int32, int64 and bool
std::ostream& operator<<(std::ostream& os, DType dtype);

// 16-bit float storage types. Conversions from float round to nearest even (inf/nan kept);
// arithmetic happens in float.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f);  // NOLINT(google-explicit-constructor): behaves like a float
  operator float() const;
  static bfloat16 from_bits(uint16_t b) {
    bfloat16 r;
    r.bits = b;
    return r;
  }
};

struct float16 {
  uint16_t bits = 0;
  float16() = default;
  float16(float f);  // NOLINT(google-explicit-constructor)
  operator float() const;
  static float16 from_bits(uint16_t b) {
    float16 r;
    r.bits = b;
    return r;
  }
};

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::Float64;
};
template <>
struct dtype_of<bfloat16> {
  static constexpr DType value = DType::BFloat16;
};
template <>
struct dtype_of<float16> {
  static constexpr DType value = DType::Float16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::Int32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::Bool;
};
template <class T>
inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace strata
