#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/core/error.h"
#include "strata/core/shape.h"
#include "strata/tensor/storage.h"

namespace strata {

class Node;
struct AutogradMeta;
struct GradHookList;
class Tensor;
namespace indexing {
class TensorIndex;  // strata/tensor/tensor_index.h
}

// Removes a hook added by Tensor::register_hook. Removing twice, or after the graph or the
// tensor is gone, does nothing.
class GradHookHandle {
 public:
  GradHookHandle() = default;
  GradHookHandle(std::weak_ptr<GradHookList> list, uint64_t id) : list_(std::move(list)), id_(id) {}
  void remove();

 private:
  std::weak_ptr<GradHookList> list_;
  uint64_t id_ = 0;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Strides strides;
  DType dtype = DType::Float32;
  std::shared_ptr<AutogradMeta> autograd;  // null until autograd needs it
};

// Where a Tensor accessor was called from, filled in at the call site by the default
// arguments (GCC's and clang's builtins: clang 14, which clang-tidy runs, has no
// std::source_location), for the error an undefined tensor gives.
struct CallSite {
  explicit CallSite(const char* function = __builtin_FUNCTION(), const char* file = __builtin_FILE(),
                    int line = __builtin_LINE())
      : function(function), file(file), line(line) {}
  const char* function;
  const char* file;
  int line;
};

// A cheap shared handle to a strided view of a Storage. Copies share the data and the
// autograd identity, like torch::Tensor. A default-constructed Tensor is "undefined".
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // --- metadata ---
  // On an undefined tensor each throws naming itself and its caller (`where`, filled in at
  // the call site: the op that was handed the undefined tensor).
  const Shape& shape(CallSite where = CallSite()) const { return checked("shape()", where).shape; }
  const Strides& strides(CallSite where = CallSite()) const { return checked("strides()", where).strides; }
  int64_t dim(CallSite where = CallSite()) const { return static_cast<int64_t>(checked("dim()", where).shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel(CallSite where = CallSite()) const { return checked("numel()", where).shape.numel(); }
  int64_t offset(CallSite where = CallSite()) const { return checked("offset()", where).offset; }
  DType dtype(CallSite where = CallSite()) const { return checked("dtype()", where).dtype; }
  Device device(CallSite where = CallSite()) const { return checked("device()", where).storage->device(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  bool is_contiguous(CallSite where = CallSite()) const;
  const std::shared_ptr<Storage>& storage(CallSite where = CallSite()) const {
    return checked("storage()", where).storage;
  }

  // Host pointer to the first element, for CPU code; T must match dtype(). Both throw for a
  // tensor on another device (naming the CPU op that asked, when known), so CPU code never
  // dereferences device memory.
  template <class T>
  T* data() const {
    STRATA_CHECK(dtype() == dtype_v<T>, "data<", dtype_name(dtype_v<T>), ">() called on a ", dtype(),
                 " tensor of shape ", shape());
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;
  // Pointer to the first element on whatever device holds it (a device pointer for CUDA
  // tensors): for device-aware code (CUDA kernels, NCCL), never for host loops.
  void* data_ptr() const;

  // The single value of a one-element tensor, converted to double.
  double item() const;
  // A copy of the elements as T (converted), in logical (row-major) order.
  template <class T>
  std::vector<T> to_vector() const;

  // --- views and copies (differentiable) ---
  Tensor view(const Shape& shape) const;     // shares storage; needs compatible strides
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // narrow + drop the dimension
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor expand(const Shape& shape) const;  // broadcast view (stride 0)
  // Elements start, start+step, ... before stop along dim (a view; bounds as a Python slice:
  // negative counts from the end, out-of-range clamps, unset is the whole dimension; step > 0).
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1) const;
  Tensor contiguous() const;     // *this when already contiguous
  Tensor clone() const;          // always a fresh contiguous copy
  Tensor to(DType dtype) const;  // *this when the dtype matches
  // A copy on `device` (*this when already there); differentiable. Host <-> CUDA copies
  // return when the data has arrived.
  Tensor to(Device device) const;

  // --- indexing (strata/tensor/tensor_index.h; PyTorch's rules) ---
  // x.index({Slice(0, 4), 2}) is x[0:4, 2]: a view for slices, integers, None and Ellipsis,
  // a copy when an index is an integer or Bool tensor; differentiable.
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  // x[indices] = value (broadcast to the indexed shape; same dtype), in place: bumps
  // version(). Differentiable in value (its gradient is grad[indices]) and in the rest of x
  // (zero gradient where overwritten), like PyTorch; where an advanced index repeats a
  // position the last write wins.
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, double value);

  // --- math (libtorch's method spellings of the ops in strata/ops/*.h, same semantics) ---
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;  // values, int64 indices
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor pow(double exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // --- autograd ---
  bool requires_grad() const;
  // Marks a leaf as a parameter-like tensor whose .grad() is accumulated.
  Tensor& set_requires_grad(bool requires_grad);
  bool is_leaf() const;
  const std::shared_ptr<Node>& grad_fn() const;
  Tensor grad() const;                // undefined until a backward reaches this leaf
  void set_grad(const Tensor& grad);  // e.g. a view into a DDP bucket
  // Shares the data but not the autograd history.
  Tensor detach() const;
  // Runs backward from this tensor. `grad` may be omitted for a one-element tensor.
  void backward(const Tensor& grad = {}, bool retain_graph = false) const;
  // Called with the leaf after its .grad() has been accumulated in a backward pass.
  void register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook);
  // Runs `hook` on this tensor's gradient each time a backward pass computes it, in
  // registration order; a defined return value replaces the gradient (same shape and
  // dtype), an undefined one keeps it. On a non-leaf the hook belongs to the tensor's place
  // in the graph (it runs even after this handle is gone); on a leaf it runs before the
  // gradient is accumulated into .grad(). The tensor must require grad.
  GradHookHandle register_hook(std::function<Tensor(const Tensor& grad)> hook);

  // --- in place, not recorded by autograd (optimizers, initialisers) ---
  // Each bumps version(): a backward that saved this memory before the write refuses to run.
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // same shape; converts dtype; any devices
  // The in-place write count of this tensor's memory (shared with its views), like torch's
  // _version. Code that writes a tensor's memory directly (kernels into a caller's tensor,
  // collectives) calls bump_version() once per write.
  uint64_t version() const { return storage()->version(); }
  void bump_version() const { storage()->bump_version(); }

  // Values (summarized per strata/tensor/print_options.h), shape, dtype.
  std::string to_string() const;

 private:
  TensorImpl& checked(const char* accessor = nullptr, const CallSite& where = CallSite()) const {
    if (impl_ == nullptr) [[unlikely]]
      undefined_tensor(accessor, where);
    return *impl_;
  }
  [[noreturn]] static void undefined_tensor(const char* accessor, const CallSite& where);
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace strata
