// The shared product helpers (products.h): autocast's rules and the device switch of each GEMM.
#include "ops/products.h"

#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/dispatch/device_dispatch.h"
#include "ops/autocast_cast.h"
#include "ops/nn_common.h"
#include "strata/ops/autocast.h"

namespace strata::products {
namespace {

// The CPU's stand-in for a 16-bit operand load: exact widening to float32.
Tensor widened(const Tensor& t) { return t.defined() ? t.to(DType::Float32) : t; }

}  // namespace

CastOpt autocast_for(const std::vector<Tensor>& operands) {
  const std::optional<DType> c = autocast::active();
  if (!c) return std::nullopt;
  bool any32 = false;
  for (const Tensor& t : operands) {
    if (!t.defined()) continue;
    if (t.dtype() != DType::Float32 && !detail::is_16bit(t.dtype())) return std::nullopt;
    any32 = any32 || t.dtype() == DType::Float32;
  }
  if (!any32 && !autocast::activations()) return std::nullopt;
  return Cast{*c, autocast::activations()};
}

CastOpt autocast_for(std::initializer_list<Tensor> operands) { return autocast_for(std::vector<Tensor>(operands)); }

Tensor scoped_result(const Tensor& out16, const Cast& cast) {
  return cast.keep16 ? out16 : detail::autocast_convert(out16, DType::Float32);
}

Tensor bmm16(const char* op, const Tensor& a16, const Tensor& b16, const Shape& batch, const Tensor& bias16,
             const Cast& cast) {
  Tensor out = detail::on_device(
      op, a16.device(), [&] { return cpu::matmul(widened(a16), widened(b16), batch, widened(bias16)).to(cast.dtype); },
      [&] { return cuda_ops::matmul(a16, b16, batch, bias16, op); });
  return scoped_result(out, cast);
}

Tensor bmm_sum16(const char* op, const Tensor& a16, const Tensor& b16, const Cast& cast) {
  Tensor out = detail::on_device(
      op, a16.device(), [&] { return cpu::matmul_sum(widened(a16), widened(b16)).to(cast.dtype); },
      [&] { return cuda_ops::matmul_sum(a16, b16, op); });
  return scoped_result(out, cast);
}

Tensor bmm(const char* op, const Tensor& a, const Tensor& b, const Shape& batch, const Tensor& bias) {
  return detail::on_device(
      op, a.device(), [&] { return cpu::matmul(a.detach(), b.detach(), batch, bias); },
      [&] { return cuda_ops::matmul(a.detach(), b.detach(), batch, bias, op); });
}

Tensor bmm_sum(const char* op, const Tensor& a, const Tensor& b) {
  return detail::on_device(
      op, a.device(), [&] { return cpu::matmul_sum(a.detach(), b.detach()); },
      [&] { return cuda_ops::matmul_sum(a.detach(), b.detach(), op); });
}

Tensor in_dtype(const Tensor& g, DType dtype) { return g.defined() ? detail::autocast_convert(g, dtype) : g; }

std::vector<int64_t> dim_range(int64_t begin, int64_t end) {
  std::vector<int64_t> dims;
  for (int64_t d = begin; d < end; ++d) dims.push_back(d);
  return dims;
}

Shape leading(const Shape& s, size_t drop) { return Shape(s.begin(), s.end() - static_cast<std::ptrdiff_t>(drop)); }

void check_operand(const Tensor& t, const char* op, const char* name, const CastOpt& cast) {
  STRATA_CHECK(t.defined(), op, ": ", name, " is undefined");
  if (cast) return;  // float32 or the scope's dtype (autocast_for)
  const bool supported = t.dtype() == DType::Float32 || t.dtype() == DType::Float64 ||
                         (t.device().is_cuda() && detail::is_16bit(t.dtype()));
  STRATA_CHECK(supported, op, ": ", name, " has dtype ", t.dtype(), " (shape ", t.shape(), ", on ", t.device(),
               "); float32 or float64 is supported, and bfloat16/float16 on CUDA",
               t.device().is_cpu() && detail::is_16bit(t.dtype()) ? " (convert with .to(), or move to CUDA)" : "");
}

Tensor compute_values(const Tensor& param, DType compute) {
  if (!param.defined()) return param;
  return detail::is_16bit(compute) ? param.detach() : detail::param_values(param);
}

}  // namespace strata::products
