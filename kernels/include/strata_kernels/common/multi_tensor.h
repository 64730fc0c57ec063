#pragma once
// The chunk table of a multi-tensor launch: the elements of many tensors cut into chunks of
// at most `chunk_elements`, each one unit of work (one CUDA block, one CPU task), so one
// launch covers every tensor whatever their sizes. Shared by the CPU executor and the CUDA
// kernels; the host builds the table (strata::optim::detail::plan_chunks).
#include <stdint.h>

#include "strata_kernels/common/macros.h"

namespace strata_kernels {

struct TensorChunk {
  int64_t tensor;  // index into the launch's tensor list
  int64_t begin;   // element range [begin, end) of that tensor
  int64_t end;
};

// 64 Ki elements: a few hundred KB per chunk keeps every SM busy on a large model and the
// table small (a 124M-parameter model: about 2000 chunks).
constexpr int64_t kDefaultChunkElements = 65536;

// Four consecutive elements as one aligned unit: a load or store of it is one 128-bit
// access for float (two for double) where the address is aligned, which is what lets a
// memory-bound kernel approach the bandwidth of a copy.
template <class T>
struct alignas(4 * sizeof(T)) Vec4 {
  T v[4];
};

template <class T>
STRATA_HD bool is_vec4_aligned(const T* p) {
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % sizeof(Vec4<T>) == 0;
}

template <class T>
STRATA_HD Vec4<T> load_vec4(const T* p, int64_t i) {
  return *reinterpret_cast<const Vec4<T>*>(p + i);
}

template <class T>
STRATA_HD void store_vec4(T* p, int64_t i, const Vec4<T>& x) {
  *reinterpret_cast<Vec4<T>*>(p + i) = x;
}

}  // namespace strata_kernels
