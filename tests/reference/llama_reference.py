"""PyTorch side of the LLaMA reference check (run by test_llama_reference under /usr/bin/python3).

Reads float64 weights (strata's names: Hugging Face LlamaForCausalLM's without "model."), a
batch and the configuration from a safetensors file written by strata, runs LLaMA as written
here from the Hugging Face layout, in float64, and writes the loss, every parameter's gradient
and the parameters after N AdamW steps to another safetensors file; then the loss and the
gradients in float32 from the same weights (loss32, grad32.*). Needs only Debian's
python3-torch (no transformers): the model below is the reference.
"""
import math
import sys

import torch
import torch.nn.functional as F
from safetensors_numpy import read_safetensors, write_safetensors


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary_tables(seq_len, head_dim, theta):
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)
    both = torch.cat((angles, angles), dim=-1)  # [T, D]: pair (j, j + D/2) shares an angle
    return both.cos(), both.sin()


def attention(p, pre, h, cfg, cos, sin):
    B, T, C = h.shape
    H, Hkv = cfg["n_head"], cfg["n_kv_head"]
    D = C // H

    def heads(name, n):
        return F.linear(h, p[pre + name]).view(B, T, n, D).transpose(1, 2)

    q, k, v = heads("q_proj.weight", H), heads("k_proj.weight", Hkv), heads("v_proj.weight", Hkv)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    # Grouped-query attention: query head i reads kv head i // (H / Hkv).
    k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    y = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ v
    return F.linear(y.transpose(1, 2).reshape(B, T, C), p[pre + "o_proj.weight"])


def llama_loss(p, cfg, tokens, targets):
    B, T = tokens.shape
    eps = cfg["rms_norm_eps"]
    cos, sin = rotary_tables(T, cfg["n_embd"] // cfg["n_head"], cfg["rope_theta"])
    x = p["embed_tokens.weight"][tokens]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # computed in float64, rounded for a float32 run
    for i in range(cfg["n_layer"]):
        pre = f"layers.{i}."
        x = x + attention(p, pre + "self_attn.", rms_norm(x, p[pre + "input_layernorm.weight"], eps), cfg, cos, sin)
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        gate = F.silu(F.linear(h, p[pre + "mlp.gate_proj.weight"]))
        x = x + F.linear(gate * F.linear(h, p[pre + "mlp.up_proj.weight"]), p[pre + "mlp.down_proj.weight"])
    logits = F.linear(rms_norm(x, p["norm.weight"], eps), p["lm_head.weight"])  # untied head
    return F.cross_entropy(logits.view(B * T, -1), targets.view(-1), ignore_index=-100)


def main():
    torch.set_num_threads(1)
    tensors, meta = read_safetensors(sys.argv[1])
    cfg = {k: int(meta[k]) for k in ("n_layer", "n_head", "n_kv_head", "n_embd", "steps")}
    cfg.update({k: float(meta[k]) for k in ("rope_theta", "rms_norm_eps", "lr", "weight_decay")})
    tokens, targets = tensors.pop("tokens"), tensors.pop("targets")
    # Float32 copies of the initial weights, taken before the AdamW steps update them in place.
    params32 = {k: v.detach().float().requires_grad_(True) for k, v in tensors.items()}
    params = {k: v.double().requires_grad_(True) for k, v in tensors.items()}
    # The same groups as strata's weight_decay_groups: decay on tensors of 2 or more dimensions.
    groups = [{"params": [v for v in params.values() if v.dim() >= 2], "weight_decay": cfg["weight_decay"]},
              {"params": [v for v in params.values() if v.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8)
    out = {}
    for step in range(cfg["steps"]):
        opt.zero_grad()
        loss = llama_loss(params, cfg, tokens, targets)
        loss.backward()
        if step == 0:
            out["loss"] = loss.detach().reshape(1)
            out.update({"grad." + k: v.grad.clone() for k, v in params.items()})
        opt.step()
    out.update({"param." + k: v.detach().clone() for k, v in params.items()})
    # The same loss and gradients in float32 (the weights are float32 values): PyTorch's own
    # float32 error against the float64 run bounds strata's float32 difference from it.
    loss32 = llama_loss(params32, cfg, tokens, targets)
    loss32.backward()
    out["loss32"] = loss32.detach().reshape(1)
    out.update({"grad32." + k: v.grad.clone() for k, v in params32.items()})
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
