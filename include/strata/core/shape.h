#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

namespace strata {

// Sizes of a tensor, outermost first. A thin wrapper over std::vector so that it prints
// in error messages and has numel().
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  template <class It>
  Shape(It first, It last) : dims_(first, last) {}

  size_t size() const { return dims_.size(); }  // number of dimensions
  bool empty() const { return dims_.empty(); }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t& operator[](size_t i) { return dims_[i]; }
  int64_t back() const { return dims_.back(); }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }
  void push_back(int64_t d) { dims_.push_back(d); }
  void insert(size_t pos, int64_t d) { dims_.insert(dims_.begin() + static_cast<std::ptrdiff_t>(pos), d); }
  void erase(size_t pos) { dims_.erase(dims_.begin() + static_cast<std::ptrdiff_t>(pos)); }
  const std::vector<int64_t>& vec() const { return dims_; }

  int64_t numel() const;
  std::string str() const;  // "[2, 3]"
  bool operator==(const Shape&) const = default;

 private:
  std::vector<int64_t> dims_;
};

using Strides = std::vector<int64_t>;

std::ostream& operator<<(std::ostream& os, const Shape& shape);
Strides contiguous_strides(const Shape& shape);
// Turns a possibly negative dimension index into [0, ndim), or throws naming `op`.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);
// NumPy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace strata
