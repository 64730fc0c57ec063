// Ring and all-gather attention over a context-parallel group (context_parallel.h). The block
// math is flash attention's: GEMMs, and one fused row step per block on either device
// (ring_attention_blocks.h): forward keeps each query row's log-sum-exp, backward recomputes
// the probabilities from it.
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "backend/dispatch/device_dispatch.h"
#include "parallel/ring_attention_blocks.h"
#include "strata/autograd/function.h"
#include "strata/autograd/grad_mode.h"
#include "strata/ops/elementwise.h"
#include "strata/ops/linalg.h"
#include "strata/ops/reduce.h"
#include "strata/ops/shape_ops.h"
#include "strata/parallel/context_parallel.h"
#include "strata/tensor/factory.h"

namespace strata::parallel {
namespace {

thread_local ContextParallelStats stats;

// Sizes of one call. Queries are handled per chunk, grouped by kv head: [B, Hkv, G*c, D] with
// G = H / Hkv query heads per kv head, so one product serves the whole group.
struct Geometry {
  int64_t batch = 0, heads = 0, kv_heads = 0, group = 0, length = 0, chunk = 0, dim = 0;
  double scale = 1.0;
  DType compute = DType::Float32;
  Device device = Device::cpu();
  ContextParallelSplit split;
};

Geometry geometry(const Tensor& q, const Tensor& k, const Tensor& v, const dist::ProcessGroup& group,
                  const ContextParallelOptions& options) {
  STRATA_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "context_parallel_attention: q, k, v must be [B, H, T, D]",
               " (got ", q.shape(), ", ", k.shape(), ", ", v.shape(), ")");
  STRATA_CHECK(k.shape() == v.shape(), "context_parallel_attention: k ", k.shape(), " and v ", v.shape(), " differ");
  STRATA_CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2) && q.size(3) == k.size(3),
               "context_parallel_attention: q ", q.shape(), " and k ", k.shape(), " disagree in B, T or D");
  STRATA_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "context_parallel_attention: ", q.size(1),
               " query heads do not group over ", k.size(1), " kv heads");
  STRATA_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype() && is_floating(q.dtype()),
               "context_parallel_attention: q, k, v must share one floating dtype (got ", q.dtype(), ", ", k.dtype(),
               ", ", v.dtype(), ")");
  STRATA_CHECK(q.device() == k.device() && q.device() == v.device(), "context_parallel_attention: q, k, v are on ",
               q.device(), ", ", k.device(), ", ", v.device(), "; they must share one device");
  Geometry g;
  g.batch = q.size(0);
  g.heads = q.size(1);
  g.kv_heads = k.size(1);
  g.group = g.heads / g.kv_heads;
  g.length = q.size(2);
  g.dim = q.size(3);
  g.split = context_parallel_split(g.length * group.size(), group);
  g.chunk = g.split.chunk();
  g.scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(g.dim)));
  g.compute = q.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  g.device = q.device();
  return g;
}

// Chunk `which` of x [B, H, L, D] as [B, Hkv, G*c, D] in the compute dtype (a copy).
Tensor grouped_chunk(const Tensor& x, const Geometry& g, int which) {
  return x.narrow(2, which * g.chunk, g.chunk).to(g.compute).reshape({g.batch, g.kv_heads, g.group * g.chunk, g.dim});
}

// The two grouped chunks back to [B, H, L, D].
Tensor ungrouped(const std::array<Tensor, 2>& chunks, const Geometry& g) {
  const Shape per_chunk{g.batch, g.heads, g.chunk, g.dim};
  return cat({chunks[0].reshape(per_chunk), chunks[1].reshape(per_chunk)}, 2);
}

// Keys and values packed into one message: [2, B, Hkv, L, D].
Tensor packed_kv(const Tensor& k, const Tensor& v, const Geometry& g) {
  return stack({k.to(g.compute), v.to(g.compute)}, 0).contiguous();
}

// Chunk `which` of the keys (part 0) or values (part 1) in a packed block.
Tensor kv_chunk(const Tensor& kv, int part, int which, const Geometry& g) {
  return kv.select(0, part).narrow(2, which * g.chunk, g.chunk);
}

// One (query chunk, key chunk) pair of the causal attention: the keys of chunk `key_chunk`
// (a global chunk index) as seen from the queries of chunk `query_chunk`.
enum class Block : uint8_t { Skip, Full, Diagonal };
Block block_kind(int64_t query_chunk, int64_t key_chunk) {
  if (key_chunk > query_chunk) return Block::Skip;
  return key_chunk == query_chunk ? Block::Diagonal : Block::Full;
}

// The global chunk index of chunk `which` held by rank `source`.
int64_t source_chunk(const Geometry& g, int source, int which) {
  return which == 0 ? source : 2 * static_cast<int64_t>(g.split.degree) - 1 - source;
}

// The raw scores q.k of one block, [B, Hkv, G*c, c] (contiguous).
Tensor block_scores(const Tensor& q, const Tensor& k) { return matmul(q, k.transpose(2, 3)); }

// A normalised partial output and its rows' log-sum-exp, [B, Hkv, G*c, D] and [.., 1].
struct Partial {
  Tensor out, lse;
};

Partial block_forward(const Tensor& q, const Tensor& k, const Tensor& v, Block kind, const Geometry& g) {
  const Tensor s = block_scores(q, k);
  const bool diagonal = kind == Block::Diagonal;
  RingBlockSoftmax p = detail::on_device(
      "context_parallel_attention", s.device(), [&] { return ring_cpu::ring_block_softmax(s, g.scale, diagonal); },
      [&] { return ring_cuda::ring_block_softmax(s, g.scale, diagonal); });
  return {matmul(p.probs, v), p.lse};
}

// Online softmax: two partial results over disjoint keys merged by their log-sum-exp.
void merge_into(Partial& acc, Partial part) {
  if (!acc.out.defined()) {
    acc = std::move(part);
    return;
  }
  Tensor hi = maximum(acc.lse, part.lse);
  Tensor wa = exp(sub(acc.lse, hi));
  Tensor wb = exp(sub(part.lse, hi));
  Tensor total = add(wa, wb);
  acc.out = div(add(mul(acc.out, wa), mul(part.out, wb)), total);
  acc.lse = add(hi, log(total));
}

// What backward needs of one query chunk.
struct QueryChunk {
  Tensor q, out, lse, grad_out, delta;  // delta: rowsum(grad_out * out)
  Tensor grad_q;                        // accumulated
};

// Adds one block's contribution to the query gradient and to grad_k / grad_v (chunk views).
void block_backward(QueryChunk& qc, const Tensor& k, const Tensor& v, Block kind, Tensor grad_k, Tensor grad_v,
                    const Geometry& g) {
  const Tensor s = block_scores(qc.q, k);
  const bool diagonal = kind == Block::Diagonal;
  const Tensor p = detail::on_device(
      "context_parallel_attention", s.device(),
      [&] { return ring_cpu::ring_block_probs(s, qc.lse, g.scale, diagonal); },
      [&] { return ring_cuda::ring_block_probs(s, qc.lse, g.scale, diagonal); });
  add_(grad_v, matmul(p.transpose(2, 3), qc.grad_out));
  Tensor dp = matmul(qc.grad_out, v.transpose(2, 3));
  const Tensor ds = detail::on_device(
      "context_parallel_attention", s.device(),
      [&] { return ring_cpu::ring_block_score_grad(dp, p, qc.delta, g.scale); },
      [&] { return ring_cuda::ring_block_score_grad(dp, p, qc.delta, g.scale); });
  add_(qc.grad_q, matmul(ds, k));
  add_(grad_k, matmul(ds.transpose(2, 3), qc.q));
}

// Calls visit(block, source) once for every rank's block, passing blocks to the next rank;
// the transfer of the next block runs while `visit` computes with the current one.
void around_the_ring(Tensor block, dist::ProcessGroup& group, const std::function<void(const Tensor&, int)>& visit) {
  const int n = group.size();
  const int r = group.rank();
  for (int step = 0; step < n; ++step) {
    dist::WorkPtr transfer;
    Tensor next;
    if (step + 1 < n) {
      next = empty_like(block);
      const std::array<dist::P2POp, 2> ops{dist::P2POp::send(block, (r + 1) % n),
                                           dist::P2POp::recv(next, (r + n - 1) % n)};
      transfer = group.batch_send_recv(ops);
      stats.bytes_sent += static_cast<int64_t>(block.nbytes());
    }
    visit(block, (r + n - step) % n);
    ++stats.ring_steps;
    if (transfer) {
      transfer->wait();
      block = next;
    }
  }
}

// Backward's ring: blocks travel as in forward, and beside each its gradient, which every
// rank adds to (grad_of(block, source) gives this rank's share) and passes on; after the
// last step each gradient makes one more hop, home to its owner. Returns this rank's own.
Tensor gradients_around_the_ring(const Tensor& block, dist::ProcessGroup& group,
                                 const std::function<Tensor(const Tensor&, int)>& grad_of) {
  const int n = group.size();
  const int r = group.rank();
  Tensor arriving, sending;
  dist::WorkPtr in_flight;
  around_the_ring(block, group, [&](const Tensor& current, int source) {
    Tensor grad = grad_of(current, source);
    if (in_flight) {
      in_flight->wait();
      add_(grad, arriving);
    }
    if (n == 1) {
      arriving = grad;
      return;
    }
    sending = grad;
    arriving = empty_like(grad);
    const std::array<dist::P2POp, 2> ops{dist::P2POp::send(sending, (r + 1) % n),
                                         dist::P2POp::recv(arriving, (r + n - 1) % n)};
    in_flight = group.batch_send_recv(ops);
    stats.bytes_sent += static_cast<int64_t>(sending.nbytes());
  });
  if (in_flight) in_flight->wait();
  return arriving;
}

// Every rank's packed block, [n, 2, B, Hkv, L, D].
Tensor gather_blocks(const Tensor& block, dist::ProcessGroup& group) {
  Shape shape = block.shape();
  shape.insert(0, group.size());
  Tensor all = empty(shape, {.dtype = block.dtype(), .device = block.device()});
  Tensor flat = all.view({all.numel()});
  group.all_gather(flat, block.view({block.numel()}))->wait();
  stats.bytes_sent += static_cast<int64_t>(block.nbytes());
  return all;
}

void visit_all(const Tensor& kv, dist::ProcessGroup& group, ContextParallelAttention variant,
               const std::function<void(const Tensor&, int)>& visit) {
  if (variant == ContextParallelAttention::Ring || group.size() == 1) {
    around_the_ring(kv, group, visit);
    return;
  }
  Tensor all = gather_blocks(kv, group);
  for (int source = 0; source < group.size(); ++source) visit(all.select(0, source), source);
}

Tensor kv_gradients(const Tensor& kv, dist::ProcessGroup& group, ContextParallelAttention variant,
                    const std::function<Tensor(const Tensor&, int)>& grad_of) {
  if (variant == ContextParallelAttention::Ring || group.size() == 1)
    return gradients_around_the_ring(kv, group, grad_of);
  Tensor all = gather_blocks(kv, group);
  Tensor grads = empty(all.shape(), {.dtype = all.dtype(), .device = all.device()});
  for (int source = 0; source < group.size(); ++source) {
    Tensor slot = grads.select(0, source);
    slot.copy_(grad_of(all.select(0, source), source));
  }
  Tensor own = empty(kv.shape(), {.dtype = kv.dtype(), .device = kv.device()});
  Tensor own_flat = own.view({own.numel()});
  group.reduce_scatter(own_flat, grads.view({grads.numel()}))->wait();
  stats.bytes_sent += static_cast<int64_t>(grads.nbytes());
  return own;
}

// Calls f(query chunk, key chunk, kind) for the pairs of this rank's query chunks and the
// chunks that `source` holds that causality lets attend.
template <class F>
void for_each_pair(const Geometry& g, int source, F&& f) {
  for (int w = 0; w < 2; ++w)
    for (int u = 0; u < 2; ++u) {
      const Block kind = block_kind(g.split.chunk_index(w), source_chunk(g, source, u));
      if (kind == Block::Skip) continue;
      ++stats.block_products;
      f(w, u, kind);
    }
}

}  // namespace

Tensor context_parallel_attention(const Tensor& q, const Tensor& k, const Tensor& v, dist::ProcessGroup& group,
                                  const ContextParallelOptions& options) {
  const Geometry g = geometry(q, k, v, group, options);
  const bool record = autograd::needs_grad({q, k, v});
  NoGradGuard no_grad;
  const std::array<Tensor, 2> queries{grouped_chunk(q, g, 0), grouped_chunk(q, g, 1)};
  const Tensor kv = packed_kv(k, v, g);
  std::array<Partial, 2> acc;
  visit_all(kv, group, options.variant, [&](const Tensor& block, int source) {
    for_each_pair(g, source, [&](int w, int u, Block kind) {
      merge_into(acc[w], block_forward(queries[w], kv_chunk(block, 0, u, g), kv_chunk(block, 1, u, g), kind, g));
    });
  });
  ++stats.forward_calls;
  Tensor out = ungrouped({acc[0].out, acc[1].out}, g).to(q.dtype());
  if (!record) return out;

  const std::vector<Tensor> saved{queries[0], queries[1], kv, acc[0].out, acc[1].out, acc[0].lse, acc[1].lse};
  stats.saved_bytes = 0;
  for (const Tensor& t : saved) stats.saved_bytes += static_cast<int64_t>(t.nbytes());
  const DType q_dtype = q.dtype(), kv_dtype = k.dtype();
  const ContextParallelAttention variant = options.variant;
  autograd::record("ContextParallelAttentionBackward", {q, k, v}, {out}, {saved.begin(), saved.end()},
                   [saved, g, &group, variant, q_dtype, kv_dtype](autograd::BackwardContext& ctx) {
                     NoGradGuard no_grad_inside;
                     std::array<QueryChunk, 2> chunks;
                     for (int w = 0; w < 2; ++w) {
                       QueryChunk& c = chunks[static_cast<size_t>(w)];
                       c.q = saved[static_cast<size_t>(w)];
                       c.out = saved[static_cast<size_t>(3 + w)];
                       c.lse = saved[static_cast<size_t>(5 + w)];
                       c.grad_out = grouped_chunk(ctx.grad(0), g, w);
                       c.delta = sum(mul(c.grad_out, c.out), {3}, true).contiguous();
                       c.grad_q = zeros_like(c.q);
                     }
                     Tensor grad_kv = kv_gradients(saved[2], group, variant, [&](const Tensor& block, int source) {
                       Tensor grad = zeros_like(block);
                       for_each_pair(g, source, [&](int w, int u, Block kind) {
                         block_backward(chunks[static_cast<size_t>(w)], kv_chunk(block, 0, u, g),
                                        kv_chunk(block, 1, u, g), kind, kv_chunk(grad, 0, u, g),
                                        kv_chunk(grad, 1, u, g), g);
                       });
                       return grad;
                     });
                     ++stats.backward_calls;
                     return std::vector<Tensor>{ungrouped({chunks[0].grad_q, chunks[1].grad_q}, g).to(q_dtype),
                                                grad_kv.select(0, 0).to(kv_dtype), grad_kv.select(0, 1).to(kv_dtype)};
                   });
  return out;
}

ContextParallelStats context_parallel_stats() { return stats; }
void reset_context_parallel_stats() { stats = {}; }

}  // namespace strata::parallel
