#include "backend/cuda/cudnn_backend.h"

#include "strata/core/error.h"

namespace strata::cudnn {

void check(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) [[likely]]
    return;
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  STRATA_FAIL("cuDNN: ", what, " failed: ", cudnnGetErrorString(status), detail[0] ? " (" : "", detail,
              detail[0] ? ")" : "");
}

Desc::Desc(cudnnBackendDescriptorType_t type, std::string name) : name_(std::move(name)) {
  cudnnBackendDescriptor_t d = nullptr;
  check(cudnnBackendCreateDescriptor(type, &d), "creating the descriptor of " + name_);
  raw_.reset(d, [](cudnnBackendDescriptor_t p) { (void)cudnnBackendDestroyDescriptor(p); });
}

void Desc::set_raw(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, int64_t count,
                   const void* values) {
  check(cudnnBackendSetAttribute(get(), attr, type, count, values),
        "setting attribute " + std::to_string(static_cast<int>(attr)) + " of " + name_);
}

void Desc::set_desc(cudnnBackendAttributeName_t attr, const Desc& d) {
  cudnnBackendDescriptor_t raw = d.get();
  set_raw(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void Desc::finalize() { check(cudnnBackendFinalize(get()), "finalizing " + name_); }

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

Desc make_tensor(const TensorSpec& spec, const std::string& name) {
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, spec.type);
  t.set_array(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, spec.dims);
  t.set_array(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, spec.strides);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, spec.uid);
  // strata's allocator returns 256-byte blocks, but views may start anywhere a 16-bit element
  // does; 16 is what cuDNN's fused kernels need and what the caller guarantees.
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, int64_t{16});
  if (spec.is_virtual) t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, true);
  if (spec.by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, true);
  t.finalize();
  return t;
}

Desc pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t math, const Desc& x, const Desc* b, const Desc* t,
               const Desc& y, const std::string& name, int64_t axis) {
  Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise descriptor of " + name);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode);
  pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, math);
  if (mode == CUDNN_POINTWISE_GEN_INDEX) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
  pw.finalize();
  Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation " + name);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  if (t) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  const float one = 1.0f;
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, one);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, one);
  op.finalize();
  return op;
}

Desc matmul(const Desc& a, const Desc& b, const Desc& c, cudnnDataType_t compute, const std::string& name) {
  Desc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul descriptor of " + name);
  mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, compute);
  mm.finalize();
  Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul operation " + name);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
  op.finalize();
  return op;
}

Desc reduction(cudnnReduceTensorOp_t reduce, cudnnDataType_t math, const Desc& x, const Desc& y,
               const std::string& name) {
  Desc r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction descriptor of " + name);
  r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, reduce);
  r.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, math);
  r.finalize();
  Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction operation " + name);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
  op.finalize();
  return op;
}

Desc reshape(const Desc& x, const Desc& y, const std::string& name) {
  Desc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape operation " + name);
  op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
  op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
  op.finalize();
  return op;
}

Desc operation_graph(const std::vector<Desc>& ops, cudnnHandle_t handle, const std::string& name) {
  Desc g(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph " + name);
  std::vector<cudnnBackendDescriptor_t> raw;
  raw.reserve(ops.size());
  for (const Desc& op : ops) raw.push_back(op.get());
  g.set_array(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw);
  if (handle) g.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle);
  g.finalize();
  return g;
}

}  // namespace strata::cudnn
