#pragma once
// Autocast-style mixed precision, as torch.autocast with bfloat16 (or float16): while a
// Scope is alive on a thread, the products of float32 tensors (matmul, linear, and
// attention's q k^T and p v) round their operands to the scope's dtype, accumulate in
// float32 and round the result to that dtype, in forward and in their backward; every
// other op (norms, softmax, losses, elementwise, the optimizer's master weights) stays in
// float32. On CUDA the products run on the tensor cores (cuBLASLt with 16-bit operands); on
// the CPU the same rounding is applied around a float32 GEMM, so CPU tests check the
// numerics. Activations stay float32 in memory between ops.
//   {
//     strata::autocast::Scope bf16;               // DType::BFloat16 by default
//     loss = model.loss(tokens, targets);
//   }
//   loss.backward();                              // products recorded under the scope keep it
// float16 needs loss scaling against underflow (optim::GradScaler); bfloat16 does not.
#include <optional>

#include "strata/core/dtype.h"

namespace strata::autocast {

class Scope {
 public:
  // dtype: BFloat16 or Float16. enabled = false makes the scope a no-op (one code path
  // for both settings).
  explicit Scope(DType dtype = DType::BFloat16, bool enabled = true);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  std::optional<DType> previous_;
};

// The calling thread's autocast dtype; nullopt outside any enabled scope.
std::optional<DType> active();

}  // namespace strata::autocast
