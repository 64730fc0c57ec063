// Tensor-parallel building blocks over the whole world as the TP group (2 or 4 ranks): the
// mappings' forward and backward, column/row-parallel linears, the vocabulary-parallel
// embedding and loss, and the single-process <-> sharded state dicts, each against the
// single-process computation in float64.
#include <cmath>
#include <sstream>

#include "distributed/dist_test_util.h"
#include "strata/strata.h"

namespace strata {
namespace {

using parallel::ColumnParallelLinear;
using parallel::RowParallelLinear;
using test::error_of;

Tensor input64(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, {.dtype = DType::Float64}, &g);
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  EXPECT_LE(worst, tol * std::max(scale, 1.0)) << what;
}

uint64_t calls(const dist::CommStats& s, dist::OpType op) {
  auto it = s.find(op);
  return it == s.end() ? 0 : it->second.calls;
}

uint64_t total_calls(const dist::CommStats& s) {
  uint64_t n = 0;
  for (const auto& [op, c] : s) n += c.calls;
  return n;
}

nn::InitOptions init64(Generator& g) { return {.std = 0.5, .dtype = DType::Float64, .gen = &g}; }

}  // namespace

TEST(TensorParallel, MappingsAndTheirTransposes) {
  auto& tp = dist::world();
  const int n = tp.size(), r = tp.rank();
  // copy_to: identity forward, all-reduce backward.
  Tensor x = full({2, 4}, 1.0, {.dtype = DType::Float64}).set_requires_grad(true);
  Tensor y = parallel::copy_to_tp_region(x, tp);
  sum(mul(y, static_cast<double>(r + 1))).backward();
  for (double g : x.grad().to_vector<double>()) EXPECT_EQ(g, n * (n + 1) / 2.0);
  // reduce_from: all-reduce forward, identity backward.
  Tensor a = full({3}, static_cast<double>(r), {.dtype = DType::Float64}).set_requires_grad(true);
  Tensor b = parallel::reduce_from_tp_region(a, tp);
  for (double v : b.to_vector<double>()) EXPECT_EQ(v, n * (n - 1) / 2.0);
  sum(b).backward();
  for (double g : a.grad().to_vector<double>()) EXPECT_EQ(g, 1.0);
  // scatter along dim 1 then gather back is the identity, in both directions.
  Tensor full_x = input64({2, 4 * n, 3}, 7).set_requires_grad(true);
  Tensor part = parallel::scatter_to_tp_region(full_x, 1, tp);
  EXPECT_EQ(part.shape(), Shape({2, 4, 3}));
  expect_close(part, full_x.narrow(1, 4 * r, 4).contiguous(), 0, "scatter");
  Tensor back = parallel::gather_from_tp_region(part, 1, tp);
  expect_close(back, full_x, 0, "gather");
  Tensor w = input64({2, 4 * n, 3}, 8);  // the same on every rank
  sum(mul(back, w)).backward();
  expect_close(full_x.grad(), w, 0, "scatter/gather backward");
  // Sequence parallel: all-gather forward, reduce-scatter backward.
  Tensor s = input64({2, 3, 5}, 9 + r).set_requires_grad(true);
  Tensor gathered = parallel::gather_from_sequence_region(s, 1, tp);
  EXPECT_EQ(gathered.shape(), Shape({2, 3 * n, 5}));
  expect_close(gathered.narrow(1, 3 * r, 3).contiguous(), s, 0, "sequence gather keeps my piece");
  sum(mul(gathered, static_cast<double>(r + 1))).backward();
  for (double g : s.grad().to_vector<double>()) EXPECT_EQ(g, n * (n + 1) / 2.0);
  // Uneven splits are refused with the sizes and the group.
  Tensor odd = zeros({2, 3 * n + 1});
  const std::string msg = error_of([&] { parallel::scatter_to_tp_region(odd, 1, tp); });
  EXPECT_NE(msg.find("does not divide"), std::string::npos) << msg;
  EXPECT_NE(msg.find(tp.name()), std::string::npos) << msg;
}

// An MLP as Megatron splits it: column then row, one all-reduce forward and one backward.
TEST(TensorParallel, ColumnThenRowEqualsTheSingleProcessMlp) {
  auto& tp = dist::world();
  const int n = tp.size();
  const int64_t C = 6, H = 4 * n;
  Generator g1(3), g2(3);
  nn::Linear fc(C, H, true, init64(g1)), proj(H, C, true, init64(g1));
  ColumnParallelLinear tfc(C, H, true, init64(g2), tp);
  RowParallelLinear tproj(H, C, true, init64(g2), tp);
  EXPECT_EQ(tfc.weight.shape(), Shape({H / n, C}));
  EXPECT_EQ(tproj.weight.shape(), Shape({C, H / n}));
  EXPECT_EQ(tproj.bias.shape(), Shape({C}));  // replicated, added once

  Tensor x = input64({2, 3, C}, 11).set_requires_grad(true);
  Tensor xt = x.detach().clone().set_requires_grad(true);
  Tensor y = proj.forward(tanh(fc.forward(x)));
  tp.reset_stats();
  Tensor yt = tproj.forward(tanh(tfc.forward(xt)));
  EXPECT_EQ(calls(tp.stats(), dist::OpType::AllReduce), 1u);
  expect_close(yt, y, 1e-13, "output");
  Tensor w = input64({2, 3, C}, 12);
  sum(mul(y, w)).backward();
  tp.reset_stats();
  sum(mul(yt, w)).backward();
  EXPECT_EQ(calls(tp.stats(), dist::OpType::AllReduce), 1u);  // the input gradient
  EXPECT_EQ(total_calls(tp.stats()), 1u);
  expect_close(xt.grad(), x.grad(), 1e-13, "input gradient");
  // Each rank's weight gradient is its part of the full one.
  expect_close(tfc.weight.grad(), parallel::shard_of(fc.weight.grad(), {.dim = 0, .full_size = H}, tp.rank(), n), 1e-13,
               "fc weight grad");
  expect_close(tfc.bias.grad(), parallel::shard_of(fc.bias.grad(), {.dim = 0, .full_size = H}, tp.rank(), n), 1e-13,
               "fc bias grad");
  expect_close(tproj.weight.grad(), parallel::shard_of(proj.weight.grad(), {.dim = 1, .full_size = H}, tp.rank(), n),
               1e-13, "proj weight grad");
  expect_close(tproj.bias.grad(), proj.bias.grad(), 1e-13, "proj bias grad");
}

TEST(TensorParallel, SequenceParallelMlpTradesAllReduceForGatherAndScatter) {
  auto& tp = dist::world();
  const int n = tp.size(), r = tp.rank();
  const int64_t C = 4, H = 2 * n, T = 2 * n;
  Generator g1(5), g2(5);
  nn::Linear fc(C, H, true, init64(g1)), proj(H, C, true, init64(g1));
  ColumnParallelLinear tfc(C, H, true, init64(g2), tp, {.sequence_parallel = true});
  RowParallelLinear tproj(H, C, true, init64(g2), tp, {.sequence_parallel = true});
  Tensor x = input64({3, T, C}, 13).set_requires_grad(true);
  Tensor x_part = x.detach().narrow(1, 2 * r, 2).contiguous().set_requires_grad(true);  // my sequence piece
  Tensor y = proj.forward(tanh(fc.forward(x)));
  tp.reset_stats();
  Tensor y_part = tproj.forward(tanh(tfc.forward(x_part)));
  EXPECT_EQ(calls(tp.stats(), dist::OpType::AllGather), 1u);
  EXPECT_EQ(calls(tp.stats(), dist::OpType::ReduceScatter), 1u);
  EXPECT_EQ(total_calls(tp.stats()), 2u);
  expect_close(y_part, y.narrow(1, 2 * r, 2).contiguous(), 1e-13, "my sequence piece of the output");
  Tensor w = input64({3, T, C}, 14);
  sum(mul(y, w)).backward();
  tp.reset_stats();
  sum(mul(y_part, w.narrow(1, 2 * r, 2))).backward();
  EXPECT_EQ(calls(tp.stats(), dist::OpType::AllGather), 1u);
  EXPECT_EQ(calls(tp.stats(), dist::OpType::ReduceScatter), 1u);
  expect_close(x_part.grad(), x.grad().narrow(1, 2 * r, 2).contiguous(), 1e-13, "input gradient piece");
  // The row bias sees only this rank's tokens: the sum over ranks is the full gradient.
  Tensor bias_grad = parallel::all_reduce_copy(tproj.bias.grad(), tp);
  expect_close(bias_grad, proj.bias.grad(), 1e-13, "bias gradient summed over the sequence pieces");
}

TEST(TensorParallel, FusedQkvColumnSplitsEachSection) {
  auto& tp = dist::world();
  const int n = tp.size();
  const int64_t C = 2 * n;
  Generator g1(9), g2(9);
  nn::Linear full(C, 3 * C, true, init64(g1));
  ColumnParallelLinear part(C, 3 * C, true, init64(g2), tp, {.sections = 3});
  // Rank r holds rows [r C/n, (r+1) C/n) of q, of k and of v.
  const int64_t p = C / n, r = tp.rank();
  for (int64_t s = 0; s < 3; ++s)
    expect_close(part.weight.narrow(0, s * p, p).contiguous(), full.weight.narrow(0, s * C + r * p, p).contiguous(), 0,
                 "section " + std::to_string(s));
  StateDict gathered = parallel::full_state_dict(part, tp);
  expect_close(gathered.at("weight"), full.weight, 0, "gathered weight");
  expect_close(gathered.at("bias"), full.bias, 0, "gathered bias");
}

TEST(TensorParallel, VocabParallelEmbeddingAndLossEqualTheFullOnes) {
  auto& tp = dist::world();
  const int n = tp.size();
  const int64_t V = 4 * n + 3, C = 5, M = 7;  // V does not divide: the last part is padded
  Generator g1(21), g2(21);
  nn::Embedding emb(V, C, init64(g1));
  nn::Linear head(C, V, false, init64(g1));
  parallel::VocabParallelEmbedding temb(V, C, init64(g2), tp);
  ColumnParallelLinear thead(C, V, false, init64(g2), tp, {.pad = true});
  const int64_t part = (V + n - 1) / n;
  EXPECT_EQ(temb.weight.size(0), part);
  EXPECT_EQ(thead.weight.size(0), part);
  std::vector<int64_t> ids = {0, V - 1, 3, part, part - 1, 2 * part % V, 1};
  std::vector<int64_t> targets = {V - 1, 0, -100, part, 2, V - 2, part - 1};
  Tensor tokens = from_vector(ids, {1, M}), tgt = from_vector(targets, {M});

  Tensor h = emb.forward(tokens);
  Tensor loss = cross_entropy(head.forward(h).view({M, V}), tgt);
  tp.reset_stats();
  Tensor ht = temb.forward(tokens);
  expect_close(ht, h, 1e-14, "embedding");
  Tensor logits = thead.forward(ht).view({M, part});
  Tensor tloss = parallel::vocab_parallel_cross_entropy(logits, tgt, temb.vocab_start(), V, tp);
  // Embedding: one all-reduce; loss: max, sum of exponentials, target logit.
  EXPECT_EQ(calls(tp.stats(), dist::OpType::AllReduce), 4u);
  EXPECT_EQ(total_calls(tp.stats()), 4u);
  EXPECT_NEAR(tloss.item(), loss.item(), 1e-13);
  loss.backward();
  tloss.backward();
  const parallel::ShardLayout vocab{.dim = 0, .full_size = V, .pad = true};
  expect_close(parallel::unshard(temb.weight.grad(), vocab, tp), emb.weight.grad(), 1e-13, "embedding grad");
  expect_close(parallel::unshard(thead.weight.grad(), vocab, tp), head.weight.grad(), 1e-13, "head grad");
  // Padding rows exist only on the last rank, stay zero and get no gradient.
  if (tp.rank() == n - 1) {
    const int64_t real = V - part * (n - 1);
    for (double v : thead.weight.grad().narrow(0, real, part - real).contiguous().to_vector<double>()) EXPECT_EQ(v, 0);
    for (double v : thead.weight.narrow(0, real, part - real).contiguous().to_vector<double>()) EXPECT_EQ(v, 0);
  }
  // A bad target names itself and the vocabulary.
  Tensor bad = from_vector(std::vector<int64_t>{V}, {1});
  const std::string msg =
      error_of([&] { parallel::vocab_parallel_cross_entropy(logits.narrow(0, 0, 1), bad, temb.vocab_start(), V, tp); });
  EXPECT_NE(msg.find("target " + std::to_string(V)), std::string::npos) << msg;
}

// A NaN or inf in the row a rank looks up for tokens it does not hold (its local row 0) stays
// out of those tokens: they are replaced by 0 (masked_fill), not multiplied by 0. Each token
// gets exactly the full embedding's row, and the gradient reaches only the rows looked up.
TEST(TensorParallel, VocabParallelEmbeddingKeepsOtherRanksNanOutOfTokens) {
  auto& tp = dist::world();
  const int n = tp.size();
  const int64_t V = 4 * n + 3, C = 5;
  Generator g1(23), g2(23);
  nn::Embedding emb(V, C, init64(g1));
  parallel::VocabParallelEmbedding temb(V, C, init64(g2), tp);
  const int64_t part = temb.weight.size(0);
  {
    NoGradGuard no_grad;
    temb.weight.narrow(0, 0, 1).fill_(tp.rank() % 2 == 0 ? std::nan("") : INFINITY);
    for (int r = 0; r < n; ++r) emb.weight.narrow(0, r * part, 1).fill_(r % 2 == 0 ? std::nan("") : INFINITY);
  }
  std::vector<int64_t> ids;  // every token but the rows holding NaN or inf
  for (int64_t t = 0; t < V; ++t)
    if (t % part != 0) ids.push_back(t);
  const int64_t M = static_cast<int64_t>(ids.size());
  Tensor tokens = from_vector(ids, {1, M});
  Tensor h = emb.forward(tokens), ht = temb.forward(tokens);
  for (double v : ht.to_vector<double>()) ASSERT_TRUE(std::isfinite(v));
  expect_close(ht, h, 0, "embedding");
  const Tensor g = full({1, M, C}, 1.0, {.dtype = DType::Float64});
  h.backward(g);
  ht.backward(g);
  for (double v : temb.weight.grad().narrow(0, 0, 1).to_vector<double>()) EXPECT_EQ(v, 0);
  const parallel::ShardLayout vocab{.dim = 0, .full_size = V, .pad = true};
  expect_close(parallel::unshard(temb.weight.grad(), vocab, tp), emb.weight.grad(), 0, "embedding grad");
}

TEST(TensorParallel, FullStateDictsLoadBySlicingAndComeBackByGathering) {
  auto& tp = dist::world();
  const int n = tp.size();
  const int64_t C = 3, H = 2 * n;
  struct Mlp : nn::Module {
    Mlp(dist::ProcessGroup& g, uint64_t seed, int64_t C, int64_t H) {
      Generator gen(seed);
      fc = register_module("fc", std::make_shared<ColumnParallelLinear>(C, H, true, init64(gen), g));
      proj = register_module("proj", std::make_shared<RowParallelLinear>(H, C, true, init64(gen), g));
      norm = register_module("norm", std::make_shared<nn::LayerNorm>(C, 1e-5, DType::Float64));
    }
    std::shared_ptr<ColumnParallelLinear> fc;
    std::shared_ptr<RowParallelLinear> proj;
    std::shared_ptr<nn::LayerNorm> norm;
  };
  Mlp a(tp, 1, C, H), b(tp, 2, C, H);
  StateDict full = parallel::full_state_dict(a, tp);
  EXPECT_EQ(full.at("fc.weight").shape(), Shape({H, C}));
  EXPECT_EQ(full.at("proj.weight").shape(), Shape({C, H}));
  parallel::load_full_state_dict(b, full, tp);
  expect_close(b.fc->weight, a.fc->weight, 0, "fc part");
  expect_close(b.proj->weight, a.proj->weight, 0, "proj part");
  // Wrong single-process shapes name the parameter, the shape and the degree.
  full["proj.weight"] = zeros({C, H + 1}, {.dtype = DType::Float64});
  const std::string msg = error_of([&] { parallel::load_full_state_dict(b, full, tp); });
  EXPECT_NE(msg.find("proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("degree " + std::to_string(n)), std::string::npos) << msg;
  std::ostringstream shape;
  shape << Shape({C, H + 1});
  EXPECT_NE(msg.find(shape.str()), std::string::npos) << msg;
}

}  // namespace strata
