"""What the PyTorch step peers (gpt_step_torch.py, llama_step_torch.py) share: the command
line, the timed training loop and the one line they print, so that both time exactly what
benchmarks/model_step.h times in strata (forward + loss, zero_grad to none, backward, AdamW).

Thread settings come from the command line (torch.set_num_threads) and the environment
(OMP_NUM_THREADS, OPENBLAS_NUM_THREADS for Debian's OpenBLAS build, MKL_NUM_THREADS for
PyPI's MKL/oneDNN build), which the runner sets.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def parser(description):
    """The options every peer takes; a peer adds its model's own."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--attention", choices=("auto", "sdpa", "masked_softmax"), default="auto",
                    help="auto: sdpa where this torch has it, else the masked softmax")
    return ap


def setup(ap, a):
    """Applies the thread count and seed; returns whether to use sdpa."""
    if a.attention == "sdpa" and not HAS_SDPA:
        ap.error(f"torch {torch.__version__} has no F.scaled_dot_product_attention (2.0 on)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    return a.attention == "sdpa" or (a.attention == "auto" and HAS_SDPA)


def run(model, a, attention):
    """Times the steps and prints `torch_ms_median=<ms> threads=<n> torch=<version>
    attention=<attention> loss=<last loss>`; model(idx, targets) returns the loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(0, a.vocab, (a.batch, a.context))
    tgt = torch.randint(0, a.vocab, (a.batch, a.context))
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
    print(f"torch_ms_median={statistics.median(times):.2f} threads={torch.get_num_threads()} "
          f"torch={torch.__version__} attention={attention} "
          f"loss={loss.item():.4f}")
