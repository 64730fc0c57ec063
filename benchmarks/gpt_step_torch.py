"""PyTorch peer for benchmarks/gpt_step: one training step (forward, backward, AdamW) of the
same GPT (vocab 256, context 128, 4 layers, width 256, 4 heads, batch 8) on CPU.

Runs under Debian's torch 1.13 (/usr/bin/python3) and under PyTorch 2.x from PyPI (the venv
of scripts/setup_peer_venv.sh). Attention is the fastest path the version offers, as a user
would write it: F.scaled_dot_product_attention(is_causal=True) where it exists (2.0 on), the
explicit masked softmax before; --attention picks one.

Prints one line (torch_step.py): `torch_ms_median=<ms> threads=<torch threads> torch=<version>
attention=<sdpa|masked_softmax> loss=<last loss>`.
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_step  # noqa: E402  (the loop, options and output shared with llama_step_torch.py)
from torch_step import HAS_SDPA  # noqa: E402


class Block(nn.Module):
    def __init__(self, c, h, sdpa=HAS_SDPA):
        super().__init__()
        self.h = h
        self.sdpa = sdpa
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = [t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v)]
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.h))
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    # sdpa: F.scaled_dot_product_attention (default where this torch has it) or the explicit
    # masked softmax. benchmarks/ddp_step_torch.py builds this model with the default.
    def __init__(self, vocab, ctx, layers, c, heads, sdpa=HAS_SDPA):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(ctx, c)
        self.h = nn.ModuleList([Block(c, heads, sdpa) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(c)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = torch_step.parser("One GPT training step in PyTorch (benchmarks/gpt_step.cpp's peer).")
    a = ap.parse_args()
    sdpa = torch_step.setup(ap, a)
    model = GPT(a.vocab, a.context, a.layers, a.width, a.heads, sdpa)
    torch_step.run(model, a, "sdpa" if sdpa else "masked_softmax")


if __name__ == "__main__":
    main()
