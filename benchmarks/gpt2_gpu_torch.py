"""PyTorch's side of benchmarks/gpt2_gpu.cpp: GPT-2 124M (the same configuration, written
here in plain PyTorch), bf16 autocast, fused AdamW, torch.compile, the same batch and the
same statistic (median step), one line in the same format. Its vocabulary is GPT-2's 50257
rows, unpadded, as a plain PyTorch GPT-2 is written (strata's side pads to 50304, as llm.c).

    python3 gpt2_gpu_torch.py --batch B [--steps N] [--warmup N] [--peak-tflops X] [--no-compile]
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, CONTEXT, LAYERS, HEADS, WIDTH = 50257, 1024, 12, 12, 768


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.c_fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.mlp_proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(CONTEXT, WIDTH)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head, as strata's GPT
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def flops_per_step(batch):
    params = sum(p.numel() for p in GPT().parameters())  # as strata counts: tied wte once
    return 6 * params * batch * CONTEXT + 12 * LAYERS * batch * CONTEXT * CONTEXT * WIDTH


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
    step_fn = model if a.no_compile else torch.compile(model)
    idx = torch.randint(0, VOCAB, (a.batch, CONTEXT), device="cuda")
    tgt = torch.randint(0, VOCAB, (a.batch, CONTEXT), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    name = "torch" if a.no_compile else "torch.compile"
    print("%s precision=bf16 batch=%d step_ms=%.1f tokens_per_s=%.0f mfu=%.3f torch=%s"
          % (name, a.batch, median * 1e3, a.batch * CONTEXT / median,
             flops_per_step(a.batch) / median / (a.peak_tflops * 1e12), torch.__version__))


if __name__ == "__main__":
    main()
