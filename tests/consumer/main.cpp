// Minimal use of strata: tensors, a forward pass, backward, and a check of the gradient.
#include <cstdio>

#include <strata/strata.h>

int main() {
  using namespace strata;

  // A trainable 2x3 matrix and a constant row that broadcasts over it.
  Tensor a = randn({2, 3}, {.requires_grad = true});
  Tensor b = from_vector<float>({0.5f, -1.0f, 2.0f}, {3});

  // loss = sum(tanh(a) * b); backward() fills a.grad().
  Tensor loss = sum(tanh(a) * b);
  loss.backward();

  // By hand: d loss / d a = (1 - tanh(a)^2) * b.
  Tensor t = tanh(a.detach());
  Tensor expected = (ones_like(t) - t * t) * b;
  if (!allclose(a.grad(), expected, 1e-5, 1e-6)) {
    std::printf("gradient mismatch:\n%s\nexpected:\n%s\n", a.grad().to_string().c_str(),
                expected.to_string().c_str());
    return 1;
  }
  std::printf("loss %.4f; gradient matches (1 - tanh(a)^2) * b\n", loss.item());
  return 0;
}
