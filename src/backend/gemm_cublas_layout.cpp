#include "backend/gemm_cublas_layout.h"

#include <algorithm>

namespace strata::gemm {
namespace {

// A row-major operand [rows, cols] read as `l` says, as the column-major factor of the
// swapped product: not transposed, its memory is column-major [cols, rows] and the product
// reads it as is; transposed, its memory is row-major [cols, rows], i.e. column-major
// [rows, cols], and the product reads that matrix's transpose.
CublasMatrix swapped(int64_t rows, int64_t cols, const Layout& l) {
  if (!l.trans) return {false, cols, rows, l.ld};
  return {true, rows, cols, l.ld};
}

}  // namespace

std::vector<CublasCall> cublas_calls(const Plan& p, int64_t max_batch) {
  std::vector<CublasCall> calls;
  if (p.m == 0 || p.n == 0 || p.k == 0 || p.batch == 0) return calls;
  CublasCall base;
  base.m = p.n;
  base.n = p.m;
  base.k = p.k;
  base.a = swapped(p.k, p.n, p.b.layout);  // the plan's b: [k, n]
  base.b = swapped(p.m, p.k, p.a.layout);  // the plan's a: [m, k]
  base.ldd = p.n;
  const int64_t out_stride = p.m * p.n;

  const bool uniform = p.a.batch_stride.has_value() && p.b.batch_stride.has_value();
  if (!p.sum_batch && p.batch > 1 && uniform) {
    for (int64_t first = 0; first < p.batch; first += max_batch) {
      CublasCall c = base;
      c.batch = std::min(max_batch, p.batch - first);
      c.stride_a = *p.b.batch_stride;
      c.stride_b = *p.a.batch_stride;
      c.stride_d = out_stride;
      c.offset_a = first * c.stride_a;
      c.offset_b = first * c.stride_b;
      c.offset_d = first * out_stride;
      calls.push_back(c);
    }
    return calls;
  }
  // One product per call: a single product, a batch whose offsets do not step uniformly, or a
  // sum over the batch (each product added into the same output).
  for (int64_t i = 0; i < p.batch; ++i) {
    CublasCall c = base;
    c.offset_a = p.b.offsets[static_cast<size_t>(i)];
    c.offset_b = p.a.offsets[static_cast<size_t>(i)];
    c.offset_d = p.sum_batch ? 0 : i * out_stride;
    c.accumulate = p.sum_batch && i > 0;
    calls.push_back(c);
  }
  return calls;
}

CublasCall bias_rows_call(int64_t n, int64_t rows) {
  CublasCall c;
  c.m = n;
  c.n = rows;
  c.k = 1;
  c.a = {false, n, 1, std::max<int64_t>(1, n)};
  c.b = {false, 1, rows, 1};
  c.ldd = std::max<int64_t>(1, n);
  c.accumulate = true;
  return c;
}

}  // namespace strata::gemm
