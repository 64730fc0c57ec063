#pragma once
// A small table of int64 values (a grouped GEMM's matrix addresses) written to device memory
// in stream order (C API).
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// dst[i] = values[i] for i < n, values in host memory (any, not pinned), carried to the
// device as kernel parameters (one launch per 128 values). The host may reuse `values` as
// soon as this returns: no staging buffer, no wait for the stream's queued work (an upload
// from pageable memory with cudaMemcpyAsync may wait for it).
cudaError_t strata_write_small_table(int64_t* dst, const int64_t* values, int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
