// A program built against an installed strata as a user builds one, with
// -Wall -Wextra -Wshadow -Werror (tests/consumer/CMakeLists.txt), including only the umbrella
// header. Part 1 checks a gradient by hand; part 2 trains a tiny GPT with ZeRO stage 2 in a
// world of one process, with every option struct written as designated initializers.
#include <cstdio>

#include <strata/strata.h>

namespace {

using namespace strata;

bool gradient_matches_by_hand() {
  // A trainable 2x3 matrix and a constant 3x2 matrix; loss = sum(tanh(a @ b)).
  Tensor a = randn({2, 3}, {.requires_grad = true});
  Tensor b = from_vector<float>({0.5f, -0.2f, 0.1f, 0.4f, -0.3f, 0.6f}, {3, 2});
  Tensor y = tanh(matmul(a, b));
  Tensor loss = sum(y);
  loss.backward();

  // By hand: d loss / d a = (1 - y^2) @ b^T.
  Tensor dy = ones_like(y) - y.detach() * y.detach();
  Tensor expected = matmul(dy, b.transpose(0, 1));
  if (!allclose(a.grad(), expected, 1e-5, 1e-6)) {
    std::printf("gradient mismatch:\n%s\nexpected:\n%s\n", a.grad().to_string().c_str(), expected.to_string().c_str());
    return false;
  }
  std::printf("loss %.4f; gradient matches (1 - y^2) @ b^T\n", loss.item());
  return true;
}

bool zero_training_lowers_the_loss() {
  dist::ProcessGroup& world = dist::init();
  data::SyntheticTask task({.digits = 2, .seed = 3});
  nn::GPT model(
      {.vocab_size = task.vocab_size(), .context = task.sequence_length(), .n_layer = 1, .n_head = 2, .n_embd = 32});
  parallel::ZeroOptimizer zero(model, optim::AdamWOptions{.lr = 3e-3}, world,
                               parallel::ZeroOptions{.stage = 2, .bucket_cap_bytes = 1 << 16});
  data::BatchSampler sampler(
      {.dataset_size = 1 << 20, .batch_size = 16, .seed = 5, .rank = world.rank(), .world_size = world.size()});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    data::Batch batch = task.make_batch(sampler.next());
    Tensor loss = model.loss(batch.inputs, batch.targets);
    loss.backward();
    zero.clip_grad_norm(1.0);
    zero.step();
    zero.zero_grad();
    (step == 0 ? first : last) = loss.item();
  }
  std::printf("ZeRO-2 on %d rank(s): loss %.3f -> %.3f\n", world.size(), first, last);
  dist::finalize();
  return last < 0.8 * first;
}

}  // namespace

int main() {
  if (!gradient_matches_by_hand()) return 1;
  if (!zero_training_lowers_the_loss()) {
    std::printf("ZeRO-2 training did not lower the loss\n");
    return 1;
  }
  return 0;
}
