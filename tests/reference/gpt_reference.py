"""PyTorch side of the GPT reference check (run by test_gpt_reference under /usr/bin/python3).

Reads weights, a batch and the configuration from a safetensors file written by strata,
runs the same GPT-2 architecture in PyTorch, and writes the float32 loss and every
parameter's float32 gradient, then the parameters after N AdamW steps taken in float64 (with
the float64 first-step gradients), to another safetensors file.
safetensors is parsed by safetensors_numpy.py, so that only Debian's python3-torch is needed.
"""
import math
import sys

import torch
import torch.nn.functional as F
from safetensors_numpy import read_safetensors, write_safetensors


def gpt_loss(p, cfg, tokens, targets):
    B, T = tokens.shape
    C, H = cfg["n_embd"], cfg["n_head"]
    x = p["wte.weight"][tokens] + p["wpe.weight"][torch.arange(T)]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(cfg["n_layer"]):
        pre = f"h.{i}."
        a = F.layer_norm(x, (C,), p[pre + "ln_1.weight"], p[pre + "ln_1.bias"], 1e-5)
        qkv = F.linear(a, p[pre + "attn.c_attn.weight"], p[pre + "attn.c_attn.bias"])
        q, k, v = qkv.split(C, dim=2)
        q, k, v = [t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, p[pre + "attn.c_proj.weight"], p[pre + "attn.c_proj.bias"])
        m = F.layer_norm(x, (C,), p[pre + "ln_2.weight"], p[pre + "ln_2.bias"], 1e-5)
        m = F.gelu(F.linear(m, p[pre + "mlp.c_fc.weight"], p[pre + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(m, p[pre + "mlp.c_proj.weight"], p[pre + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    logits = F.linear(x, p["wte.weight"])
    return F.cross_entropy(logits.view(B * T, -1), targets.view(-1), ignore_index=-100)


def main():
    torch.set_num_threads(1)
    tensors, meta = read_safetensors(sys.argv[1])
    cfg = {k: int(meta[k]) for k in ("n_layer", "n_head", "n_embd", "steps")}
    lr, wd = float(meta["lr"]), float(meta["weight_decay"])
    tokens, targets = tensors.pop("tokens"), tensors.pop("targets")
    params = {k: v.clone().requires_grad_(True) for k, v in tensors.items()}
    out = {}
    loss = gpt_loss(params, cfg, tokens, targets)
    loss.backward()
    out["loss"] = loss.detach().reshape(1)
    for k, v in params.items():
        out["grad." + k] = v.grad.clone()
    # The optimizer steps run in float64: in float32, entries whose gradient is small (not
    # only exactly-zero ones) turn rounding differences between the two frameworks' kernels
    # into visible parameter differences through Adam's normalisation, and which entries do
    # depends on the CPU's BLAS kernels.
    params = {k: v.detach().double().requires_grad_(True) for k, v in tensors.items()}
    # Same parameter groups as strata's weight_decay_groups: decay on >= 2-D tensors.
    decay = [v for v in params.values() if v.dim() >= 2]
    no_decay = [v for v in params.values() if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    for step in range(cfg["steps"]):
        opt.zero_grad()
        gpt_loss(params, cfg, tokens, targets).backward()
        if step == 0:
            for k, v in params.items():
                out["grad64." + k] = v.grad.clone()
        opt.step()
    for k, v in params.items():
        out["param." + k] = v.detach().clone()
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
