#pragma once
// Row kernels (C API): softmax, log-softmax, cross-entropy, layer norm and RMS norm over the
// last dimension of contiguous [rows, n] data, one warp per row (common/row_softmax.h,
// common/row_norms.h; the CPU runs the same functions). `type` is elementwise.h's
// STRATA_ELEMENT_F32 or _F64; index_type STRATA_ELEMENT_I32 or _I64. Every pointer is
// device memory except where stated; all work is queued on `stream`.
#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// y in `type` (what backward reads); x may be 16-bit (x_type, with type F32), y16 then
// receives y rounded to x_type in the same pass (else unused). Backward: grad and dx stored
// as grad_type (`type` or 16-bit), y the forward's `type` values.
cudaError_t strata_softmax_rows(int32_t type, int32_t x_type, const void* x, void* y, void* y16, int64_t rows,
                                int64_t n, int32_t log_softmax, cudaStream_t stream);
cudaError_t strata_softmax_backward_rows(int32_t type, int32_t grad_type, const void* grad, const void* y, void* dx,
                                         int64_t rows, int64_t n, int32_t log_softmax, cudaStream_t stream);

// Attention's probabilities from scores [rows = stack * tq, tk]: per row the softmax of
// scale * s over the keys its query may see (common/row_softmax.h), 0 elsewhere. probs are
// in `type`; scores may be 16-bit (scores_type, with type F32), and with a 16-bit out_type
// `out` receives probs rounded once in the same pass (else out is unused). Backward: grad
// and dx stored as grad_type (`type` or 16-bit), probs the forward's `type` probs.
cudaError_t strata_attention_softmax_rows(int32_t type, int32_t scores_type, int32_t out_type, const void* scores,
                                          void* probs, void* out, int64_t rows, int64_t tq, int64_t tk, double scale,
                                          int32_t causal, cudaStream_t stream);
cudaError_t strata_attention_softmax_backward_rows(int32_t type, int32_t grad_type, const void* grad, const void* probs,
                                                   void* dx, int64_t rows, int64_t tq, int64_t tk, double scale,
                                                   int32_t causal, cudaStream_t stream);

// What the cross-entropy forward reports back (device memory, read by the host after the
// stream finishes): rows counted (target != ignore_index), the first row whose target is
// out of range (INT64_MAX if none) and the sum of the counted rows' losses.
typedef struct StrataCrossEntropyStatus {
  unsigned long long count;
  long long first_bad_row;
  double total;
} StrataCrossEntropyStatus;

// logits [rows, cols] of which the first `classes` columns are the classes (the rest, a
// padded vocabulary, take no part and get gradient 0). stats: [rows, 2] of type (max, log
// sum exp); row_loss: [rows] double scratch; status is reset by the call. The logits (and
// dx) are stored as logits_type: `type`, or, with type F32, BF16/F16 (common/storage16.h:
// widened on load, dx rounded once on store).
cudaError_t strata_cross_entropy_rows(int32_t type, int32_t logits_type, int32_t index_type, const void* logits,
                                      const void* targets, int64_t rows, int64_t cols, int64_t classes,
                                      int64_t ignore_index, void* stats, double* row_loss,
                                      StrataCrossEntropyStatus* status, cudaStream_t stream);
cudaError_t strata_cross_entropy_backward_rows(int32_t type, int32_t logits_type, int32_t index_type,
                                               const void* logits, const void* targets, const void* stats, int64_t rows,
                                               int64_t cols, int64_t classes, int64_t ignore_index, double coef,
                                               void* dx, cudaStream_t stream);

// The norms compute in `type` (weight, bias, mean, rstd, dweight, dbias, partials); x and dx
// are stored as x_type, y and grad as y_type: each `type`, or, with type F32, F32/BF16/F16
// (common/storage16.h: widened on load, rounded once on store).
// Forward: y [rows, d], mean and rstd [rows]. bias may not be null (the caller passes zeros).
cudaError_t strata_layer_norm_rows(int32_t type, int32_t x_type, int32_t y_type, const void* x, const void* weight,
                                   const void* bias, int64_t rows, int64_t d, double eps, void* y, void* mean,
                                   void* rstd, cudaStream_t stream);
// Backward: dx when not null; dweight / dbias (each [d], may be null) through `partials`, a
// [column_blocks(rows), 2 d] scratch (common/column_sum.h's order).
cudaError_t strata_layer_norm_backward(int32_t type, int32_t x_type, int32_t y_type, const void* grad, const void* x,
                                       const void* weight, const void* mean, const void* rstd, int64_t rows, int64_t d,
                                       void* dx, void* partials, void* dweight, void* dbias, cudaStream_t stream);

cudaError_t strata_rms_norm_rows(int32_t type, int32_t x_type, int32_t y_type, const void* x, const void* weight,
                                 int64_t rows, int64_t d, double eps, void* y, void* rstd, cudaStream_t stream);
// partials: [column_blocks(rows), d] scratch (common/column_sum.h) when dweight is not null.
cudaError_t strata_rms_norm_backward(int32_t type, int32_t x_type, int32_t y_type, const void* grad, const void* x,
                                     const void* weight, const void* rstd, int64_t rows, int64_t d, void* dx,
                                     void* partials, void* dweight, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
