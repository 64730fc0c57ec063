// Tensor parallelism's vocabulary steps on the CPU (src/parallel/vocab_parallel_rows.h, which
// runs strata_kernels/common/vocab_parallel_rows.h and vocab_shard_index.h as the CUDA kernels do):
// each step against a plain double reference, shards of one set of logits reduced by hand
// as the group would, and vocab_parallel_cross_entropy on a group of one (finite
// differences in float64). tests/dist covers real groups, tests/gpu the CUDA side.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gradcheck.h"
#include "parallel/vocab_parallel_rows.h"
#include "strata/parallel/tp_layers.h"
#include "strata_kernels/common/vocab_parallel_rows.h"
#include "test_util.h"

namespace strata {
namespace {

using strata::testing::error_of;
using strata::testing::expect_contains;
using strata::testing::expect_error_mentions;

// A group of one: every collective is the identity (no MPI needed).
class SoloGroup final : public dist::ProcessGroup {
 public:
  SoloGroup() : ProcessGroup(0, 1, "solo", {0}) {}

 protected:
  Placement placement() const override { return Placement::Any; }
  dist::WorkPtr do_all_reduce(Tensor&, dist::ReduceOp, const dist::OpDescription&) override { return done(); }
  dist::WorkPtr do_broadcast(Tensor&, int, const dist::OpDescription&) override { return done(); }
  dist::WorkPtr do_all_gather(Tensor& out, const Tensor& in, const dist::OpDescription&) override {
    out.copy_(in);
    return done();
  }
  dist::WorkPtr do_reduce_scatter(Tensor& out, const Tensor& in, dist::ReduceOp, const dist::OpDescription&) override {
    out.copy_(in);
    return done();
  }
  dist::WorkPtr do_all_to_all(Tensor& out, const Tensor& in, const dist::OpDescription&) override {
    out.copy_(in);
    return done();
  }
  dist::WorkPtr do_send(const Tensor&, int, const dist::OpDescription&) override { return done(); }
  dist::WorkPtr do_recv(Tensor&, int, const dist::OpDescription&) override { return done(); }
  dist::WorkPtr do_barrier(const dist::OpDescription&) override { return done(); }
  std::unique_ptr<ProcessGroup> do_split(const dist::SplitPlan&, const dist::OpDescription&) override {
    return nullptr;
  }

 private:
  struct Done final : dist::Work {
    bool is_completed() override { return true; }
    void wait() override {}
    void synchronize(std::chrono::milliseconds) override {}
    void synchronize() override {}
  };
  static dist::WorkPtr done() { return std::make_unique<Done>(); }
};

constexpr int64_t kIgnore = -100;

Tensor logits_of(const Shape& shape, DType dtype, uint64_t seed) {
  return mul(strata::testing::rand64(shape, seed), 3.0).to(dtype);
}

// The full-vocabulary reference in double: loss and d loss / d logits (rows of `vocab`).
struct Reference {
  double loss = 0;
  std::vector<double> grad;  // [M, vocab]
};
Reference reference(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t vocab) {
  const int64_t M = static_cast<int64_t>(t.size());
  Reference r;
  r.grad.assign(static_cast<size_t>(M * vocab), 0.0);
  int64_t counted = 0;
  for (int64_t i = 0; i < M; ++i) counted += t[i] != kIgnore ? 1 : 0;
  for (int64_t i = 0; i < M; ++i) {
    if (t[i] == kIgnore) continue;
    const double* row = x.data() + i * vocab;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < vocab; ++c) m = std::max(m, row[c]);
    for (int64_t c = 0; c < vocab; ++c) s += std::exp(row[c] - m);
    r.loss += (std::log(s) + m - row[t[i]]) / counted;
    for (int64_t c = 0; c < vocab; ++c)
      r.grad[i * vocab + c] = (std::exp(row[c] - m) / s - (c == t[i] ? 1.0 : 0.0)) / counted;
  }
  return r;
}

// Rows whose lengths are not multiples of 32 (and one that is), targets with ignored rows.
struct Case {
  int64_t rows, vocab, ranks;
};
const Case kCases[] = {{5, 37, 1}, {7, 37, 2}, {4, 64, 2}, {6, 101, 3}, {3, 5, 4}, {9, 1000, 4}};

std::vector<int64_t> targets_for(int64_t rows, int64_t vocab) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < rows; ++i) t.push_back(i % 3 == 1 ? kIgnore : (i * 7919 + 3) % vocab);
  return t;
}

// Runs the steps on every shard of x ([rows, vocab], padded to ranks * part columns) and
// reduces between them by hand as the group would: the loss and the gathered gradient.
struct Sharded {
  double loss;
  std::vector<double> grad;  // [rows, ranks * part]
  int64_t part;
};
Sharded run_shards(const Tensor& x, const Tensor& t, int64_t vocab, int64_t ranks) {
  const int64_t rows = x.size(0), part = (vocab + ranks - 1) / ranks;
  Tensor padded = zeros({rows, ranks * part}, {.dtype = x.dtype()});
  padded.narrow(1, 0, vocab).copy_(x);
  // Padding holds large values: a step that read it would show.
  if (ranks * part > vocab) padded.narrow(1, vocab, ranks * part - vocab).fill_(50.0);
  std::vector<Tensor> shard;
  std::vector<int64_t> start, real;
  for (int64_t r = 0; r < ranks; ++r) {
    shard.push_back(padded.narrow(1, r * part, part).contiguous());
    start.push_back(r * part);
    real.push_back(std::max<int64_t>(0, std::min(part, vocab - r * part)));
  }
  const int64_t counted = parallel::vocab_cpu::vocab_parallel_check_targets(t, vocab, kIgnore);
  Tensor max = full({rows}, -INFINITY, {.dtype = DType::Float64});
  for (int64_t r = 0; r < ranks; ++r)
    max = maximum(max, parallel::vocab_cpu::vocab_parallel_row_max(shard[r], real[r]));
  Tensor se = zeros({rows}, {.dtype = DType::Float64}), tl = zeros({rows}, {.dtype = DType::Float64});
  for (int64_t r = 0; r < ranks; ++r) {
    parallel::VocabRowSums s =
        parallel::vocab_cpu::vocab_parallel_row_sums(shard[r], t, real[r], start[r], kIgnore, max);
    se = add(se, s.sum_exp);
    tl = add(tl, s.target_logit);
  }
  Sharded out{
      parallel::vocab_cpu::vocab_parallel_loss(t, vocab, kIgnore, max, se, tl, counted, x.dtype()).item(), {}, part};
  const double scale = 1.0 / static_cast<double>(counted);
  std::vector<Tensor> grads;
  for (int64_t r = 0; r < ranks; ++r)
    grads.push_back(
        parallel::vocab_cpu::vocab_parallel_grad(shard[r], t, real[r], start[r], vocab, kIgnore, max, se, scale));
  out.grad = cat(grads, 1).to_vector<double>();
  return out;
}

// Losses within loss_tol relative; gradients within grad_rel relative plus grad_abs.
void expect_matches_reference(DType dtype, double loss_tol, double grad_rel, double grad_abs) {
  for (const Case& c : kCases) {
    const Tensor x = logits_of({c.rows, c.vocab}, dtype, 11 + static_cast<uint64_t>(c.vocab));
    const std::vector<int64_t> tv = targets_for(c.rows, c.vocab);
    const Tensor t = from_vector(tv, {c.rows});
    const Reference ref = reference(x.to_vector<double>(), tv, c.vocab);
    const Sharded got = run_shards(x, t, c.vocab, c.ranks);
    SCOPED_TRACE(::testing::Message() << "rows " << c.rows << ", vocab " << c.vocab << ", ranks " << c.ranks);
    EXPECT_NEAR(got.loss, ref.loss, loss_tol * std::fabs(ref.loss));
    const int64_t cols = c.ranks * got.part;
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const double g = got.grad[static_cast<size_t>(i * cols + j)];
        if (j >= c.vocab || tv[i] == kIgnore) {
          ASSERT_EQ(g, 0.0) << "row " << i << " column " << j << " (padding or ignored row)";
        } else {
          const double want = ref.grad[static_cast<size_t>(i * c.vocab + j)];
          ASSERT_NEAR(g, want, grad_rel * std::fabs(want) + grad_abs) << "row " << i << " column " << j;
        }
      }
  }
}

TEST(VocabParallelRows, Float64ShardsMatchDoubleReference) {
  expect_matches_reference(DType::Float64, 1e-14, 1e-13, 1e-16);
}

TEST(VocabParallelRows, Float32ShardsMatchDoubleReference) {
  // float32 logits, double statistics: the loss is exact up to its final rounding; the
  // gradient is rounded once to float32 (half an ulp: 2^-24 relative).
  expect_matches_reference(DType::Float32, 1e-7, 1.2e-7, 1e-16);
}

// The sum of exponentials follows row_reduce.h's 32-lane order, the GPU warp's: replayed
// here step by step, it must agree to the bit.
TEST(VocabParallelRows, SumOfExponentialsFollowsTheLaneOrder) {
  for (int64_t n : {1, 31, 32, 33, 70, 129}) {
    const std::vector<double> x = strata::testing::rand64({n}, 5 + static_cast<uint64_t>(n)).to_vector<double>();
    const double m = 0.25;
    double lanes[32] = {};
    for (int64_t j = 0; j < n; ++j) lanes[j % 32] += std::exp(x[static_cast<size_t>(j)] - m);
    for (int s = 16; s > 0; s /= 2)
      for (int l = 0; l < s; ++l) lanes[l] += lanes[l + s];
    EXPECT_EQ(strata_kernels::vp_row_sum_exp<strata_kernels::CpuRow>(x.data(), n, m), lanes[0]) << "n = " << n;
  }
}

TEST(VocabParallelRows, RowStepsOnOneShard) {
  // Row 0 holds its target here (column 2 of the shard), row 1 elsewhere, row 2 is ignored;
  // the shard's last column is padding (real = 3 of 4).
  const Tensor x = from_vector(std::vector<double>{1, 2, 3, 99, -1, 0, 4, 99, 0, 0, 0, 99}, {3, 4});
  const Tensor t = from_vector(std::vector<int64_t>{12, 3, kIgnore}, {3});
  const Tensor max = parallel::vocab_cpu::vocab_parallel_row_max(x, 3);
  EXPECT_EQ(max.to_vector<double>(), (std::vector<double>{3, 4, 0}));
  EXPECT_EQ(parallel::vocab_cpu::vocab_parallel_row_max(x, 0).to_vector<double>()[0],
            -INFINITY);  // a shard of padding only
  const parallel::VocabRowSums s = parallel::vocab_cpu::vocab_parallel_row_sums(x, t, 3, /*start=*/10, kIgnore, max);
  const std::vector<double> se = s.sum_exp.to_vector<double>();
  EXPECT_DOUBLE_EQ(se[0], std::exp(-2.0) + std::exp(-1.0) + 1.0);
  EXPECT_DOUBLE_EQ(se[1], std::exp(-5.0) + std::exp(-4.0) + 1.0);
  EXPECT_EQ(s.target_logit.to_vector<double>(), (std::vector<double>{3, 0, 0}));
  EXPECT_EQ(parallel::vocab_cpu::vocab_parallel_check_targets(t, 13, kIgnore), 2);
}

TEST(VocabParallelRows, BadTargetIsNamed) {
  const Tensor t = from_vector(std::vector<int64_t>{1, kIgnore, 7, -3}, {4});
  expect_error_mentions([&] { (void)parallel::vocab_cpu::vocab_parallel_check_targets(t, 7, kIgnore); },
                        {"vocab_parallel_cross_entropy: target 7 at position 2", "vocabulary of 7"});
  EXPECT_EQ(parallel::vocab_cpu::vocab_parallel_check_targets(t.narrow(0, 0, 2), 7, kIgnore), 1);
}

TEST(VocabParallelRows, ShardIndicesAndOutsideMask) {
  // Vocabulary 10 over parts of 4: rank 1 holds tokens 4..7.
  const Tensor tokens = from_vector(std::vector<int64_t>{0, 4, 7, 8, 5, 9}, {2, 3});
  const parallel::VocabShardIndices r = parallel::vocab_cpu::vocab_shard_indices(tokens, 10, 4, 4);
  EXPECT_EQ(r.local.shape(), tokens.shape());
  EXPECT_EQ(r.outside.shape(), tokens.shape());
  EXPECT_EQ(r.outside.dtype(), DType::Bool);
  EXPECT_EQ(r.local.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 3, 0, 1, 0}));
  EXPECT_EQ(r.outside.to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 0, 1, 0, 1}));
  const Tensor bad = from_vector(std::vector<int64_t>{1, 10}, {2});
  expect_error_mentions([&] { (void)parallel::vocab_cpu::vocab_shard_indices(bad, 10, 0, 4); },
                        {"VocabParallelEmbedding: index 10 at position 1", "vocabulary of 10"});
}

// A group of one with padded logits (8 columns, vocabulary 6): the loss equals
// cross_entropy over the real columns, and the gradient passes finite differences.
TEST(VocabParallelRows, GroupOfOneMatchesCrossEntropyAndFiniteDifferences) {
  SoloGroup solo;
  const Tensor t = from_vector(std::vector<int64_t>{5, kIgnore, 0, 3}, {4});
  Tensor x = strata::testing::leaf64({4, 8}, 21);
  const Tensor loss = parallel::vocab_parallel_cross_entropy(x, t, 0, 6, solo, kIgnore);
  const Tensor expected = cross_entropy(x.detach().narrow(1, 0, 6).contiguous(), t, kIgnore);
  EXPECT_NEAR(loss.item(), expected.item(), 1e-14);
  loss.backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 6; j < 8; ++j) EXPECT_EQ(g[static_cast<size_t>(i * 8 + j)], 0.0) << "padding gets no gradient";
  strata::testing::expect_gradients_match(
      [&](const std::vector<Tensor>& in) {
        return parallel::vocab_parallel_cross_entropy(in[0], t, 0, 6, solo, kIgnore);
      },
      {strata::testing::leaf64({4, 8}, 22)});
  // Every row ignored: loss 0 and gradient 0, as cross_entropy.
  const Tensor none = full({4}, static_cast<double>(kIgnore), {.dtype = DType::Int64});
  Tensor y = strata::testing::leaf64({4, 8}, 23);
  Tensor l0 = parallel::vocab_parallel_cross_entropy(y, none, 0, 6, solo, kIgnore);
  EXPECT_EQ(l0.item(), 0.0);
  l0.backward();
  for (double v : y.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
}

TEST(VocabParallelRows, GroupOfOneEmbeddingMatchesEmbedding) {
  SoloGroup solo;
  parallel::VocabParallelEmbedding emb(6, 3, {}, solo);
  const Tensor idx = from_vector(std::vector<int64_t>{0, 5, 2, 2}, {2, 2});
  const Tensor got = emb.forward(idx);
  const Tensor expected = embedding(idx, emb.weight.detach());
  EXPECT_EQ(got.to_vector<double>(), expected.to_vector<double>());
  expect_error_mentions([&] { (void)emb.forward(from_vector(std::vector<int64_t>{6}, {1})); },
                        {"VocabParallelEmbedding: index 6 at position 0", "vocabulary of 6"});
}

// Device checks run before any kernel: CUDA tensors here wrap a host block nobody reads.
TEST(VocabParallelRows, DevicesAreChecked) {
  SoloGroup solo;
  std::vector<int64_t> backing(16, 0);
  const Tensor gpu_targets = from_blob(backing.data(), {2}, DType::Int64, {}, Device::cuda(0));
  const Tensor logits = zeros({2, 4});
  const std::string mixed =
      error_of([&] { (void)parallel::vocab_parallel_cross_entropy(logits, gpu_targets, 0, 4, solo); });
  expect_contains(mixed, "vocab_parallel_cross_entropy");
  expect_contains(mixed, "cpu");
  expect_contains(mixed, "cuda:0");
  const Tensor gpu_logits = from_blob(backing.data(), {2, 4}, DType::Float32, {}, Device::cuda(0));
  expect_error_mentions([&] { (void)parallel::vocab_parallel_cross_entropy(gpu_logits, gpu_targets, 0, 4, solo); },
                        {"vocab_parallel_cross_entropy", "cuda:0"});
  parallel::VocabParallelEmbedding emb(6, 3, {}, solo);
  expect_error_mentions([&] { (void)emb.forward(gpu_targets); }, {"VocabParallelEmbedding", "cpu", "cuda:0"});
  EXPECT_EQ(backing[0], 0);
}

}  // namespace
}  // namespace strata
