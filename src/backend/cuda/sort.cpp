// CUDA glue of sort: a workspace from the caching allocator and one call of
// strata_sort_rows (cuda/sort.cu) on the current stream.
#include "strata_kernels/sort.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/float_element_type.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"

namespace strata::cuda_ops {

void sort_rows(const Tensor& x_in, bool descending, Tensor* values, Tensor* indices) {
  const int32_t type = cuda_detail::arith_element_type(x_in, "sort");
  cuda_detail::check_device(x_in.device(), "sort");
  const Tensor x = x_in.contiguous();
  *values = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  *indices = empty(x.shape(), {.dtype = DType::Int64, .device = x.device()});
  if (x.numel() == 0) return;
  const int64_t n = x.size(-1), rows = x.numel() / n;
  const size_t ws_bytes = strata_sort_rows_workspace(type, rows, n);
  STRATA_CHECK(ws_bytes > 0, "sort: the workspace size query failed for ", rows, " rows of ", n, " (shape ", x.shape(),
               ")");
  const Tensor ws = empty({static_cast<int64_t>((ws_bytes + 7) / 8)}, {.dtype = DType::Int64, .device = x.device()});
  cuda_detail::DeviceGuard guard(x.device().index);
  STRATA_LAUNCH(strata_sort_rows(type, values->data_ptr(), static_cast<int64_t*>(indices->data_ptr()), x.data_ptr(),
                                 rows, n, descending ? 1 : 0, ws.data_ptr(), ws_bytes,
                                 cuda_detail::stream_of(x.device().index)));
}

}  // namespace strata::cuda_ops
