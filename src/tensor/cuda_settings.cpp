// The process-wide switches of CUDA compute (strata/tensor/cuda.h), device-neutral so that
// they exist, and read back what was set, in builds with and without CUDA.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "strata/tensor/cuda.h"

namespace strata::cuda {
namespace {
std::atomic<bool> tf32_allowed{false};

std::atomic<bool>& fused_attention_enabled() {
  static std::atomic<bool> enabled{[] {
    // On unless STRATA_FUSED_ATTENTION=0 (checked on an H100 against the composed attention).
    const char* v = std::getenv("STRATA_FUSED_ATTENTION");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }()};
  return enabled;
}
}  // namespace

void set_allow_tf32(bool allow) { tf32_allowed.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return tf32_allowed.load(std::memory_order_relaxed); }
void set_fused_attention(bool enable) { fused_attention_enabled().store(enable, std::memory_order_relaxed); }
bool fused_attention() { return fused_attention_enabled().load(std::memory_order_relaxed); }

}  // namespace strata::cuda
