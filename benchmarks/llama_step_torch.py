"""PyTorch peer for benchmarks/llama_step: one training step (forward, backward, AdamW) of
the same LLaMA as nn::Llama with LlamaConfig's defaults (vocab 256, context 128, 4 layers,
width 256, 4 query and 2 key/value heads, SwiGLU width 688, untied head, no biases), batch
8, on CPU, written in plain torch ops as a user would.

RMSNorm, rotary embeddings in Hugging Face's rotate_half layout, SwiGLU. Grouped-query
attention takes the fastest path the version offers: F.scaled_dot_product_attention with
is_causal=True (2.0 on; key/value heads shared through enable_gqa from 2.5, repeated to every
query head before), else the explicit masked softmax over repeated key/value heads (1.13);
--attention picks one. Runs under Debian's torch 1.13 and PyPI's torch 2.x, as
gpt_step_torch.py; prints the same one line (torch_step.py), attention=sdpa_gqa, sdpa or
masked_softmax.
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_step  # noqa: E402  (the loop, options and output shared with gpt_step_torch.py)


def sdpa_takes_gqa():
    """Whether F.scaled_dot_product_attention shares key/value heads itself (2.5 on)."""
    try:
        q = torch.zeros(1, 2, 1, 2)
        kv = torch.zeros(1, 1, 1, 2)
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        return True
    except TypeError:
        return False


def linear(cin, cout, std):
    layer = nn.Linear(cin, cout, bias=False)
    nn.init.normal_(layer.weight, std=std)
    return layer


class RMSNorm(nn.Module):
    def __init__(self, c, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotary_tables(t, d, theta):
    """cos and sin [t, d] for positions 0..t-1 (each frequency twice, HF's layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    freqs = torch.outer(torch.arange(t, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


class Attention(nn.Module):
    def __init__(self, c, h, kvh, std, mode):
        super().__init__()
        self.h, self.kvh, self.d, self.mode = h, kvh, c // h, mode
        self.q_proj = linear(c, h * self.d, std)
        self.k_proj = linear(c, kvh * self.d, std)
        self.v_proj = linear(c, kvh * self.d, std)
        self.o_proj = linear(h * self.d, c, std)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kvh, self.d).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kvh, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.mode == "sdpa_gqa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            group = self.h // self.kvh
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            if self.mode == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d))
                mask = torch.ones(T, T, dtype=torch.bool).tril()
                y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.h * self.d))


class MLP(nn.Module):
    def __init__(self, c, inter, std):
        super().__init__()
        self.gate_proj = linear(c, inter, std)
        self.up_proj = linear(c, inter, std)
        self.down_proj = linear(inter, c, std)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c, h, kvh, inter, eps, std, mode):
        super().__init__()
        self.input_layernorm = RMSNorm(c, eps)
        self.self_attn = Attention(c, h, kvh, std, mode)
        self.post_attention_layernorm = RMSNorm(c, eps)
        self.mlp = MLP(c, inter, std)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab, layers, c, h, kvh, inter, mode, theta=10000.0, eps=1e-5, std=0.02):
        super().__init__()
        self.d, self.theta = c // h, theta
        self.embed_tokens = nn.Embedding(vocab, c)
        nn.init.normal_(self.embed_tokens.weight, std=std)
        self.layers = nn.ModuleList([Layer(c, h, kvh, inter, eps, std, mode) for _ in range(layers)])
        self.norm = RMSNorm(c, eps)
        self.lm_head = linear(c, vocab, std)

    def forward(self, idx, targets):
        cos, sin = rotary_tables(idx.shape[1], self.d, self.theta)  # per forward, as strata does
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = torch_step.parser("One LLaMA training step in PyTorch (benchmarks/llama_step.cpp's peer).")
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=688)
    a = ap.parse_args()
    sdpa = torch_step.setup(ap, a)
    mode = ("sdpa_gqa" if sdpa_takes_gqa() else "sdpa") if sdpa else "masked_softmax"
    model = Llama(a.vocab, a.layers, a.width, a.heads, a.kv_heads, a.intermediate, mode)
    torch_step.run(model, a, mode)


if __name__ == "__main__":
    main()
