// Readable printing: nested brackets, at most 6 values per dimension (first 3 ... last 3).
#include <iomanip>
#include <ostream>
#include <sstream>

#include "strata/autograd/node.h"
#include "strata/tensor/tensor.h"
#include "tensor/dtype_dispatch.h"

namespace strata {
namespace {

constexpr int64_t kEdge = 3;

void print_dim(std::ostream& os, const Tensor& t, const std::vector<double>& values, const Strides& strides, size_t d,
               int64_t base, int indent) {
  const int64_t n = t.shape()[d];
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * kEdge && i == kEdge) {
      os << (d + 1 == t.shape().size() ? "..., " : "...,\n" + std::string(static_cast<size_t>(indent + 1), ' '));
      i = n - kEdge;
    }
    int64_t index = base + i * strides[d];
    if (d + 1 == t.shape().size()) {
      os << values[static_cast<size_t>(index)];
    } else {
      print_dim(os, t, values, strides, d + 1, index, indent + 1);
    }
    if (i + 1 < n) os << (d + 1 == t.shape().size() ? ", " : ",\n" + std::string(static_cast<size_t>(indent + 1), ' '));
  }
  os << ']';
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(";
  std::vector<double> values = to_vector<double>();
  os << std::setprecision(is_floating(dtype()) ? 4 : 19);
  if (dim() == 0) {
    os << values[0];
  } else {
    print_dim(os, *this, values, contiguous_strides(shape()), 0, 0, 7);
  }
  os << ", shape=" << shape() << ", dtype=" << dtype();
  if (!device().is_cpu()) os << ", device=" << device();
  if (requires_grad()) os << (grad_fn() ? ", grad_fn=" + std::string(grad_fn()->name()) : ", requires_grad");
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace strata
