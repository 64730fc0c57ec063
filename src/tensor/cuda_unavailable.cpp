// A build without CUDA: the CUDA seam (tensor/cuda/cuda_backend.h) and the public queries
// (strata/tensor/cuda.h) answer "no devices" and refuse CUDA work with one clear message.
#include "strata/core/error.h"
#include "strata/tensor/allocator.h"
#include "strata/tensor/cuda.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/cuda_ops.h"

namespace strata {
namespace {

[[noreturn]] void no_cuda(const char* what, Device device) {
  STRATA_FAIL(what, ": ", device, " is not available: strata was built without CUDA (configure with "
              "-DSTRATA_WITH_CUDA=ON where the CUDA toolkit is installed)");
}

}  // namespace

namespace cuda {
bool is_built() { return false; }
int device_count() { return 0; }
bool is_available() { return false; }
void set_device(int index) { no_cuda("cuda::set_device", Device::cuda(index)); }
int current_device() { no_cuda("cuda::current_device", Device::cuda(0)); }
void synchronize(int device) { no_cuda("cuda::synchronize", Device::cuda(device < 0 ? 0 : device)); }
}  // namespace cuda

namespace cuda_allocator {
AllocatorStats stats(int) { return {}; }
void reset_peak(int) {}
void empty_cache() {}
}  // namespace cuda_allocator

namespace cuda_detail {
void check_device(Device device, const char* what) { no_cuda(what, device); }
void* allocate(size_t, int device) { no_cuda("Storage::allocate", Device::cuda(device)); }
void deallocate(void*, size_t, int) {}
bool record_stream(void*, int, void*) { return false; }
void retire_stream(int, void*) {}
void copy(const Tensor& dst, const Tensor& src) {
  no_cuda("copy", dst.device().is_cuda() ? dst.device() : src.device());
}
void poison_device(int, const std::string&) {}
void fill(const Tensor& dst, double) { no_cuda("fill", dst.device()); }
void* current_stream(int) { return nullptr; }
void multi_tensor_launch(MultiTensorKernel, DType, int device, const void*, size_t, const void*, int64_t) {
  no_cuda("multi-tensor operation", Device::cuda(device));
}
void multi_tensor_reduce(MultiTensorReduction, DType, int device, const void*, size_t, const void*, int64_t, void*,
                         size_t) {
  no_cuda("multi-tensor reduction", Device::cuda(device));
}
}  // namespace cuda_detail

namespace cuda_ops {
Tensor binary(cpu::BinaryOp, const Tensor& a, const Tensor&, const char* name) { no_cuda(name, a.device()); }
Tensor unary(cpu::UnaryOp, const Tensor& a, const char* name, double, double) { no_cuda(name, a.device()); }
Tensor unary_grad(cpu::UnaryGradOp, const Tensor&, const Tensor& saved, const char* name, double, double) {
  no_cuda(name, saved.device());
}
Tensor binary_grad(cpu::BinaryGradOp, const Tensor& grad, const Tensor&, const Tensor&, const char* name) {
  no_cuda(name, grad.device());
}
void add_inplace(const Tensor& self, const Tensor&, double) { no_cuda("add_", self.device()); }
void mul_inplace(const Tensor& self, double) { no_cuda("mul_", self.device()); }
// Comparisons, selections and cat (cuda/compare.cpp, cuda/cat.cpp).
Tensor compare(cpu::CompareOp, const Tensor& a, const Tensor&, const char* name) { no_cuda(name, a.device()); }
Tensor where(const Tensor&, const Tensor& a, const Tensor&, const Shape&, const char* name) {
  no_cuda(name, a.device());
}
Tensor masked_fill(const Tensor& x, const Tensor&, double, const Shape&, const char* name) {
  no_cuda(name, x.device());
}
Tensor cat(const std::vector<Tensor>& ts, size_t, const Shape&, const char* op) { no_cuda(op, ts[0].device()); }
Tensor softmax_forward(const Tensor& x, int64_t, bool log) { no_cuda(log ? "log_softmax" : "softmax", x.device()); }
Tensor softmax_backward(const Tensor&, const Tensor& out, int64_t, bool log) {
  no_cuda(log ? "log_softmax backward" : "softmax backward", out.device());
}
Tensor attention_softmax_forward(const Tensor& scores, double, bool) { no_cuda("attention softmax", scores.device()); }
Tensor attention_softmax_backward(const Tensor&, const Tensor& probs, double, bool) {
  no_cuda("attention softmax backward", probs.device());
}
std::optional<FusedAttention> fused_attention_forward(const Tensor& q, const Tensor&, const Tensor&, double, bool,
                                                      bool) {
  no_cuda("fused attention", q.device());
}
FusedAttentionGrads fused_attention_backward(const Tensor& q, const Tensor&, const Tensor&, const Tensor&,
                                             const Tensor&, const Tensor&, double, bool) {
  no_cuda("fused attention backward", q.device());
}
cpu::CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor&, int64_t) {
  no_cuda("cross_entropy", logits.device());
}
Tensor cross_entropy_backward(const Tensor&, const Tensor& logits, const Tensor&, const Tensor&, int64_t, int64_t) {
  no_cuda("cross_entropy backward", logits.device());
}
cpu::LayerNormResult layer_norm_forward(const Tensor& x, const Tensor&, const Tensor&, double) {
  no_cuda("layer_norm", x.device());
}
cpu::LayerNormGrads layer_norm_backward(const Tensor&, const Tensor& x, const Tensor&, const Tensor&, const Tensor&, bool,
                                        bool, bool) {
  no_cuda("layer_norm backward", x.device());
}
cpu::RmsNormResult rms_norm_forward(const Tensor& x, const Tensor&, double) { no_cuda("rms_norm", x.device()); }
cpu::RmsNormGrads rms_norm_backward(const Tensor&, const Tensor& x, const Tensor&, const Tensor&, bool, bool) {
  no_cuda("rms_norm backward", x.device());
}
Tensor sum_keepdim(const Tensor& x, const std::vector<bool>&) { no_cuda("sum", x.device()); }
// Max, topk, cumsum (cuda/line_select.cpp).
void max_keepdim(const Tensor& x, int64_t, Tensor*, Tensor*) { no_cuda("max", x.device()); }
void topk(const Tensor& x, int64_t, int64_t, bool, Tensor*, Tensor*) { no_cuda("topk", x.device()); }
Tensor cumsum(const Tensor& x, int64_t, bool reverse) { no_cuda(reverse ? "cumsum backward" : "cumsum", x.device()); }
Tensor scatter_add_lines(const char* op, const Shape&, int64_t, const Tensor&, const Tensor& grad) {
  no_cuda(op, grad.device());
}
Tensor embedding_forward(const Tensor&, const Tensor& weight) { no_cuda("embedding", weight.device()); }
Tensor embedding_backward(const Tensor& grad, const Tensor&, int64_t) { no_cuda("embedding backward", grad.device()); }
Tensor rotary_apply(const Tensor& x, const Tensor&, const Tensor&, bool) { no_cuda("rotary_embedding", x.device()); }
Tensor dropout_apply(const Tensor& x, double, uint64_t, uint64_t) { no_cuda("dropout", x.device()); }
int64_t vocab_parallel_check_targets(const Tensor& targets, int64_t, int64_t) {
  no_cuda("vocab_parallel_cross_entropy", targets.device());
}
Tensor vocab_parallel_row_max(const Tensor& logits, int64_t) { no_cuda("vocab_parallel_cross_entropy", logits.device()); }
cpu::VocabRowSums vocab_parallel_row_sums(const Tensor& logits, const Tensor&, int64_t, int64_t, int64_t,
                                          const Tensor&) {
  no_cuda("vocab_parallel_cross_entropy", logits.device());
}
Tensor vocab_parallel_loss(const Tensor& targets, int64_t, int64_t, const Tensor&, const Tensor&, const Tensor&, int64_t,
                           DType) {
  no_cuda("vocab_parallel_cross_entropy", targets.device());
}
Tensor vocab_parallel_grad(const Tensor& logits, const Tensor&, int64_t, int64_t, int64_t, int64_t, const Tensor&,
                           const Tensor&, double) {
  no_cuda("vocab_parallel_cross_entropy backward", logits.device());
}
cpu::VocabShardIndices vocab_shard_indices(const Tensor& tokens, int64_t, int64_t, int64_t) {
  no_cuda("VocabParallelEmbedding", tokens.device());
}
Tensor matmul(const Tensor& a, const Tensor&, const Shape&, const Tensor&, const char* name) {
  no_cuda(name, a.device());
}
Tensor matmul_sum(const Tensor& a, const Tensor&, const char* name) { no_cuda(name, a.device()); }
}  // namespace cuda_ops
}  // namespace strata
