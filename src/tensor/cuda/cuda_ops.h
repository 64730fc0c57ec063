#pragma once
// The CUDA implementations of ops (src/tensor/cuda/<op>.cpp), handed to
// detail::on_device(op, device, cpu_fn, cuda_fn) by the device-neutral ops in ops/. Same
// contracts as their CPU twins in cpu/*.h: arguments are checked by the caller, outputs are
// fresh contiguous tensors on the inputs' device. A build without CUDA defines them in
// cuda_unavailable.cpp, refusing the device.
#include "tensor/cpu/elementwise.h"

namespace strata::cuda_ops {

Tensor binary(cpu::BinaryOp op, const Tensor& a, const Tensor& b, const char* name);
Tensor unary(cpu::UnaryOp op, const Tensor& a, const char* name, double p = 0, double q = 0);
Tensor unary_grad(cpu::UnaryGradOp op, const Tensor& grad, const Tensor& saved, const char* name, double p = 0,
                  double q = 0);
Tensor binary_grad(cpu::BinaryGradOp op, const Tensor& grad, const Tensor& a, const Tensor& b, const char* name);

// cpu::matmul and cpu::matmul_sum (tensor/cpu/matmul.h) through cuBLASLt (cuda/matmul.cpp),
// running the same gemm::Plan; float32, float64, bfloat16 and float16 (16-bit with float32
// accumulation). `name` is the public op in errors.
Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const Tensor& bias, const char* name);
Tensor matmul_sum(const Tensor& a, const Tensor& b, const char* name);

}  // namespace strata::cuda_ops
