// CUDA glue of index_select and index_add along one dimension (the MoE's token dispatch and
// combine, and their gradients): the CPU's [outer, n, inner] layout of contiguous data, one
// launch of kernels/cuda/index_rows.cu on the current stream. A bad index sets a device flag;
// the host then names the first one with the CPU's own message.
#include "backend/cpu/indexing.h"
#include "backend/cpu/dim_layout.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/float_element_type.h"
#include "strata/tensor/factory.h"
#include "strata_kernels/elementwise.h"
#include "strata_kernels/index_rows.h"

namespace strata::cuda_ops {
namespace {

// The index as the kernels read it: int64, contiguous, on the data's device.
void check_index(const char* op, const Tensor& index, const Tensor& like) {
  STRATA_CHECK(index.dtype() == DType::Int64 && index.is_contiguous() && index.device() == like.device(), op,
               ": on CUDA the index must be contiguous int64 on ", like.device(), ", got ", index.dtype(), " of shape ",
               index.shape(), " on ", index.device());
}

// The bad-index flag of one launch (zeroed), or none where the caller vouches for the index.
Tensor bad_flag(const Tensor& like, bool check_range) {
  return check_range ? zeros({1}, {.dtype = DType::Int32, .device = like.device()}) : Tensor();
}

int32_t* flag_ptr(const Tensor& bad) { return bad.defined() ? static_cast<int32_t*>(bad.data_ptr()) : nullptr; }

// Reading the flag waits for the kernel: the price of an error that names the index. With
// nothing launched (no elements to move), the host checks the index itself, as the CPU op.
void report_bad(const char* op, const Tensor& bad, bool launched, const Tensor& index, int64_t dim,
                const Shape& shape) {
  if (!bad.defined() || index.numel() == 0) return;
  if (launched && bad.to(Device::cpu()).to_vector<int32_t>()[0] == 0) return;
  cpu::check_index_range(op, index.to(Device::cpu()), dim, shape);
}

}  // namespace

Tensor index_select(const Tensor& x_in, int64_t dim, const Tensor& index, const char* op, bool check_range) {
  cuda_detail::check_device(x_in.device(), op);
  check_index(op, index, x_in);
  Tensor x = x_in.detach().contiguous();
  const int64_t m = index.numel();
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(dim)] = m;
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  Tensor bad = bad_flag(x, check_range);
  const bool launch = out.numel() > 0;
  if (launch) {
    const cpu::Layout l = cpu::layout_of(x.shape(), dim);
    cuda_detail::DeviceGuard guard(x.device().index);
    STRATA_LAUNCH(strata_index_select(STRATA_ELEMENT_I64, static_cast<int32_t>(dtype_size(x.dtype())), out.data_ptr(),
                                      x.data_ptr(), index.data_ptr(), l.outer, l.n, l.inner, m, flag_ptr(bad),
                                      cuda_detail::stream_of(x.device().index)));
  }
  report_bad(op, bad, launch, index, dim, x.shape());
  return out;
}

void index_add_(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src_in, const char* op,
                bool check_range) {
  const int32_t type = cuda_detail::arith_element_type(out, op);
  cuda_detail::check_device(out.device(), op);
  check_index(op, index, out);
  STRATA_CHECK(out.is_contiguous() && src_in.device() == out.device() && src_in.dtype() == out.dtype(), op,
               ": on CUDA the output must be contiguous and src (", src_in.dtype(), " on ", src_in.device(),
               ") of its dtype and device (", out.dtype(), " on ", out.device(), ")");
  Tensor src = src_in.detach().contiguous();
  const int64_t m = index.numel();
  Tensor bad = bad_flag(out, check_range);
  const bool launch = src.numel() > 0;
  if (launch) {
    const size_t ws_bytes = strata_index_add_workspace(STRATA_ELEMENT_I64, m);
    STRATA_CHECK(ws_bytes > 0, op, ": the sort's workspace size query failed for ", m, " indices");
    Tensor ws = empty({static_cast<int64_t>((ws_bytes + 7) / 8)}, {.dtype = DType::Int64, .device = out.device()});
    const cpu::Layout l = cpu::layout_of(out.shape(), dim);
    cuda_detail::DeviceGuard guard(out.device().index);
    STRATA_LAUNCH(strata_index_add(STRATA_ELEMENT_I64, type, out.data_ptr(), src.data_ptr(), index.data_ptr(), l.outer,
                                   l.n, l.inner, m, flag_ptr(bad), ws.data_ptr(), ws_bytes,
                                   cuda_detail::stream_of(out.device().index)));
  }
  report_bad(op, bad, launch, index, dim, out.shape());
}

}  // namespace strata::cuda_ops
