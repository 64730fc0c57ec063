#include "strata/tensor/factory.h"

#include <cmath>
#include <cstring>

#include "strata_kernels/common/philox.h"
#include "tensor/device_copy.h"
#include "tensor/dtype_dispatch.h"

namespace strata {
namespace {

Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad) t.set_requires_grad(true);
  return t;
}

// Generators without a device kernel yet fill a host tensor and move it.
Tensor moved(const Tensor& host, const TensorOptions& options) { return finish(host.to(options.device), options); }

}  // namespace

Tensor empty(const Shape& shape, TensorOptions options) {
  for (int64_t d : shape) STRATA_CHECK(d >= 0, "empty: negative dimension in shape ", shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate(static_cast<size_t>(shape.numel()) * dtype_size(options.dtype), options.device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = options.dtype;
  return finish(Tensor(std::move(impl)), options);
}

Tensor zeros(const Shape& shape, TensorOptions options) {
  Tensor t = empty(shape, {.dtype = options.dtype, .device = options.device});
  if (t.device().is_cpu()) {
    std::memset(t.raw_data(), 0, t.nbytes());  // all-zero bits are 0 in every dtype
  } else {
    detail::fill_any(t, 0.0);
  }
  return finish(t, options);
}

Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }

Tensor full(const Shape& shape, double value, TensorOptions options) {
  Tensor t = empty(shape, {.dtype = options.dtype, .device = options.device});
  detail::fill_any(t, value);
  return finish(t, options);
}

Tensor arange(int64_t start, int64_t end, int64_t step, TensorOptions options) {
  if (!options.device.is_cpu()) return moved(arange(start, end, step, {.dtype = options.dtype}), options);
  STRATA_CHECK(step != 0, "arange: step must be nonzero");
  int64_t n = step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / (-step);
  if (n < 0) n = 0;
  Tensor t = empty({n}, {.dtype = options.dtype, .device = options.device});
  detail::dispatch_all(options.dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = detail::convert<T>(start + i * step);
  });
  return finish(t, options);
}

Tensor randn(const Shape& shape, TensorOptions options, Generator* gen) {
  if (!options.device.is_cpu()) return moved(randn(shape, {.dtype = options.dtype}, gen), options);
  Generator& g = gen ? *gen : default_generator();
  const uint64_t seed = g.seed(), offset = g.next_offset();
  Tensor t = empty(shape, {.dtype = options.dtype, .device = options.device});
  STRATA_CHECK(is_floating(options.dtype), "randn: dtype ", options.dtype, " is not floating");
  detail::dispatch_all(options.dtype, [&]<class T>() {
    T* p = t.data<T>();
    const int64_t n = t.numel();
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; ++i) p[i] = detail::convert<T>(strata_kernels::philox_normal(seed, offset, uint64_t(i)));
  });
  return finish(t, options);
}

Tensor rand(const Shape& shape, TensorOptions options, Generator* gen) {
  if (!options.device.is_cpu()) return moved(rand(shape, {.dtype = options.dtype}, gen), options);
  Generator& g = gen ? *gen : default_generator();
  const uint64_t seed = g.seed(), offset = g.next_offset();
  Tensor t = empty(shape, {.dtype = options.dtype, .device = options.device});
  STRATA_CHECK(is_floating(options.dtype), "rand: dtype ", options.dtype, " is not floating");
  detail::dispatch_all(options.dtype, [&]<class T>() {
    T* p = t.data<T>();
    const int64_t n = t.numel();
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      p[i] = detail::convert<T>(1.0f - strata_kernels::philox_uniform(seed, offset, uint64_t(i)));  // [0, 1)
  });
  return finish(t, options);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options, Generator* gen) {
  if (!options.device.is_cpu()) return moved(randint(low, high, shape, {.dtype = options.dtype}, gen), options);
  STRATA_CHECK(high > low, "randint: empty range [", low, ", ", high, ")");
  Generator& g = gen ? *gen : default_generator();
  const uint64_t seed = g.seed(), offset = g.next_offset();
  const uint64_t range = static_cast<uint64_t>(high - low);
  Tensor t = empty(shape, {.dtype = options.dtype, .device = options.device});
  detail::dispatch_all(options.dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      auto r = strata_kernels::philox4x32_10(uint64_t(i), offset, seed);
      uint64_t x = (uint64_t(r.v[0]) << 32) | r.v[1];
      p[i] = detail::convert<T>(low + static_cast<int64_t>(x % range));
    }
  });
  return t;
}

Tensor empty_like(const Tensor& t) { return empty(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {.dtype = t.dtype(), .device = t.device()}); }

Tensor from_blob(void* data, const Shape& shape, DType dtype, Storage::Deleter deleter, Device device) {
  STRATA_CHECK(data != nullptr || shape.numel() == 0, "from_blob: null data pointer for shape ", shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      Storage::wrap(data, static_cast<size_t>(shape.numel()) * dtype_size(dtype), device, std::move(deleter));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options) {
  STRATA_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: ", values.size(),
               " values for shape ", shape, " (", shape.numel(), " elements)");
  Tensor src = from_blob(const_cast<T*>(values.data()), shape, dtype_v<T>);
  Tensor t = empty(shape, {.dtype = options.dtype, .device = options.device});
  detail::copy_any(t, src);
  return finish(t, options);
}
template Tensor from_vector(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<int32_t>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<bfloat16>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<float16>&, const Shape&, TensorOptions);

Tensor scalar_tensor(double value, TensorOptions options) { return full({}, value, options); }

}  // namespace strata
