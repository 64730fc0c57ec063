// Embedding on the GPU: the case outer == 1 of index_rows.cu (a row gather, and the
// deterministic, atomic-free weight gradient summing each row's tokens in token order).
#include <stdint.h>

#include "strata_kernels/elementwise.h"
#include "strata_kernels/embedding.h"
#include "strata_kernels/index_rows.h"

extern "C" cudaError_t strata_embedding_forward(int32_t index_type, int32_t element_size, void* out, const void* weight,
                                                const void* indices, int64_t n, int64_t dim, int64_t vocab,
                                                int32_t* bad, cudaStream_t stream) {
  if (n * dim == 0) return cudaSuccess;
  if (element_size == 1) return cudaErrorInvalidValue;  // this API's contract: 2, 4 or 8 bytes
  return strata_index_select(index_type, element_size, out, weight, indices, 1, vocab, dim, n, bad, stream);
}

extern "C" size_t strata_embedding_backward_workspace(int32_t index_type, int64_t n) {
  return strata_index_add_workspace(index_type, n);
}

extern "C" cudaError_t strata_embedding_backward(int32_t index_type, int32_t type, void* dweight, const void* grad,
                                                 const void* indices, int64_t n, int64_t dim, void* workspace,
                                                 size_t workspace_bytes, cudaStream_t stream) {
  if (type != STRATA_ELEMENT_F32 && type != STRATA_ELEMENT_F64) return cudaErrorInvalidValue;
  // The vocabulary is not passed (the forward checked the indices): no upper bound, and with
  // one slab (outer == 1) the row stride n never enters an address.
  return strata_index_add(index_type, type, dweight, grad, indices, 1, INT64_MAX, dim, n, nullptr, workspace,
                          workspace_bytes, stream);
}
