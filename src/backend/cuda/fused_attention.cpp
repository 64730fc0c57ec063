// CUDA glue of the fused attention (../ops/attention_fused.h): cuDNN's flash-attention
// engines run the graphs of cudnn_attention_graph.h. Plans are built once per problem
// (geometry, strides, dtype, device) and cached, as is the answer "no plan": building one
// can compile kernels at run time (NVRTC), which costs far more than the attention itself.
// A build without cuDNN, or a problem cuDNN takes no plan for, answers nullopt and the
// caller composes attention from matmuls and the row softmax instead.
#include <optional>

#include "backend/cuda/cuda_ops.h"
#include "strata/core/error.h"

#if STRATA_HAS_CUDNN
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cudnn_attention_graph.h"
#include "backend/cuda/cudnn_plan.h"
#include "strata/tensor/factory.h"

namespace strata::cuda_ops {
namespace {

// One cuDNN handle per device, created with the device current and kept for the process's
// life (tensors may outlive static destructors). Executions on a handle are serialized: it
// carries the stream they run on.
struct HandleSlot {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
};

HandleSlot& handle_of(int device) {
  static std::mutex mutex;
  static auto* slots = new std::map<int, std::unique_ptr<HandleSlot>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*slots)[device];
  if (!slot) {
    auto fresh = std::make_unique<HandleSlot>();
    cudnn::check(cudnnCreate(&fresh->handle), "cudnnCreate on cuda:" + std::to_string(device));
    slot = std::move(fresh);
  }
  return *slot;
}

struct CachedPlan {
  cudnn::AttentionGraph graph;  // keeps the descriptors the plan refers to alive
  cudnn::Desc op_graph;
  cudnn::Plan plan;
};

cudnnDataType_t io_type(DType dtype) { return dtype == DType::BFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF; }

std::vector<int64_t> strides_of(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

cudnn::AttentionGeometry geometry(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  cudnn::AttentionGeometry g;
  g.batch = q.size(0);
  g.heads = q.size(1);
  g.tq = q.size(2);
  g.tk = k.size(2);
  g.dim = q.size(3);
  g.io = io_type(q.dtype());
  g.causal = causal;
  g.q_strides = strides_of(q);
  g.k_strides = strides_of(k);
  g.v_strides = strides_of(v);
  return g;
}

// The cached plan of one problem; null when cuDNN takes none (said once, on stderr).
std::shared_ptr<const CachedPlan> plan_for(bool backward, const cudnn::AttentionGeometry& g, int device,
                                           cudnnHandle_t handle) {
  std::vector<int64_t> key{backward, device, g.io, g.causal, g.batch, g.heads, g.tq, g.tk, g.dim};
  for (const auto* s : {&g.q_strides, &g.k_strides, &g.v_strides, &g.o_strides, &g.do_strides})
    key.insert(key.end(), s->begin(), s->end());
  static std::mutex mutex;
  static auto* cache = new std::map<std::vector<int64_t>, std::shared_ptr<const CachedPlan>>();
  std::lock_guard<std::mutex> lock(mutex);  // building is rare; one at a time keeps it simple
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  std::shared_ptr<CachedPlan> built;
  std::string why;
  try {
    auto p = std::make_shared<CachedPlan>();
    p->graph = backward ? cudnn::attention_backward_graph(g) : cudnn::attention_forward_graph(g);
    p->op_graph = cudnn::operation_graph(p->graph.ops, handle, backward ? "attention backward" : "attention forward");
    if (auto plan = cudnn::make_plan(p->op_graph, {handle, nullptr}, &why)) {
      p->plan = std::move(*plan);
      built = std::move(p);
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!built)
    std::fprintf(stderr,
                 "strata: cuDNN has no fused attention %s for [%lld, %lld, %lld, %lld] x %lld keys on cuda:%d (%s); "
                 "using the composed attention\n",
                 backward ? "backward" : "forward", static_cast<long long>(g.batch), static_cast<long long>(g.heads),
                 static_cast<long long>(g.tq), static_cast<long long>(g.dim), static_cast<long long>(g.tk), device,
                 why.c_str());
  return cache->emplace(std::move(key), std::move(built)).first->second;
}

// Runs a plan on the device's current stream with the given tensors (uid, pointer) and the
// host scalars the graphs take by value.
void execute(const CachedPlan& p, HandleSlot& slot, int device, std::vector<std::pair<int64_t, void*>> tensors,
             double scale) {
  const float scale_value = static_cast<float>(scale);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const float one = 1.0f;
  tensors.emplace_back(cudnn::kScale, const_cast<float*>(&scale_value));
  tensors.emplace_back(cudnn::kNegInf, const_cast<float*>(&neg_inf));
  tensors.emplace_back(cudnn::kOne, const_cast<float*>(&one));
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const auto& [uid, ptr] : tensors) {
    if (std::find(p.graph.uids.begin(), p.graph.uids.end(), uid) == p.graph.uids.end()) continue;  // e.g. -inf
    uids.push_back(uid);
    pointers.push_back(ptr);
  }
  const size_t ws_bytes = static_cast<size_t>(p.plan.workspace_bytes);
  void* workspace = ws_bytes ? cuda_detail::allocate(ws_bytes, device) : nullptr;
  try {
    cudnn::Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack of the fused attention");
    pack.set_array(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids);
    pack.set_array(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers);
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace);
    pack.finalize();
    std::lock_guard<std::mutex> lock(slot.mutex);
    cudnn::check(cudnnSetStream(slot.handle, cuda_detail::stream_of(device)), "cudnnSetStream");
    profiler::count_launch();
    cudnn::check(cudnnBackendExecute(slot.handle, p.plan.plan.get(), pack.get()),
                 "running the fused attention (engine " + std::to_string(p.plan.engine) + ")");
  } catch (...) {
    if (workspace) cuda_detail::deallocate(workspace, ws_bytes, device);
    throw;
  }
  // Safe without waiting: the block's next user runs after this on the same stream.
  if (workspace) cuda_detail::deallocate(workspace, ws_bytes, device);
}

}  // namespace

std::optional<FusedAttention> fused_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                                      bool causal, bool with_backward) {
  const int device = q.device().index;
  cuda_detail::check_device(q.device(), "fused attention");
  cuda_detail::DeviceGuard guard(device);
  HandleSlot& slot = handle_of(device);
  cudnn::AttentionGeometry g = geometry(q, k, v, causal);
  const Shape out_shape{q.size(0), q.size(1), q.size(2), q.size(3)};
  g.o_strides = cudnn::packed_strides({out_shape.begin(), out_shape.end()});
  const auto plan = plan_for(false, g, device, slot.handle);
  if (!plan) return std::nullopt;
  if (with_backward) {
    // Decided now, while the composed attention can still be chosen: the backward reads this
    // output and a contiguous incoming gradient, so its plan is known in advance.
    cudnn::AttentionGeometry gb = g;
    gb.do_strides = g.o_strides;
    if (!plan_for(true, gb, device, slot.handle)) return std::nullopt;
  }
  FusedAttention r{empty(out_shape, {.dtype = q.dtype(), .device = q.device()}),
                   empty({q.size(0), q.size(1), q.size(2), 1}, {.dtype = DType::Float32, .device = q.device()})};
  execute(*plan, slot, device,
          {{cudnn::kQ, q.data_ptr()},
           {cudnn::kK, k.data_ptr()},
           {cudnn::kV, v.data_ptr()},
           {cudnn::kO, r.out.data_ptr()},
           {cudnn::kStats, r.stats.data_ptr()}},
          scale);
  return r;
}

FusedAttentionGrads fused_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                             const Tensor& stats, const Tensor& grad_out, double scale, bool causal) {
  const int device = q.device().index;
  cuda_detail::check_device(q.device(), "fused attention backward");
  cuda_detail::DeviceGuard guard(device);
  HandleSlot& slot = handle_of(device);
  cudnn::AttentionGeometry g = geometry(q, k, v, causal);
  g.o_strides = strides_of(out);
  g.do_strides = strides_of(grad_out);
  const auto plan = plan_for(true, g, device, slot.handle);
  STRATA_CHECK(plan != nullptr, "fused attention backward: cuDNN took no plan for q ", q.shape(), ", k ", k.shape(),
               " although the forward found one");
  const TensorOptions io{.dtype = q.dtype(), .device = q.device()};
  const TensorOptions f32{.dtype = DType::Float32, .device = q.device()};
  FusedAttentionGrads r{empty(q.shape(), io), empty(k.shape(), io), empty(v.shape(), io)};
  // The engine accumulates into its float32 scratch: both start at zero.
  const Tensor row_sums = zeros({q.size(0), q.size(1), q.size(2), 1}, f32);
  const Tensor dq_accum = zeros(q.shape(), f32);
  execute(*plan, slot, device,
          {{cudnn::kQ, q.data_ptr()},
           {cudnn::kK, k.data_ptr()},
           {cudnn::kV, v.data_ptr()},
           {cudnn::kO, out.data_ptr()},
           {cudnn::kDo, grad_out.data_ptr()},
           {cudnn::kStats, stats.data_ptr()},
           {cudnn::kDq, r.dq.data_ptr()},
           {cudnn::kDk, r.dk.data_ptr()},
           {cudnn::kDv, r.dv.data_ptr()},
           {cudnn::kSoftmaxSum, row_sums.data_ptr()},
           {cudnn::kDqAccum, dq_accum.data_ptr()}},
          scale);
  return r;
}

}  // namespace strata::cuda_ops

#else  // no cuDNN: every problem goes to the composed attention

namespace strata::cuda_ops {

std::optional<FusedAttention> fused_attention_forward(const Tensor&, const Tensor&, const Tensor&, double, bool, bool) {
  return std::nullopt;
}
FusedAttentionGrads fused_attention_backward(const Tensor& q, const Tensor&, const Tensor&, const Tensor&,
                                             const Tensor&, const Tensor&, double, bool) {
  STRATA_FAIL("fused attention backward on ", q.device(), ": strata was built without cuDNN");
}

}  // namespace strata::cuda_ops

#endif
