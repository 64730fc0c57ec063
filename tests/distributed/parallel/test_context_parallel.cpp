// Context-parallel attention over the whole world as the CP group (1, 2 or 4 ranks): ring and
// all-gather variants against one process's causal attention over the whole sequence, in
// float64 (forward and every gradient), with exact counts of ring steps, bytes and saved
// activations; the split's bad input.
#include <cmath>
#include <string>
#include <tuple>

#include "distributed/dist_test_util.h"
#include "strata/strata.h"

namespace strata {
namespace {

using parallel::ContextParallelAttention;
using test::error_of;

Tensor input64(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {.dtype = DType::Float64}, &g);
}

// |got - want| <= 1e-12 * max(|want|, 1) elementwise: float64 rounding of a few dozen
// operations per element (the sums run over at most T = 40 keys).
void expect_close64(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  double worst = 0, scale = 1.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  EXPECT_LE(worst, 1e-12 * scale) << what;
}

struct Case {
  int64_t batch, heads, kv_heads, chunk, dim;
};

// One process's attention and gradients over the whole sequence, and this rank's share of the
// context-parallel computation of the same, compared.
void check_against_one_process(const Case& c, ContextParallelAttention variant, dist::ProcessGroup& cp) {
  const int64_t T = 2 * c.chunk * cp.size();
  const Tensor q = input64({c.batch, c.heads, T, c.dim}, 1), k = input64({c.batch, c.kv_heads, T, c.dim}, 2),
               v = input64({c.batch, c.kv_heads, T, c.dim}, 3), w = input64({c.batch, c.heads, T, c.dim}, 4);
  Tensor qf = q.clone().set_requires_grad(true), kf = k.clone().set_requires_grad(true),
         vf = v.clone().set_requires_grad(true);
  Tensor want = attention(qf, kf, vf, {.causal = true});
  sum(mul(want, w)).backward();

  const parallel::ContextParallelSplit split = parallel::context_parallel_split(T, cp);
  auto local = [&](const Tensor& x) { return parallel::take_local_sequence(x, 2, split); };
  Tensor ql = local(q).set_requires_grad(true), kl = local(k).set_requires_grad(true),
         vl = local(v).set_requires_grad(true);
  Tensor got = parallel::context_parallel_attention(ql, kl, vl, cp, {.variant = variant});
  sum(mul(got, local(w))).backward();
  const std::string what = "T " + std::to_string(T) + " heads " + std::to_string(c.heads) + "/" +
                           std::to_string(c.kv_heads) + (variant == ContextParallelAttention::Ring ? " ring" : " gather");
  expect_close64(got, local(want.detach()), "output, " + what);
  expect_close64(ql.grad(), local(qf.grad()), "dq, " + what);
  expect_close64(kl.grad(), local(kf.grad()), "dk, " + what);
  expect_close64(vl.grad(), local(vf.grad()), "dv, " + what);
}

}  // namespace

// Sequence lengths 2*CP*chunk with chunks of 3 and 5 tokens (never a power of two), multi-head,
// grouped-query and multi-query heads.
TEST(ContextParallel, EqualsOneProcessInFloat64) {
  auto& cp = dist::world();
  for (const Case& c : {Case{2, 4, 4, 3, 8}, Case{1, 4, 2, 5, 6}, Case{2, 3, 1, 3, 4}})
    for (auto variant : {ContextParallelAttention::Ring, ContextParallelAttention::AllGather})
      check_against_one_process(c, variant, cp);
}

// Rank r holds chunks r and 2*CP-1-r; the positions and the split tokens agree.
TEST(ContextParallel, LoadBalancedSplit) {
  auto& cp = dist::world();
  const int n = cp.size(), r = cp.rank();
  const auto split = parallel::context_parallel_split(6 * n, cp);
  EXPECT_EQ(split.chunk(), 3);
  const std::vector<int64_t> positions = parallel::local_positions(split);
  ASSERT_EQ(positions.size(), 6u);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(positions[static_cast<size_t>(i)], 3 * r + i);
    EXPECT_EQ(positions[static_cast<size_t>(3 + i)], 3 * (2 * n - 1 - r) + i);
  }
  std::vector<double> tokens(static_cast<size_t>(6 * n));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<double>(i);
  const Tensor x = from_vector(tokens, {1, 6 * n});
  std::vector<double> got = parallel::take_local_sequence(x, 1, split).to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], static_cast<double>(positions[i]));
}

// Ring steps, bytes and block products per call, and the bytes kept for backward, exactly.
TEST(ContextParallel, CommunicationAndMemoryAccounting) {
  auto& cp = dist::world();
  const int64_t n = cp.size();
  const int64_t B = 2, H = 4, Hkv = 2, c = 3, D = 8, L = 2 * c;
  const int64_t kv_bytes = 2 * B * Hkv * L * D * 8;  // float64
  for (auto variant : {ContextParallelAttention::Ring, ContextParallelAttention::AllGather}) {
    const bool ring = variant == ContextParallelAttention::Ring;
    Tensor q = input64({B, H, L, D}, 5).set_requires_grad(true);
    Tensor k = input64({B, Hkv, L, D}, 6).set_requires_grad(true);
    Tensor v = input64({B, Hkv, L, D}, 7).set_requires_grad(true);
    parallel::reset_context_parallel_stats();
    cp.reset_stats();
    Tensor out = parallel::context_parallel_attention(q, k, v, cp, {.variant = variant});
    auto fwd = parallel::context_parallel_stats();
    // The causal pairs of (query chunk, key chunk) over the whole sequence: 2n(2n+1)/2, shared
    // equally: each rank computes 2n + 1 (the load balance the split exists for).
    EXPECT_EQ(fwd.block_products, 2 * n + 1);
    EXPECT_EQ(fwd.ring_steps, ring || n == 1 ? n : 0);
    EXPECT_EQ(fwd.bytes_sent, n == 1 ? 0 : ring ? (n - 1) * kv_bytes : kv_bytes);
    // Queries and output [B, H, L, D], the log-sum-exp [B, H, L], keys and values: all 1/CP of
    // the unsplit sequence's.
    EXPECT_EQ(fwd.saved_bytes, (B * H * L * (2 * D + 1)) * 8 + kv_bytes);
    sum(out).backward();
    auto all = parallel::context_parallel_stats();
    EXPECT_EQ(all.forward_calls, 1);
    EXPECT_EQ(all.backward_calls, 1);
    EXPECT_EQ(all.block_products, 2 * (2 * n + 1));
    const int64_t backward_bytes = n == 1 ? 0 : ring ? (n - 1) * kv_bytes + n * kv_bytes : kv_bytes + n * kv_bytes;
    EXPECT_EQ(all.bytes_sent - fwd.bytes_sent, backward_bytes);
    // The group counted the same bytes: sends for the ring, all_gather + reduce_scatter otherwise.
    uint64_t group_bytes = 0;
    for (const auto& [op, counter] : cp.stats())
      if (op != dist::OpType::Recv) group_bytes += counter.bytes;
    EXPECT_EQ(static_cast<int64_t>(group_bytes), all.bytes_sent);
  }
}

// 16-bit inputs: the float32 computation rounded once to the input dtype.
TEST(ContextParallel, SixteenBitInputsAreTheFloat32ResultRounded) {
  auto& cp = dist::world();
  const int64_t L = 4;
  Tensor q = input64({1, 2, L, 8}, 8).to(DType::BFloat16), k = input64({1, 2, L, 8}, 9).to(DType::BFloat16),
         v = input64({1, 2, L, 8}, 10).to(DType::BFloat16);
  Tensor got = parallel::context_parallel_attention(q, k, v, cp);
  Tensor want = parallel::context_parallel_attention(q.to(DType::Float32), k.to(DType::Float32),
                                                     v.to(DType::Float32), cp)
                    .to(DType::BFloat16);
  EXPECT_EQ(got.dtype(), DType::BFloat16);
  EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());
}

TEST(ContextParallel, BadInputIsNamedBeforeAnyCollective) {
  auto& cp = dist::world();
  cp.reset_stats();
  const int n = cp.size();
  test::expect_contains(error_of([&] { parallel::context_parallel_split(2 * n + 1, cp); }),
                        "a sequence of " + std::to_string(2 * n + 1) + " tokens cannot be balanced over the " +
                            std::to_string(n) + " ranks");
  Tensor odd = input64({1, 2, 3, 4}, 11);  // 3 local tokens: not two equal chunks
  test::expect_contains(error_of([&] { parallel::context_parallel_attention(odd, odd, odd, cp); }),
                        "must split into 2 * CP = " + std::to_string(2 * n) + " equal chunks");
  Tensor q = input64({1, 3, 4, 4}, 12), k = input64({1, 2, 4, 4}, 13);
  test::expect_contains(error_of([&] { parallel::context_parallel_attention(q, k, k, cp); }),
                        "3 query heads do not group over 2 kv heads");
  for (const auto& [op, counter] : cp.stats()) EXPECT_EQ(counter.calls, 0u) << dist::op_type_name(op);
}

}  // namespace strata
