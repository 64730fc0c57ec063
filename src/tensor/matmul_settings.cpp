// The process-wide switches of the CUDA GEMM (strata/tensor/cuda.h), device-neutral so that
// they exist, and read back what was set, in builds with and without CUDA.
#include <atomic>

#include "strata/tensor/cuda.h"

namespace strata::cuda {
namespace {
std::atomic<bool> tf32_allowed{false};
}  // namespace

void set_allow_tf32(bool allow) { tf32_allowed.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return tf32_allowed.load(std::memory_order_relaxed); }

}  // namespace strata::cuda
