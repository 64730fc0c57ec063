// The multi-tensor optimizer steps (src/optim/multi_tensor.h): the chunk table, and the CPU
// executor running strata_kernels/common/fused_adam.h and fused_sgd.h, checked bit for bit against
// adam_update / sgd_update applied element by element. tests/gpu/test_multi_tensor_optim_gpu.cpp
// runs the same tables on a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "optim/multi_tensor.h"
#include "strata/strata.h"
#include "strata_kernels/common/adam.h"
#include "strata_kernels/common/fused_adam.h"
#include "strata_kernels/common/sgd.h"
#include "test_util.h"

using namespace strata;
using optim::multi_tensor::AdamHyper;
using optim::multi_tensor::AdamTensorArgs;
using optim::multi_tensor::SgdHyper;
using optim::multi_tensor::SgdTensorArgs;
using strata_kernels::TensorChunk;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Per-element reference: adam_update over one tensor, outside any executor.
template <class T>
void reference_update(const AdamTensorArgs& a, const AdamHyper& h) {
  const auto s =
      strata_kernels::adam_scalars<T>(a.lr, h.beta1, h.beta2, h.eps, a.weight_decay, h.decoupled_weight_decay, a.step);
  T* p = a.param.data<T>();
  T* m = a.exp_avg.data<T>();
  T* v = a.exp_avg_sq.data<T>();
  const T* g = a.grad.data<T>();
  for (int64_t i = 0; i < a.param.numel(); ++i) strata_kernels::adam_update(p[i], m[i], v[i], g[i], s);
}

struct Case {
  std::vector<AdamTensorArgs> args;
};

// Tensors of `sizes` elements with random parameters, gradients and moments (the second
// moment non-negative), alternating two groups' lr/decay and distinct step counts.
Case make_case(const std::vector<int64_t>& sizes, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Case c;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Shape shape{sizes[i]};
    AdamTensorArgs a;
    a.param = randn(shape, {.dtype = dtype}, &gen);
    a.grad = randn(shape, {.dtype = dtype}, &gen);
    a.exp_avg = mul(randn(shape, {.dtype = dtype}, &gen), 0.1);
    a.exp_avg_sq = mul(abs(randn(shape, {.dtype = dtype}, &gen)), 0.01);
    a.lr = i % 2 == 0 ? 1e-3 : 3e-2;
    a.weight_decay = i % 2 == 0 ? 0.1 : 0.0;
    a.step = 1 + static_cast<int64_t>(i % 5);
    c.args.push_back(a);
  }
  return c;
}

Case clone_case(const Case& c) {
  Case out;
  for (const AdamTensorArgs& a : c.args) {
    AdamTensorArgs b = a;
    b.param = a.param.clone();
    b.grad = a.grad.clone();
    b.exp_avg = a.exp_avg.clone();
    b.exp_avg_sq = a.exp_avg_sq.clone();
    if (a.low_copy.defined()) b.low_copy = a.low_copy.clone();
    out.args.push_back(b);
  }
  return out;
}

}  // namespace

TEST(FusedAdam, ChunkTableCoversEveryElementOnceInOrder) {
  const std::vector<int64_t> sizes{3, 0, 10, 4};
  const std::vector<TensorChunk> chunks = optim::multi_tensor::plan_chunks(sizes, 4);
  const std::vector<std::vector<int64_t>> expected{{0, 0, 3}, {2, 0, 4}, {2, 4, 8}, {2, 8, 10}, {3, 0, 4}};
  ASSERT_EQ(chunks.size(), expected.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].tensor, expected[i][0]) << i;
    EXPECT_EQ(chunks[i].begin, expected[i][1]) << i;
    EXPECT_EQ(chunks[i].end, expected[i][2]) << i;
  }
  EXPECT_TRUE(optim::multi_tensor::plan_chunks(std::vector<int64_t>{}, 4).empty());
  strata::testing::expect_error_mentions([&] { optim::multi_tensor::plan_chunks(sizes, 0); }, {"chunk_elements 0"});
}

TEST(FusedAdam, CpuExecutorEqualsTheElementwiseUpdateBitForBit) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Case original = make_case({1, 6, 999, 1000, 1001, 70000, 131072 + 5}, dtype, 11);
    for (bool decoupled : {false, true}) {
      for (int64_t chunk : {int64_t{7}, int64_t{1000}, strata_kernels::kDefaultChunkElements}) {
        const Case fused = clone_case(original);
        const Case ref = clone_case(original);
        const AdamHyper h{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .decoupled_weight_decay = decoupled};
        optim::multi_tensor::fused_adam_step(fused.args, h, chunk);
        for (const AdamTensorArgs& a : ref.args) {
          if (dtype == DType::Float32) {
            reference_update<float>(a, h);
          } else {
            reference_update<double>(a, h);
          }
        }
        for (size_t i = 0; i < ref.args.size(); ++i) {
          SCOPED_TRACE(::testing::Message()
                       << dtype << " decoupled " << decoupled << " chunk " << chunk << " tensor " << i);
          EXPECT_TRUE(same_bytes(fused.args[i].param, ref.args[i].param));
          EXPECT_TRUE(same_bytes(fused.args[i].exp_avg, ref.args[i].exp_avg));
          EXPECT_TRUE(same_bytes(fused.args[i].exp_avg_sq, ref.args[i].exp_avg_sq));
          EXPECT_FALSE(same_bytes(fused.args[i].param, original.args[i].param));  // it did move
        }
      }
    }
  }
}

TEST(FusedAdam, WritesTheRoundedSixteenBitCopyInTheSamePass) {
  for (DType low : {DType::BFloat16, DType::Float16}) {
    Case c = make_case({5, 70001}, DType::Float32, 3);
    for (AdamTensorArgs& a : c.args) a.low_copy = full(a.param.shape(), 7.0, {.dtype = low});
    optim::multi_tensor::fused_adam_step(c.args, {.decoupled_weight_decay = true});
    for (const AdamTensorArgs& a : c.args) EXPECT_TRUE(same_bytes(a.low_copy, a.param.to(low))) << low;
  }
}

TEST(FusedAdam, BadArgumentsNameTheTensorAndChangeNothing) {
  Case c = make_case({4, 6}, DType::Float32, 5);
  const Tensor before = c.args[0].param.clone();
  c.args[1].grad = zeros({5});
  strata::testing::expect_error_mentions([&] { optim::multi_tensor::fused_adam_step(c.args, {}); },
                                         {"parameter 1", "gradient", "[5]", "[6]"});
  EXPECT_TRUE(same_bytes(c.args[0].param, before));  // checked before any update

  Case d = make_case({4}, DType::Float32, 5);
  d.args[0].low_copy = zeros({4}, {.dtype = DType::Float32});
  strata::testing::expect_error_mentions([&] { optim::multi_tensor::fused_adam_step(d.args, {}); },
                                         {"low_copy is float32"});
  Case e = make_case({4}, DType::Float32, 5);
  e.args[0].step = 0;
  strata::testing::expect_error_mentions([&] { optim::multi_tensor::fused_adam_step(e.args, {}); }, {"step count 0"});
  Case f = make_case({4}, DType::Float32, 5);
  f.args[0].param = f.args[0].param.to(DType::BFloat16);
  strata::testing::expect_error_mentions([&] { optim::multi_tensor::fused_adam_step(f.args, {}); },
                                         {"parameter 0 is bfloat16"});
}

// Adam.step runs through the multi-tensor pass: a parameter that had no gradient on some
// steps keeps its own step count (its bias correction), as torch.optim.Adam does.
TEST(FusedAdam, AdamStepKeepsPerParameterStepCounts) {
  Generator gen(9);
  Tensor a = randn({300}, {}, &gen), b = randn({7}, {}, &gen);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  optim::AdamW opt({a, b}, {.lr = 0.01});
  Tensor ref_a = a.detach().clone(), ref_b = b.detach().clone();
  Tensor ma = zeros({300}), va = zeros({300}), mb = zeros({7}), vb = zeros({7});
  int64_t steps_b = 0;
  for (int step = 1; step <= 4; ++step) {
    const Tensor ga = randn({300}, {}, &gen), gb = randn({7}, {}, &gen);
    a.set_grad(ga);
    b.set_grad(step % 2 == 0 ? gb : Tensor());
    opt.step();
    const AdamHyper h{.decoupled_weight_decay = true};
    reference_update<float>(
        {.param = ref_a, .exp_avg = ma, .exp_avg_sq = va, .grad = ga, .lr = 0.01, .weight_decay = 0.01, .step = step},
        h);
    if (step % 2 == 0)
      reference_update<float>({.param = ref_b,
                               .exp_avg = mb,
                               .exp_avg_sq = vb,
                               .grad = gb,
                               .lr = 0.01,
                               .weight_decay = 0.01,
                               .step = ++steps_b},
                              h);
  }
  EXPECT_TRUE(same_bytes(a.detach(), ref_a));
  EXPECT_TRUE(same_bytes(b.detach(), ref_b));
  EXPECT_EQ(opt.state_dict().at("state.1.step").item(), 2.0);
}

TEST(FusedSgd, CpuExecutorEqualsTheElementwiseUpdateBitForBit) {
  const std::vector<int64_t> sizes{1, 999, 70001};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const SgdHyper h :
         {SgdHyper{}, SgdHyper{.momentum = 0.9, .dampening = 0.1}, SgdHyper{.momentum = 0.9, .nesterov = true}}) {
      for (bool first_step : {true, false}) {
        Generator gen(17);
        std::vector<SgdTensorArgs> fused, ref;
        for (size_t i = 0; i < sizes.size(); ++i) {
          SgdTensorArgs a;
          a.param = randn({sizes[i]}, {.dtype = dtype}, &gen);
          a.grad = randn({sizes[i]}, {.dtype = dtype}, &gen);
          a.momentum_buffer =
              first_step ? zeros({sizes[i]}, {.dtype = dtype}) : randn({sizes[i]}, {.dtype = dtype}, &gen);
          a.lr = i % 2 == 0 ? 0.1 : 0.01;
          a.weight_decay = i % 2 == 0 ? 0.0 : 1e-2;
          a.init_buffer = first_step && h.momentum != 0;
          if (dtype == DType::Float32) a.low_copy = zeros({sizes[i]}, {.dtype = DType::BFloat16});
          SgdTensorArgs b = a;
          b.param = a.param.clone();
          b.momentum_buffer = a.momentum_buffer.clone();
          fused.push_back(a);
          ref.push_back(b);
        }
        optim::multi_tensor::fused_sgd_step(fused, h, 1000);
        for (const SgdTensorArgs& b : ref) {
          auto one = [&]<class T>() {
            const strata_kernels::SgdScalars<T> s{.neg_lr = static_cast<T>(-b.lr),
                                                  .weight_decay = static_cast<T>(b.weight_decay),
                                                  .momentum = static_cast<T>(h.momentum),
                                                  .one_minus_dampening = static_cast<T>(1.0 - h.dampening),
                                                  .nesterov = h.nesterov,
                                                  .init_buffer = b.init_buffer};
            T* p = b.param.data<T>();
            T* buf = b.momentum_buffer.data<T>();
            const T* g = b.grad.data<T>();
            for (int64_t i = 0; i < b.param.numel(); ++i) {
              if (h.momentum != 0) {
                strata_kernels::sgd_momentum_update(p[i], buf[i], g[i], s);
              } else {
                strata_kernels::sgd_update(p[i], g[i], s);
              }
            }
          };
          if (dtype == DType::Float32) {
            one.template operator()<float>();
          } else {
            one.template operator()<double>();
          }
        }
        for (size_t i = 0; i < sizes.size(); ++i) {
          SCOPED_TRACE(::testing::Message() << dtype << " momentum " << h.momentum << " nesterov " << h.nesterov
                                            << " first step " << first_step << " tensor " << i);
          EXPECT_TRUE(same_bytes(fused[i].param, ref[i].param));
          EXPECT_TRUE(same_bytes(fused[i].momentum_buffer, ref[i].momentum_buffer));
          if (fused[i].low_copy.defined()) {
            EXPECT_TRUE(same_bytes(fused[i].low_copy, ref[i].param.to(DType::BFloat16)));
          }
        }
      }
    }
  }
}

TEST(FusedSgd, MomentumNeedsABufferAndARefusedStepChangesNothing) {
  const SgdTensorArgs good{
      .param = ones({3}), .grad = ones({3}), .momentum_buffer = zeros({3}), .lr = 0.1, .init_buffer = true};
  const SgdTensorArgs bad{.param = ones({2}), .grad = ones({2}), .lr = 0.1};
  strata::testing::expect_error_mentions(
      [&] {
        optim::multi_tensor::fused_sgd_step(std::vector{good, bad}, {.momentum = 0.9});
      },
      {"SGD step: parameter 1", "momentum buffer is not given"});
  EXPECT_EQ(good.param.to_vector<float>(), std::vector<float>({1, 1, 1}));  // checked before any update
  EXPECT_EQ(good.momentum_buffer.to_vector<float>(), std::vector<float>({0, 0, 0}));
}

// The CUDA executor's 4-wide path (load4 / apply / store4), run here on the CPU: the same
// bits as the one-element operator() the CPU executor runs.
TEST(FusedAdam, FourWidePathEqualsTheOneElementPath) {
  Case one = make_case({4096}, DType::Float32, 13);
  one.args[0].low_copy = zeros({4096}, {.dtype = DType::BFloat16});
  one.args[0].step = 3;
  const Case four = clone_case(one);
  const AdamHyper h{.decoupled_weight_decay = true};
  const auto entry = [&](const AdamTensorArgs& a) {
    return strata_kernels::AdamTensor<float>{
        .param = a.param.data<float>(),
        .exp_avg = a.exp_avg.data<float>(),
        .exp_avg_sq = a.exp_avg_sq.data<float>(),
        .grad = a.grad.data<float>(),
        .low_copy = static_cast<uint16_t*>(a.low_copy.data_ptr()),
        .low_kind = strata_kernels::LowPrecision::BFloat16,
        .scalars = strata_kernels::adam_scalars<float>(a.lr, h.beta1, h.beta2, h.eps, a.weight_decay, true, a.step)};
  };
  const strata_kernels::FusedAdamOp<float> op;
  const auto t1 = entry(one.args[0]), t4 = entry(four.args[0]);
  ASSERT_TRUE(op.vec4_ok(t4));  // fresh tensors are aligned
  for (int64_t i = 0; i < 4096; ++i) op(t1, i);
  for (int64_t i = 0; i < 4096; i += 4) {
    strata_kernels::FusedAdamOp<float>::Values x[4];
    op.load4(t4, i, x);
    for (auto& v : x) op.apply(t4, v);
    op.store4(t4, i, x);
  }
  EXPECT_TRUE(same_bytes(one.args[0].param, four.args[0].param));
  EXPECT_TRUE(same_bytes(one.args[0].exp_avg, four.args[0].exp_avg));
  EXPECT_TRUE(same_bytes(one.args[0].exp_avg_sq, four.args[0].exp_avg_sq));
  EXPECT_TRUE(same_bytes(one.args[0].low_copy, four.args[0].low_copy));
  EXPECT_FALSE(op.vec4_ok({.param = t4.param + 1,
                           .exp_avg = t4.exp_avg,
                           .exp_avg_sq = t4.exp_avg_sq,
                           .grad = t4.grad,
                           .low_copy = nullptr,
                           .low_kind = {},
                           .scalars = t4.scalars}));
}
