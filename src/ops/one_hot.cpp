// one_hot (nn_functional.h): the indices are checked on the host (each names its value and
// position), then the kernel of backend/cpu/triangle.h or cuda_ops fills the output.
#include <algorithm>
#include <sstream>
#include <string>

#include "backend/cpu/triangle.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "strata/ops/nn_functional.h"

namespace strata {
namespace {

// "[1, 2]": the multi-index of flat position `flat` in `shape`.
std::string position(const Shape& shape, int64_t flat) {
  std::vector<int64_t> at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::ostringstream os;
  os << Shape(std::move(at));
  return os.str();
}

// The number of classes: num_classes, or the largest index + 1 for -1; every index checked
// to lie in [0, classes).
int64_t checked_classes(const Tensor& indices, int64_t num_classes) {
  const std::vector<int64_t> v = indices.to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    STRATA_CHECK(v[i] >= 0, "one_hot: index ", v[i], " at position ",
                 position(indices.shape(), static_cast<int64_t>(i)), " of indices (shape ", indices.shape(),
                 ") is negative; class indices must lie in [0, num_classes)");
  if (num_classes == -1) {
    STRATA_CHECK(!v.empty(), "one_hot: cannot infer num_classes from empty indices (shape ", indices.shape(),
                 "); pass num_classes");
    return *std::max_element(v.begin(), v.end()) + 1;
  }
  for (size_t i = 0; i < v.size(); ++i)
    STRATA_CHECK(v[i] < num_classes, "one_hot: index ", v[i], " at position ",
                 position(indices.shape(), static_cast<int64_t>(i)), " of indices (shape ", indices.shape(),
                 ") is out of range for num_classes = ", num_classes);
  return num_classes;
}

}  // namespace

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  STRATA_CHECK(indices.defined(), "one_hot: indices are undefined");
  STRATA_CHECK(indices.dtype() == DType::Int64, "one_hot: indices have dtype ", indices.dtype(), " (shape ",
               indices.shape(), "); int64 class indices expected (convert with .to(DType::Int64))");
  STRATA_CHECK(num_classes == -1 || num_classes > 0, "one_hot: num_classes = ", num_classes,
               " must be positive, or -1 to take the largest index + 1");
  const int64_t classes = checked_classes(indices, num_classes);
  return detail::on_device(
      "one_hot", indices.device(), [&] { return cpu::one_hot(indices, classes); },
      [&] { return cuda_ops::one_hot(indices, classes); });
}

}  // namespace strata
