// The embedding gradient's order, which the CUDA backward reproduces: each weight row is the
// sum of its tokens' gradients in token order, from zero, whatever the thread count; and a
// bad index is named with its position (the message the CUDA forward reports too).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "strata/strata.h"
#include "test_util.h"

namespace {

using strata::DType;
using strata::Tensor;

TEST(EmbeddingOrder, RowsSumTheirTokensInTokenOrder) {
  const int64_t n = 3000, vocab = 5, dim = 70;
  strata::Generator gen(3);
  const Tensor idx = strata::randint(0, vocab, {n}, {.dtype = DType::Int64}, &gen);
  Tensor g = strata::randn({n, dim}, {}, &gen);
  g = strata::mul(g, strata::exp(strata::mul(strata::randn({n, dim}, {}, &gen), 6.0)));
  const std::vector<int64_t> iv = idx.to_vector<int64_t>();
  const std::vector<float> gv = g.to_vector<float>();
  std::vector<float> want(static_cast<size_t>(vocab * dim), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < dim; ++c)
      want[static_cast<size_t>(iv[i] * dim + c)] += gv[static_cast<size_t>(i * dim + c)];
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Tensor w = strata::randn({vocab, dim}, {}, &gen);
    w.set_requires_grad(true);
    strata::sum(strata::mul(strata::embedding(idx, w), g)).backward();
    const std::vector<float> got = w.grad().to_vector<float>();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

TEST(EmbeddingOrder, BadIndexNamesItsPosition) {
  const Tensor w = strata::zeros({10, 4});
  const Tensor idx = strata::from_vector(std::vector<int32_t>{1, 2, 10, -1}, {2, 2});
  strata::testing::expect_error_mentions([&] { (void)strata::embedding(idx, w); },
                                         {"embedding: index 10 at position [1, 0]", "10 rows", "[10, 4]"});
}

}  // namespace
