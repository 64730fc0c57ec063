"""PyTorch's side of benchmarks/row_ops.cpp: the same ops, shapes and statistic.

rms_norm is composed (PyTorch 1.13 has no fused RMS norm), so its figure is an upper bound.
"""
import sys
import time

import torch


def quartile_us(f, reps):
    t = []
    for _ in range(reps):
        a = time.perf_counter()
        f()
        t.append((time.perf_counter() - a) * 1e6)
    t.sort()
    return t[len(t) // 4]


def main():
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 41
    torch.manual_seed(1)
    x, g = torch.randn(1024, 256), torch.randn(1024, 256)
    w, b = torch.randn(256, requires_grad=True), torch.randn(256, requires_grad=True)
    targets = torch.randint(0, 256, (1024,))
    vocab, vocab_targets = torch.randn(64, 50257), torch.randint(0, 50257, (64,))
    F = torch.nn.functional

    def leaf(t):
        return t.detach().requires_grad_()

    def rms(t):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    print("layer_norm %.1f" % quartile_us(lambda: F.layer_norm(leaf(x), (256,), w, b, 1e-5).backward(g), reps))
    print("rms_norm %.1f" % quartile_us(lambda: rms(leaf(x)).backward(g), reps))
    print("softmax %.1f" % quartile_us(lambda: torch.softmax(leaf(x), -1).backward(g), reps))
    print("cross_entropy %.1f" % quartile_us(lambda: F.cross_entropy(leaf(x), targets).backward(), reps))
    print("cross_entropy_50257 %.1f"
          % quartile_us(lambda: F.cross_entropy(leaf(vocab), vocab_targets).backward(), max(5, reps // 4)))


if __name__ == "__main__":
    main()
