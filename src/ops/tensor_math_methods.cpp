// Tensor's math methods (declared with the class in strata/tensor/tensor.h): libtorch's
// method spellings, each forwarding to the op in strata/ops/*.h.
#include "strata/ops/elementwise.h"
#include "strata/ops/linalg.h"
#include "strata/ops/nn_functional.h"
#include "strata/ops/reduce.h"
#include "strata/tensor/tensor.h"

namespace strata {

Tensor Tensor::sum() const { return strata::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return strata::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return strata::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const { return strata::mean(*this, dims, keepdim); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  ValuesIndices r = max_with_indices(*this, dim, keepdim);
  return {r.values, r.indices};
}
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return strata::argmax(*this, dim, keepdim); }
Tensor Tensor::exp() const { return strata::exp(*this); }
Tensor Tensor::log() const { return strata::log(*this); }
Tensor Tensor::sqrt() const { return strata::sqrt(*this); }
Tensor Tensor::rsqrt() const { return strata::rsqrt(*this); }
Tensor Tensor::abs() const { return strata::abs(*this); }
Tensor Tensor::neg() const { return strata::neg(*this); }
Tensor Tensor::tanh() const { return strata::tanh(*this); }
Tensor Tensor::sigmoid() const { return strata::sigmoid(*this); }
Tensor Tensor::relu() const { return strata::relu(*this); }
Tensor Tensor::pow(double exponent) const { return strata::pow(*this, exponent); }
Tensor Tensor::pow(const Tensor& exponent) const { return strata::pow(*this, exponent); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  return strata::clamp(*this, min, max);
}
Tensor Tensor::matmul(const Tensor& other) const { return strata::matmul(*this, other); }
Tensor Tensor::softmax(int64_t dim) const { return strata::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return strata::log_softmax(*this, dim); }

}  // namespace strata
