#pragma once
// The CUDA implementations of ops (src/backend/cuda/<op>.cpp), handed to
// detail::on_device(op, device, cpu_fn, cuda_fn) by the device-neutral ops in ops/. Same
// contracts as their CPU twins in cpu/*.h: arguments are checked by the caller, outputs are
// fresh contiguous tensors on the inputs' device. Each is declared once through
// STRATA_CUDA_ENTRY (core/cuda_entry.h): a build without CUDA gets a refusing definition.
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/kernel_types.h"
#include "core/cuda_entry.h"

namespace strata::cuda_ops {
STRATA_CUDA_ENTRIES_BEGIN

STRATA_CUDA_ENTRY(Tensor binary(backend::BinaryOp op, const Tensor& a, const Tensor& b, const char* name))
STRATA_CUDA_ENTRY(Tensor unary(backend::UnaryOp op, const Tensor& a, const char* name, double p = 0, double q = 0))
STRATA_CUDA_ENTRY(Tensor unary_grad(backend::UnaryGradOp op, const Tensor& grad, const Tensor& saved, const char* name,
                                    double p = 0, double q = 0))
STRATA_CUDA_ENTRY(Tensor binary_grad(backend::BinaryGradOp op, const Tensor& grad, const Tensor& a, const Tensor& b,
                                     const char* name))
// gelu / silu and their gradients on contiguous 16-bit data (cuda/unary16.cpp): float32 math
// per element, one rounding on store, as cpu/unary16.h.
STRATA_CUDA_ENTRY(Tensor unary16(backend::UnaryOp op, const Tensor& x, const char* name))
STRATA_CUDA_ENTRY(Tensor unary_grad16(backend::UnaryGradOp op, const Tensor& grad, const Tensor& saved,
                                      const char* name))
// add / mul of same-shape contiguous tensors, float32 or one 16-bit dtype each (cuda/binary16.cpp):
// float32 math per element, one rounding on store, as cpu/binary16.h.
STRATA_CUDA_ENTRY(Tensor binary16(backend::BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype,
                                  const char* name))
// self += alpha * other, self *= value: the CPU's rounding (alpha * other, then the sum),
// through an out-of-place kernel and a copy into self (any strides).
STRATA_CUDA_ENTRY(void add_inplace(const Tensor& self, const Tensor& other, double alpha))
STRATA_CUDA_ENTRY(void mul_inplace(const Tensor& self, double value))

// Comparisons and selections (cuda/compare.cpp), as cpu/elementwise.h's: the same
// functors (strata_kernels/common/compare_ops.h); float32, float64, int32, int64 and bool.
STRATA_CUDA_ENTRY(Tensor compare(backend::CompareOp op, const Tensor& a, const Tensor& b, const char* name))
STRATA_CUDA_ENTRY(Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape,
                               const char* name))
STRATA_CUDA_ENTRY(Tensor masked_fill(const Tensor& x, const Tensor& mask, double value, const Shape& shape,
                                     const char* name))
// Rounding and class tests (cuda/rounding.cpp), as cpu/rounding.h: the same functors
// (strata_kernels/common/rounding_ops.h), exact, so bit for bit.
STRATA_CUDA_ENTRY(Tensor rounding(backend::RoundingOp op, const Tensor& a, const char* name))
STRATA_CUDA_ENTRY(Tensor classify(backend::ClassifyOp op, const Tensor& a, const char* name))
// min/argmin and logsumexp (cuda/line_min_logsumexp.cpp), as cpu/line_min_logsumexp.h.
STRATA_CUDA_ENTRY(void min_keepdim(const Tensor& x, int64_t dim, Tensor* values, Tensor* indices))
STRATA_CUDA_ENTRY(Tensor logsumexp_keepdim(const Tensor& x, const std::vector<bool>& reduced))
// tril/triu and one_hot (cuda/triangle.cpp), as cpu/triangle.h: bit for bit.
STRATA_CUDA_ENTRY(Tensor triangle(const Tensor& x, int64_t diagonal, bool lower))
STRATA_CUDA_ENTRY(Tensor one_hot(const Tensor& indices, int64_t classes))
// cat (cuda/cat.cpp), as cpu/copy.h's; `op` is the public op in errors.
STRATA_CUDA_ENTRY(Tensor cat(const std::vector<Tensor>& ts, size_t d, const Shape& out_shape, const char* op))

// Row ops (row_ops.cpp): the same arithmetic and order as the CPU's (strata_kernels/common/row_*.h).
STRATA_CUDA_ENTRY(Tensor softmax_forward(const Tensor& x, int64_t dim, bool log))
STRATA_CUDA_ENTRY(Tensor softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim, bool log))
// Last dimension, contiguous 16-bit x: as cpu::softmax_last16 (float32 values kept for
// backward and their 16-bit rounding, one pass).
STRATA_CUDA_ENTRY(backend::SoftmaxOutputs softmax_last16(const Tensor& x, bool log))
STRATA_CUDA_ENTRY(Tensor softmax_backward_last16(const Tensor& grad, const Tensor& y, bool log))
STRATA_CUDA_ENTRY(backend::SoftmaxOutputs attention_softmax_forward(const Tensor& scores, double scale, bool causal,
                                                                    DType out_dtype))
STRATA_CUDA_ENTRY(Tensor attention_softmax_backward(const Tensor& grad, const Tensor& probs, double scale, bool causal))
// Fused attention through cuDNN (fused_attention.cpp): q [B, H, Tq, D], k and v [B, H, Tk, D],
// 16-bit, one device, last dimension contiguous (../ops/attention_fused.h checks the rest).
// stats is the float32 [B, H, Tq, 1] row statistic the backward reads. nullopt when cuDNN
// takes no plan for the forward (or, with_backward, for the backward too); the caller then
// composes attention. The backward takes the forward's output and a contiguous gradient.
struct FusedAttention {
  Tensor out, stats;
};
struct FusedAttentionGrads {
  Tensor dq, dk, dv;
};
STRATA_CUDA_ENTRY(std::optional<FusedAttention> fused_attention_forward(const Tensor& q, const Tensor& k,
                                                                        const Tensor& v, double scale, bool causal,
                                                                        bool with_backward))
STRATA_CUDA_ENTRY(FusedAttentionGrads fused_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                               const Tensor& out, const Tensor& stats,
                                                               const Tensor& grad_out, double scale, bool causal))
STRATA_CUDA_ENTRY(backend::CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                                                    int64_t ignore_index, int64_t classes))
STRATA_CUDA_ENTRY(Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                                                const Tensor& stats, int64_t ignore_index, int64_t count,
                                                int64_t classes))
// layer_norm: x float32/float64/16-bit, the output out_dtype (x's, or 16-bit for float32 x);
// 16-bit data computes in float32 (cpu/layer_norm.h).
STRATA_CUDA_ENTRY(backend::LayerNormResult layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                                              double eps, DType out_dtype))
STRATA_CUDA_ENTRY(backend::LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                                              const Tensor& mean, const Tensor& rstd, bool need_dx,
                                                              bool need_dweight, bool need_dbias))
STRATA_CUDA_ENTRY(backend::RmsNormResult rms_norm_forward(const Tensor& x, const Tensor& weight, double eps,
                                                          DType out_dtype))
STRATA_CUDA_ENTRY(backend::RmsNormGrads rms_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                                          const Tensor& rstd, bool need_dx, bool need_dweight))

// Reductions (cuda/reduce.cpp), as cpu/reduce.h.
STRATA_CUDA_ENTRY(Tensor sum_keepdim(const Tensor& x, const std::vector<bool>& reduced))

// Max, topk and cumsum along one dimension (cuda/line_select.cpp), as cpu/reduce.h: the same
// values and indices, bit for bit (a thread per line runs common/line_select.h).
STRATA_CUDA_ENTRY(void max_keepdim(const Tensor& x, int64_t dim, Tensor* values, Tensor* indices))
STRATA_CUDA_ENTRY(void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, Tensor* values, Tensor* indices))
STRATA_CUDA_ENTRY(Tensor cumsum(const Tensor& x, int64_t dim, bool reverse))
// The gradient of max and topk: zeros of `shape` with grad added at the int64 positions
// `index` along `dim` (index and grad have shape's shape except along dim), in the CPU
// scatter_add's order. `op` names the backward in errors.
STRATA_CUDA_ENTRY(Tensor scatter_add_lines(const char* op, const Shape& shape, int64_t dim, const Tensor& index,
                                           const Tensor& grad))

// sort, nonzero and bincount (cuda/sort.cpp, cuda/counting.cpp), as cpu/sort.h and
// cpu/counting.h: sort_rows sorts common/sort_key.h's keys with CUB's stable segmented
// radix sort (the CPU's order, bit for bit); nonzero reads its count back to the host.
STRATA_CUDA_ENTRY(void sort_rows(const Tensor& x, bool descending, Tensor* values, Tensor* indices))
STRATA_CUDA_ENTRY(Tensor nonzero(const Tensor& x))
STRATA_CUDA_ENTRY(Tensor bincount(const Tensor& x, const Tensor& weights, int64_t length))

// Embedding (cuda/embedding.cpp), as cpu/embedding.h; indices and weight on one device.
STRATA_CUDA_ENTRY(Tensor embedding_forward(const Tensor& indices, const Tensor& weight))
STRATA_CUDA_ENTRY(Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t vocab))

// index_select / index_add along one dimension (cuda/indexing.cpp), as cpu/indexing.h's
// index_select and index_add_: x and src any layout, out contiguous, index contiguous int64,
// all on one device; index_add_ takes float32, float64, int32 or int64 and gives the CPU's
// bits. With check_range an index outside the dimension fails with the CPU's message (a flag
// read back: the host waits); without, the caller vouches for it (a backward). `op` names the
// op in errors.
STRATA_CUDA_ENTRY(Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, const char* op,
                                      bool check_range))
STRATA_CUDA_ENTRY(void index_add_(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                                  const char* op, bool check_range))

// Rotary position embedding (cuda/rotary.cpp), as cpu/rotary.h's rotary_apply.
STRATA_CUDA_ENTRY(Tensor rotary_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, bool transpose))

// Dropout (cuda/dropout.cpp), as cpu/dropout.h's dropout_apply: the same mask.
STRATA_CUDA_ENTRY(Tensor dropout_apply(const Tensor& x, double p, uint64_t seed, uint64_t offset))

// cpu::matmul and cpu::matmul_sum (backend/cpu/matmul.h) through cuBLASLt (cuda/matmul.cpp),
// running the same gemm::Plan; float32, float64, bfloat16 and float16 (16-bit with float32
// accumulation). `name` is the public op in errors.
STRATA_CUDA_ENTRY(Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const Tensor& bias,
                                const char* name))
STRATA_CUDA_ENTRY(Tensor matmul_sum(const Tensor& a, const Tensor& b, const char* name))

// Grouped products through cuBLAS's grouped GEMM (cuda/grouped_matmul.cpp), one call for all
// groups: a [S, k] contiguous in groups of rows[g] > 0 consecutive rows; b[g] contiguous,
// [n, k] when transpose (out_g = a_g b_g^T) else [k, n] (out_g = a_g b_g); out [S, n] in a's
// dtype. One dtype for all operands: float32, float64, bfloat16 or float16 (float32
// accumulation). nullopt, having issued nothing, where cuBLAS has no grouped kernel for the
// problem: the caller then runs its loop of matmul calls.
STRATA_CUDA_ENTRY(std::optional<Tensor> grouped_matmul(const Tensor& a, const std::vector<int64_t>& rows,
                                                       const std::vector<Tensor>& b, bool transpose, const char* name))
// Per group: g_g^T x_g ([n, k]) for g [S, n] and x [S, k] contiguous in the same groups.
STRATA_CUDA_ENTRY(std::optional<std::vector<Tensor>> grouped_weight_grads(const Tensor& g, const Tensor& x,
                                                                          const std::vector<int64_t>& rows,
                                                                          const char* name))

STRATA_CUDA_ENTRIES_END
}  // namespace strata::cuda_ops
