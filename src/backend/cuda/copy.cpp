// Copies between devices, dtype conversion and fill for CUDA tensors. Contiguous data moves
// with one cudaMemcpy (or one conversion kernel for float32 <-> bfloat16/float16 on a
// device); strided views on one device of one dtype with one kernel that writes only the
// destination's elements (kernels/cuda/strided_copy.cu), and with a conversion between
// float32 and a 16-bit dtype through contiguous device buffers; anything else (other
// conversions, views across devices, a copy within one storage) is staged through host
// memory, which is slow (it waits for the device) but exact.
#include <atomic>
#include <cstring>
#include <memory>
#include <utility>

#include "backend/cpu/copy.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/common/strided_index.h"
#include "strata_kernels/convert.h"
#include "strata_kernels/fill.h"
#include "strata_kernels/strided_copy.h"

namespace strata::cuda_detail {
namespace {

std::atomic<int64_t> same_device_round_trips{0};

// The storage elements [first, last) a view touches (strides are never negative in strata).
std::pair<int64_t, int64_t> covered_range(const Tensor& t) {
  int64_t last = t.offset();
  for (size_t d = 0; d < t.shape().size(); ++d) last += (t.shape()[d] - 1) * t.strides()[d];
  return {t.offset(), last + 1};
}

char* storage_bytes(const Tensor& t, int64_t element) {
  return static_cast<char*>(t.storage()->data()) + element * static_cast<int64_t>(dtype_size(t.dtype()));
}

// A host view with t's shape, strides and dtype over `buffer`, whose element 0 stands for
// storage element `first` of t.
Tensor host_view(const Tensor& buffer, const Tensor& t, int64_t first) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = buffer.storage();
  impl->offset = t.offset() - first;
  impl->shape = t.shape();
  impl->strides = t.strides();
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

// Bytes between two contiguous tensors of the same dtype and size, in any direction.
// Returns after the data has arrived when the destination is host memory or when the
// source is host memory (which the caller may reuse at once).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
    STRATA_CUDA(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes));
    return;
  }
  const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(device);
  STRATA_CUDA(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream));
  if (dst_device.is_cpu() || src_device.is_cpu()) STRATA_CUDA(cudaStreamSynchronize(stream));
}

// Storage elements [first, last) of a CUDA tensor's storage, as a host tensor of t's dtype.
Tensor read_range(const Tensor& t, int64_t first, int64_t last) {
  Tensor buffer = empty({last - first}, {.dtype = t.dtype()});
  copy_bytes(buffer.raw_data(), Device::cpu(), storage_bytes(t, first), t.device(), buffer.nbytes());
  return buffer;
}

// src's values in a contiguous host tensor of src's dtype.
Tensor host_contiguous(const Tensor& src) {
  if (src.device().is_cpu()) return src.contiguous();
  if (src.is_contiguous()) {
    Tensor h = empty(src.shape(), {.dtype = src.dtype()});
    copy_bytes(h.raw_data(), Device::cpu(), src.data_ptr(), src.device(), h.nbytes());
    return h;
  }
  auto [first, last] = covered_range(src);
  return host_view(read_range(src, first, last), src, first).contiguous();
}

// dst (CUDA) = h (host, contiguous, dst's dtype).
void write_from_host(const Tensor& dst, const Tensor& h) {
  if (dst.is_contiguous()) {
    copy_bytes(dst.data_ptr(), dst.device(), h.raw_data(), Device::cpu(), h.nbytes());
    return;
  }
  // Read the covered range, scatter into it on the host, write it back: the elements the
  // view skips are written back unchanged.
  auto [first, last] = covered_range(dst);
  Tensor buffer = read_range(dst, first, last);
  cpu::copy_strided(host_view(buffer, dst, first), h);
  copy_bytes(storage_bytes(dst, first), dst.device(), buffer.raw_data(), Device::cpu(), buffer.nbytes());
}

// float32 <-> bfloat16/float16 on one device, both contiguous: one kernel.
bool convert_on_device(const Tensor& dst, const Tensor& src) {
  if (!(dst.device() == src.device() && dst.device().is_cuda() && dst.is_contiguous() && src.is_contiguous()))
    return false;
  const DType d = dst.dtype(), s = src.dtype();
  const size_t n = static_cast<size_t>(dst.numel());
  DeviceGuard guard(dst.device().index);
  cudaStream_t stream = stream_of(dst.device().index);
  const auto* f = static_cast<const float*>(src.data_ptr());
  auto* h16 = static_cast<uint16_t*>(dst.data_ptr());
  const auto* s16 = static_cast<const uint16_t*>(src.data_ptr());
  auto* fo = static_cast<float*>(dst.data_ptr());
  if (s == DType::Float32 && d == DType::BFloat16) {
    STRATA_LAUNCH(strata_float_to_bf16(f, h16, n, stream));
  } else if (s == DType::Float32 && d == DType::Float16) {
    STRATA_LAUNCH(strata_float_to_half(f, h16, n, stream));
  } else if (s == DType::BFloat16 && d == DType::Float32) {
    STRATA_LAUNCH(strata_bf16_to_float(s16, fo, n, stream));
  } else if (s == DType::Float16 && d == DType::Float32) {
    STRATA_LAUNCH(strata_half_to_float(s16, fo, n, stream));
  } else {
    return false;
  }
  return true;
}

// Same device, same dtype, separate storages (a copy within one storage may overlap: the
// host path reads everything before it writes): one strided kernel.
bool strided_copy_on_device(const Tensor& dst, const Tensor& src) {
  if (!(dst.device() == src.device() && dst.device().is_cuda() && dst.dtype() == src.dtype() &&
        dst.storage() != src.storage() && dst.dim() <= strata_kernels::kMaxDims))
    return false;
  strata_kernels::StridedIndex<2> index;
  std::memset(&index, 0, sizeof index);
  index.ndim = static_cast<int32_t>(dst.dim());
  for (size_t d = 0; d < dst.shape().size(); ++d) {
    index.sizes[d] = dst.shape()[d];
    index.strides[0][d] = dst.strides()[d];
    index.strides[1][d] = src.strides()[d];
  }
  DeviceGuard guard(dst.device().index);
  STRATA_LAUNCH(strata_strided_copy(dst.data_ptr(), src.data_ptr(), dtype_size(dst.dtype()), &index, dst.numel(),
                                    stream_of(dst.device().index)));
  return true;
}

// float32 <-> bfloat16/float16 on one device where either side is a strided view: the
// source gathered into a contiguous buffer of its dtype, converted by one kernel, and
// scattered into the destination: three kernels, no host round trip (autocast converts
// the strided q, k, v views of attention this way).
bool convert_strided_on_device(const Tensor& dst, const Tensor& src) {
  if (!(dst.device() == src.device() && dst.device().is_cuda() && dst.dtype() != src.dtype() &&
        dst.dim() <= strata_kernels::kMaxDims))
    return false;
  const auto floating16 = [](DType d) { return d == DType::BFloat16 || d == DType::Float16; };
  const bool supported = (src.dtype() == DType::Float32 && floating16(dst.dtype())) ||
                         (floating16(src.dtype()) && dst.dtype() == DType::Float32);
  if (!supported) return false;
  const TensorOptions on_device{.dtype = src.dtype(), .device = src.device()};
  Tensor packed = src;
  if (!src.is_contiguous()) {
    packed = empty(src.shape(), on_device);
    strided_copy_on_device(packed, src);
  }
  if (dst.is_contiguous()) return convert_on_device(dst, packed);
  Tensor converted = empty(dst.shape(), {.dtype = dst.dtype(), .device = dst.device()});
  convert_on_device(converted, packed);
  return strided_copy_on_device(dst, converted);
}

}  // namespace

int64_t same_device_host_round_trips() { return same_device_round_trips.load(std::memory_order_relaxed); }

void copy(const Tensor& dst, const Tensor& src) {
  STRATA_CHECK(dst.shape() == src.shape(), "copy: destination shape ", dst.shape(), " differs from source shape ",
               src.shape());
  for (const Tensor* t : {&dst, &src})
    if (t->device().is_cuda()) check_device(t->device(), "copy");
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    copy_bytes(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(), dst.nbytes());
    return;
  }
  if (convert_on_device(dst, src) || strided_copy_on_device(dst, src) || convert_strided_on_device(dst, src)) return;
  if (dst.device() == src.device()) same_device_round_trips.fetch_add(1, std::memory_order_relaxed);
  Tensor h = host_contiguous(src);
  if (dst.device().is_cpu()) {
    cpu::copy_strided(dst, h);
    return;
  }
  write_from_host(dst, h.dtype() == dst.dtype() ? h : h.to(dst.dtype()));
}

void fill(const Tensor& dst, double value) {
  check_device(dst.device(), "fill");
  if (dst.numel() == 0) return;
  if (!dst.is_contiguous()) {
    // One element holding the value, broadcast into the view by the strided copy: only
    // the view's own elements are written.
    Tensor one = empty({}, {.dtype = dst.dtype(), .device = dst.device()});
    fill(one, value);
    copy(dst, one.expand(dst.shape()));
    return;
  }
  // The value's bit pattern in dst's dtype, converted exactly as on the CPU.
  Tensor one = full({}, value, {.dtype = dst.dtype()});
  uint64_t bits = 0;
  std::memcpy(&bits, one.raw_data(), dtype_size(dst.dtype()));
  const int device = dst.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = stream_of(device);
  if (bits == 0) {
    STRATA_CUDA(cudaMemsetAsync(dst.data_ptr(), 0, dst.nbytes(), stream));
  } else {
    STRATA_LAUNCH(
        strata_fill_bits(dst.data_ptr(), dtype_size(dst.dtype()), bits, static_cast<size_t>(dst.numel()), stream));
  }
}

}  // namespace strata::cuda_detail
