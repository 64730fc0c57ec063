#pragma once
// Sorting each row of a contiguous [rows, n] array on the GPU (C API): the keys of
// common/sort_key.h sorted by CUB's stable segmented sort, one segment per row, so values
// and indices equal the CPU sort's bit for bit. `type` is a StrataElementType
// (strata_kernels/elementwise.h): float32, float64, int32 or int64; indices are int64.
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Device workspace bytes strata_sort_rows needs (0 when the query fails or the type is not
// sortable).
size_t strata_sort_rows_workspace(int32_t type, int64_t rows, int64_t n);

// values [rows, n] (in's type) and indices [rows, n]: each row of `in` sorted ascending
// (descending when `descending`), equal elements in input order.
cudaError_t strata_sort_rows(int32_t type, void* values, int64_t* indices, const void* in, int64_t rows, int64_t n,
                             int32_t descending, void* workspace, size_t workspace_bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
