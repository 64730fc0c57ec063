#pragma once
// CUDA devices as seen from the library (no CUDA headers here). In a build without CUDA every
// query answers "none" and every call that needs a GPU throws "strata was built without CUDA".
//
// Streams: strata's CUDA work (copies, kernels) runs on the device's default stream, the
// "current stream" that NCCL work orders itself against (docs/distributed.md).
namespace strata {
class Tensor;
}

namespace strata::cuda {

bool is_built();      // strata was compiled with CUDA
int device_count();   // visible GPUs; 0 without a GPU, a driver, or a CUDA build
bool is_available();  // device_count() > 0
// The calling thread's current device (CUDA keeps it per host thread). set_device throws
// naming the device when it does not exist.
void set_device(int index);
int current_device();
// Blocks until every stream of `device` (-1: the current one) is idle.
void synchronize(int device = -1);

// Marks that work on `stream` (a cudaStream_t; public headers include no CUDA headers) uses
// `tensor`'s memory, as PyTorch's Tensor.record_stream. When the memory is freed (its last
// tensor goes away, or Storage::release), the caching allocator hands it out again only
// after the work queued on `stream` up to that moment has finished; work queued later is
// not covered. The memory's own (default) stream needs no record. A tensor whose memory
// strata's allocator did not hand out (Storage::wrap) or that is released is left as it
// is: its owner keeps it alive. Throws for a tensor not on a CUDA device. The stream must
// outlive the record or be retired first (the NCCL group retires its comm stream).
void record_stream(const Tensor& tensor, void* stream);

// float32 matmul/linear on CUDA may use TF32 tensor cores (inputs rounded to 10 mantissa
// bits, float32 accumulation; about 1e-3 relative error), as PyTorch's
// torch.backends.cuda.matmul.allow_tf32. Off by default: float32 products are computed in
// float32. Process-wide; read when each product is issued. Works without CUDA too (no effect).
void set_allow_tf32(bool allow);
bool allow_tf32();

// Attention on CUDA in bfloat16/float16 (and float32 under an autocast scope) through cuDNN's
// fused flash-attention engines: no [B, H, Tq, Tk] probabilities are kept, the backward
// recomputes them. On by default (checked on an H100 against the composed attention: matmuls
// and the row softmax, used when it is off and wherever cuDNN takes no plan: float32/float64,
// masks, d > 128 or not a multiple of 8, fewer kv heads, causal Tq != Tk). The environment
// variable STRATA_FUSED_ATTENTION=0 turns it off at startup.
void set_fused_attention(bool enable);
bool fused_attention();

}  // namespace strata::cuda
