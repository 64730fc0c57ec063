// Version counters: a tensor saved for backward and then written in place makes that
// backward refuse to run (torch's "modified by an inplace operation" error) instead of
// computing a gradient from the new values.
#include <gtest/gtest.h>

#include "strata/autograd/checkpoint.h"
#include "strata/strata.h"
#include "test_util.h"

using namespace strata;
using strata::autograd::AutogradContext;
using strata::testing::error_of;
using strata::testing::expect_contains;
using strata::testing::expect_error_mentions;

namespace {

Tensor vec64(const std::vector<double>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }
Tensor leaf(const std::vector<double>& v) { return vec64(v).set_requires_grad(true); }

// x * c with c saved by the context (c gets no gradient).
struct TimesSaved : autograd::Function<TimesSaved> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& c) {
    ctx->save_for_backward({c});
    return mul(x, c);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {mul(grads[0], ctx->get_saved_variables()[0]), Tensor()};
  }
};

}  // namespace

TEST(SavedVersions, EveryInPlaceWriteCountsOnTheSharedMemory) {
  Tensor b = vec64({3, 4, 5, 6});
  Tensor view = b.narrow(0, 1, 2);
  EXPECT_EQ(b.version(), 0u);
  b.fill_(1.0);
  b.zero_();
  b.copy_(vec64({1, 2, 3, 4}));
  add_(b, vec64({1, 1, 1, 1}));
  mul_(b, 2.0);
  EXPECT_EQ(b.version(), 5u);
  EXPECT_EQ(view.version(), 5u);  // a view sees its base's writes...
  view.fill_(0.0);
  EXPECT_EQ(b.version(), 6u);           // ...and its base sees the view's
  EXPECT_EQ(b.detach().version(), 6u);  // detached handles share the memory too
  EXPECT_EQ(b.clone().version(), 0u);   // a copy is new memory
}

// The repro: y = sum(a * b), b.fill_(10), y.backward() gave a.grad = [10, 10].
TEST(SavedVersions, SavedInputWrittenInPlaceIsRefusedNamingOpShapeAndVersions) {
  Tensor a = leaf({1, 2});
  Tensor b = vec64({3, 4});
  Tensor y = sum(mul(a, b));
  b.fill_(10.0);
  const std::string msg = error_of([&] { y.backward(); });
  for (const char* part : {"modified by an inplace operation", "[float64 [2]]", "is at version 1", "expected version 0",
                           "saved by MulBackward"})
    expect_contains(msg, part);
  EXPECT_FALSE(a.grad().defined());  // nothing was accumulated from the stale graph
}

TEST(SavedVersions, WithoutTheInPlaceWriteTheGradientIsTheSavedValue) {
  Tensor a = leaf({1, 2});
  Tensor b = vec64({3, 4});
  sum(mul(a, b)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 4}));
  b.fill_(10.0);  // after backward: nothing left to refuse
}

TEST(SavedVersions, ViewWrittenAfterItsBaseWasSavedIsRefused) {
  Tensor a = leaf({1, 2, 3});
  Tensor b = vec64({3, 4, 5});
  Tensor y = sum(mul(a, b));
  b.narrow(0, 1, 1).fill_(7.0);
  expect_error_mentions([&] { y.backward(); }, {"saved by MulBackward", "[float64 [3]]", "is at version 1"});

  // The other way round: a saved view, its base written.
  Tensor c = vec64({1, 2, 3, 4});
  Tensor z = sum(mul(a, c.narrow(0, 1, 3)));
  c.select(0, 0).fill_(9.0);  // an element the view does not even cover: same memory
  expect_error_mentions([&] { z.backward(); }, {"saved by MulBackward", "[float64 [3]]", "expected version 0"});
}

TEST(SavedVersions, OutputSavedByItsOpWrittenInPlaceIsRefused) {
  Tensor a = leaf({0.5, 1.0});
  Tensor e = exp(a);  // ExpBackward reads its output
  Tensor y = sum(e);
  {
    NoGradGuard no_grad;  // e requires grad: an in-place write needs the guard
    mul_(e, 2.0);
  }
  expect_error_mentions([&] { y.backward(); }, {"saved by ExpBackward", "[float64 [2]]", "is at version 1"});
}

TEST(SavedVersions, TensorTheBackwardDoesNotReadMayChange) {
  Tensor a = leaf({1, 2});
  Tensor b = vec64({3, 4});
  Tensor y = sum(mul(add(a, b), 3.0));  // AddBackward and MulScalarBackward read no tensor
  add_(b, vec64({1, 1}));
  y.backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 3}));
}

TEST(SavedVersions, OptimizerStepBetweenForwardAndBackwardIsRefused) {
  Tensor w = leaf({1, 2});
  Tensor x = vec64({3, 4});
  optim::SGD opt({w}, {.lr = 0.1});
  sum(mul(w, x)).backward();  // gives w a gradient to step with
  Tensor saves_w = sum(mul(x, w));
  Tensor reads_no_w = sum(add(w, x));
  opt.step();  // writes w in place: the graph that saved w now holds stale values
  expect_error_mentions([&] { saves_w.backward(); }, {"saved by MulBackward", "is at version 1", "expected version 0"});
  reads_no_w.backward();  // AddBackward saved nothing: still fine
}

TEST(SavedVersions, CustomFunctionSavedTensorWrittenInPlaceIsRefused) {
  Tensor x = leaf({1, 2});
  Tensor c = vec64({3, 4});
  Tensor y = sum(TimesSaved::apply(x, c));
  c.copy_(vec64({5, 6}));
  expect_error_mentions([&] { y.backward(); }, {"saved by", "TimesSaved", "[float64 [2]]", "is at version 1"});

  Tensor x2 = leaf({1, 2});
  sum(TimesSaved::apply(x2, c)).backward();  // unchanged since saved: works
  EXPECT_EQ(x2.grad().to_vector<double>(), (std::vector<double>{5, 6}));
}

TEST(SavedVersions, CheckpointedInputWrittenInPlaceIsRefused) {
  Tensor a = leaf({1, 2});
  Tensor b = vec64({3, 4});
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(in[0], in[1])}; };
  Tensor y = sum(autograd::checkpoint(fn, {a, b})[0]);
  b.fill_(0.0);
  expect_error_mentions([&] { y.backward(); }, {"saved by CheckpointBackward", "is at version 1"});
}

TEST(SavedVersions, RetainedGraphIsCheckedAgainOnEachBackward) {
  Tensor a = leaf({1, 2});
  Tensor b = vec64({3, 4});
  Tensor y = sum(mul(a, b));
  y.backward({}, /*retain_graph=*/true);
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 4}));
  b.fill_(1.0);
  expect_error_mentions([&] { y.backward(); }, {"saved by MulBackward", "is at version 1"});
}
