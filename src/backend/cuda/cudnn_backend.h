#pragma once
// A thin owner of cuDNN 9 backend (graph API) descriptors and builders for the few node
// kinds strata's graphs use: tensors, pointwise, matmul, reduction and reshape operations.
// Everything here runs without a GPU up to and including the operation graph (cuDNN >= 9.8
// needs no handle for it), so the graphs are built and checked in CPU tests; only engine
// heuristics, plans and execution need a device (cudnn_attention.cpp).
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace strata::cudnn {

// Throws a clear error naming what failed (the descriptor or call) and cuDNN's status.
void check(cudnnStatus_t status, const std::string& what);

// One backend descriptor, destroyed with its owner. Shared: operations keep their tensors'
// descriptors alive, and graphs their operations'.
class Desc {
 public:
  Desc() = default;
  Desc(cudnnBackendDescriptorType_t type, std::string name);
  cudnnBackendDescriptor_t get() const { return raw_ ? raw_.get() : nullptr; }
  const std::string& name() const { return name_; }
  explicit operator bool() const { return raw_ != nullptr; }

  template <class T>
  void set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, const T& value) {
    set_raw(attr, type, 1, &value);
  }
  template <class T>
  void set_array(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, const std::vector<T>& values) {
    set_raw(attr, type, static_cast<int64_t>(values.size()), values.data());
  }
  void set_desc(cudnnBackendAttributeName_t attr, const Desc& d);
  void finalize();

 private:
  void set_raw(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, int64_t count, const void* values);
  std::shared_ptr<std::remove_pointer_t<cudnnBackendDescriptor_t>> raw_;
  std::string name_;
};

// A tensor of a graph. uid identifies it in the variant pack (real tensors) or within the
// graph (virtual ones); by-value tensors are host scalars passed at execution.
struct TensorSpec {
  int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
  bool is_virtual = false;
  bool by_value = false;
};

Desc make_tensor(const TensorSpec& spec, const std::string& name);

// The row-major strides of dims.
std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims);

// The operations; each returns the finalized operation descriptor. math is the compute type.
Desc pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t math, const Desc& x, const Desc* b, const Desc* t,
               const Desc& y, const std::string& name, int64_t axis = -1);
Desc matmul(const Desc& a, const Desc& b, const Desc& c, cudnnDataType_t compute, const std::string& name);
Desc reduction(cudnnReduceTensorOp_t op, cudnnDataType_t math, const Desc& x, const Desc& y, const std::string& name);
Desc reshape(const Desc& x, const Desc& y, const std::string& name);

// The finalized operation graph of ops; handle may be null (cuDNN >= 9.8).
Desc operation_graph(const std::vector<Desc>& ops, cudnnHandle_t handle, const std::string& name);

}  // namespace strata::cudnn
