#pragma once
// Autocast-style mixed precision, as torch.autocast with bfloat16 (or float16): while a
// Scope is alive on a thread, the products of float32 tensors (matmul, linear, and
// attention's q k^T and p v) run on operands in the scope's dtype with float32
// accumulation, and their results are rounded to that dtype, in forward and in backward.
// On CUDA the products run on the tensor cores (cuBLASLt with 16-bit operands); on the CPU
// the same rounding is applied around a float32 GEMM, so CPU tests check the numerics.
//
// Weight cache (torch's cache_enabled): a float32 parameter (a leaf that requires grad)
// used by a product is cast to the scope's dtype once per scope and the cast copy reused,
// keyed on the tensor, its storage and its version (an optimizer step invalidates it); the
// cache is dropped when the outermost scope ends. Products save their 16-bit operands, so
// backward casts nothing again; a parameter's gradient still arrives in float32.
//
// Activations (Options::activations, off by default):
//   off: products return float32 (their values rounded to the scope's dtype); every other
//        op (norms, softmax, losses, elementwise) stays float32, as torch.autocast.
//   on:  16-bit activations end to end (llm.c's layout): products return the scope's
//        dtype; layer_norm / rms_norm return it too (float32 statistics inside); gelu,
//        silu, softmax, log_softmax, rotary, dropout and same-dtype add/mul take and give
//        16-bit with float32 math inside; cross_entropy takes 16-bit logits and returns a
//        float32 loss; add/mul of a 16-bit and a float32 tensor give float32, so the
//        residual stream (embedding + each block's output) stays float32 (Megatron's
//        fp32 residual connection). The optimizer keeps float32 master weights.
//        Each of these ops reads and writes 16-bit in its own kernel (the shared kernel
//        source, so CPU and CUDA alike: widened on load, float32 math, rounded once on
//        store), so none runs a conversion kernel. Left in a GPT step's backward: each
//        residual add rounding the float32 stream's gradient for its 16-bit branch, and
//        each linear's float32 weight gradient and bias-sum widening (GEMM epilogue work).
//   {
//     strata::autocast::Scope bf16(DType::BFloat16, {.activations = true});
//     loss = model.loss(tokens, targets);         // float32 loss of 16-bit logits
//   }
//   loss.backward();                              // products recorded under the scope keep it
// float16 needs loss scaling against underflow (optim::GradScaler); bfloat16 does not.
#include <cstdint>
#include <optional>

#include "strata/core/dtype.h"

namespace strata::autocast {

struct Options {
  bool activations = false;  // 16-bit activations end to end (see above)
  bool weight_cache = true;  // cast each parameter once per outermost scope
};

class Scope {
 public:
  // dtype: BFloat16 or Float16. enabled = false makes the scope a no-op (one code path
  // for both settings).
  explicit Scope(DType dtype = DType::BFloat16, bool enabled = true);
  Scope(DType dtype, Options options, bool enabled = true);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  struct State {
    DType dtype;
    Options options;
  };
  std::optional<State> previous_;
  bool enabled_;
};

// The calling thread's autocast dtype; nullopt outside any enabled scope.
std::optional<DType> active();
// True inside an enabled scope with Options::activations.
bool activations();
// True inside an enabled scope with Options::weight_cache.
bool weight_cache();

// The dtype conversions autocast's ops ran on this thread since the last reset: what a GPU
// step runs as conversion kernels (the CPU's own widening of 16-bit operands around its
// float32 GEMM and kernels is its emulation of 16-bit loads, and is not counted).
struct Counters {
  int64_t parameter_casts = 0;  // a float32 parameter cast to the scope's dtype
  int64_t cache_hits = 0;       // a product reused a parameter's cast copy
  int64_t conversions = 0;      // every other conversion (operands, results, op edges)
};
Counters counters();
void reset_counters();

}  // namespace strata::autocast
