"""PyTorch side of test_ops_fused_reference (run under /usr/bin/python3).

Reads inputs written by strata (float32 and float64 copies, suffixed .f32 / .f64) and writes
what plain torch ops give for them:
  rms_norm   x * rsqrt(mean(x^2, -1) + eps) * w
  rotary     Hugging Face LLaMA's x * cos + rotate_half(x) * sin, with strata's tables, and the
             tables themselves rebuilt in float64 from inv_freq = theta^(-2i/D)
  attention  kv heads repeated (repeat_interleave), softmax(q k^T / sqrt(D) + mask) v, the
             causal mask aligned to the last query as with a KV cache
"""
import sys

import torch

from safetensors_numpy import read_safetensors, write_safetensors


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def tables(length, dim, theta, offset):
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.outer(torch.arange(offset, offset + length, dtype=torch.float64), inv_freq)
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def attention(q, k, v, mask, causal):
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5 + mask
    if causal:
        tq, tk = q.shape[-2], k.shape[-2]
        visible = torch.ones(tq, tk, dtype=torch.bool).tril(diagonal=tk - tq)
        scores = scores.masked_fill(~visible, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def main():
    t, meta = read_safetensors(sys.argv[1])
    eps, theta, offset = float(meta["eps"]), float(meta["theta"]), int(meta["offset"])
    out = {}
    for sfx in (".f32", ".f64"):
        out["rms" + sfx] = rms_norm(t["x" + sfx], t["w" + sfx], eps)
        out["rope" + sfx] = rotary(t["x" + sfx], t["cos" + sfx], t["sin" + sfx])
        for causal in (False, True):
            name = "attn_causal" if causal else "attn"
            out[name + sfx] = attention(t["q" + sfx], t["k" + sfx], t["v" + sfx], t["mask" + sfx], causal)
    length, dim = t["cos.f64"].shape
    out["cos.ref"], out["sin.ref"] = tables(length, dim, theta, offset)
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
