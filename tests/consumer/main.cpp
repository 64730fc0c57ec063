// Minimal use of strata: tensors, a forward pass, backward, and a check of the gradient.
#include <cstdio>

#include <strata/strata.h>

int main() {
  using namespace strata;

  // A trainable 2x3 matrix and a constant 3x2 matrix.
  Tensor a = randn({2, 3}, {.requires_grad = true});
  Tensor b = from_vector<float>({0.5f, -0.2f, 0.1f, 0.4f, -0.3f, 0.6f}, {3, 2});

  // loss = sum(tanh(a @ b)); backward() fills a.grad().
  Tensor y = tanh(matmul(a, b));
  Tensor loss = sum(y);
  loss.backward();

  // By hand: d loss / d a = (1 - y^2) @ b^T.
  Tensor dy = ones_like(y) - y.detach() * y.detach();
  Tensor expected = matmul(dy, b.transpose(0, 1));
  if (!allclose(a.grad(), expected, 1e-5, 1e-6)) {
    std::printf("gradient mismatch:\n%s\nexpected:\n%s\n", a.grad().to_string().c_str(),
                expected.to_string().c_str());
    return 1;
  }
  std::printf("loss %.4f; gradient matches (1 - y^2) @ b^T\n", loss.item());
  return 0;
}
