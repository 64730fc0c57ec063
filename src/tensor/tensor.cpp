#include "strata/tensor/tensor.h"

#include <string_view>

#include "tensor/dtype_dispatch.h"

namespace strata {
namespace {

std::string_view file_of(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

void Tensor::undefined_tensor(const char* accessor, const CallSite& where) {
  STRATA_FAIL("operation on an undefined tensor: ", accessor ? accessor : "its metadata", " in ", where.function, " (",
              file_of(where.file), ":", where.line,
              "), which was given a default-constructed Tensor (an optional argument left empty, or a .grad() "
              "that no backward has filled?)");
}

int64_t Tensor::size(int64_t d) const { return shape()[static_cast<size_t>(normalize_dim(d, dim(), "size"))]; }
int64_t Tensor::stride(int64_t d) const { return strides()[static_cast<size_t>(normalize_dim(d, dim(), "stride"))]; }

bool Tensor::is_contiguous(CallSite where) const {
  const TensorImpl& t = checked("is_contiguous()", where);
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

namespace detail {
namespace {
thread_local const char* t_cpu_op = nullptr;
}
const char* current_cpu_op() { return t_cpu_op; }
CpuOpScope::CpuOpScope(const char* op) : previous_(t_cpu_op) { t_cpu_op = op; }
CpuOpScope::~CpuOpScope() { t_cpu_op = previous_; }

}  // namespace detail

void* Tensor::data_ptr() const {
  const TensorImpl& t = checked("data_ptr()");
  if (t.storage->released()) [[unlikely]] {
    if (const auto& note = t.storage->released_note())
      STRATA_FAIL(note(static_cast<size_t>(t.offset) * dtype_size(t.dtype)), " (read of a tensor of shape ", t.shape,
                  ")");
    STRATA_FAIL("the memory of this tensor (shape ", t.shape,
                ") was released: a ZeRO-3 parameter used outside its unit's forward and backward (gather the "
                "parameters first, e.g. ZeroOptimizer::gathered_parameters())");
  }
  return static_cast<char*>(t.storage->data()) + t.offset * static_cast<int64_t>(dtype_size(t.dtype));
}

void* Tensor::raw_data() const {
  const TensorImpl& t = checked("data()");
  if (!t.storage->device().is_cpu()) [[unlikely]] {
    const char* op = detail::current_cpu_op();
    STRATA_FAIL(op ? op : "a CPU op", ": ", t.dtype, " tensor of shape ", t.shape, " is on ", t.storage->device(),
                ", and this code reads host memory; it has no ", t.storage->device().is_cuda() ? "CUDA" : "device",
                " path yet (move the tensor with .to(Device::cpu()))");
  }
  return data_ptr();
}

double Tensor::item() const {
  STRATA_CHECK(numel() == 1, "item(): tensor of shape ", shape(), " has ", numel(), " elements, expected 1");
  if (!device().is_cpu()) return to(Device::cpu()).item();
  return detail::dispatch_all(dtype(),
                              [&]<class T>() { return detail::convert<double>(*static_cast<T*>(raw_data())); });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = device().is_cpu() ? contiguous() : to(Device::cpu());
  std::vector<T> out(static_cast<size_t>(numel()));
  detail::dispatch_all(dtype(), [&]<class S>() {
    const S* s = static_cast<const S*>(c.raw_data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = detail::convert<T>(s[i]);
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bfloat16> Tensor::to_vector<bfloat16>() const;
template std::vector<float16> Tensor::to_vector<float16>() const;

}  // namespace strata
