#pragma once
// The block size both caching allocators (CPU and CUDA) serve a request of nbytes from: a
// private detail, shared so the two caches bucket alike and tests can predict cache bytes.
#include <cstddef>

namespace strata::detail {

// 512-byte multiples up to 1 MiB, then 8 steps per power of two (at most 12.5% waste).
size_t allocator_block_size(size_t nbytes);

}  // namespace strata::detail
