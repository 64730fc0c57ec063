"""PyTorch side of test_nn_modules_reference (run under /usr/bin/python3 with torch 1.13).

Reads float64 inputs written by strata and, for each case, writes what torch gives for them,
with the loss L = sum(out * w_out) (+ sum(weights * w_weights) when the case asks for the
attention weights) and the gradients of L:
  mha.<case>.  torch.nn.MultiheadAttention(batch_first=...) with strata's state dict, masks
               given as 0/1 (Bool: 1 = excluded) or as additive floats; the case's settings are
               in the metadata as "key=value,..." (see parse_case).
  ln.*         layer_norm with weight only (torch 1.13's LayerNorm has no bias=False switch:
               F.layer_norm(x, (D,), w, None)) and without affine parameters.
  emb.*        torch.nn.Embedding(V, D, padding_idx=p) with strata's weight.
"""
import sys

import torch
import torch.nn.functional as F

from safetensors_numpy import read_safetensors, write_safetensors


def parse_case(text):
    fields = dict(item.split("=") for item in text.split(","))
    return {k: int(v) for k, v in fields.items()}


def mha_case(name, c, t, out):
    p = "mha." + name + "."
    mha = torch.nn.MultiheadAttention(c["E"], c["H"], bias=bool(c["bias"]), batch_first=bool(c["batch_first"]),
                                      kdim=c["kdim"], vdim=c["vdim"], dtype=torch.float64)
    state = {k[len(p + "param."):]: v for k, v in t.items() if k.startswith(p + "param.")}
    mha.load_state_dict(state, strict=True)
    mha.train()
    query = t[p + "query"].clone().requires_grad_(True)
    if c["self"]:
        key = value = query
    else:
        key = t[p + "key"].clone().requires_grad_(True)
        value = t[p + "value"].clone().requires_grad_(True)
    kpm = t.get(p + "kpm")
    if kpm is not None and c["kpm_bool"]:
        kpm = kpm != 0
    attn = t.get(p + "attn_mask")
    if attn is not None and c["attn_bool"]:
        attn = attn != 0
    result, weights = mha(query, key, value, key_padding_mask=kpm, attn_mask=attn, need_weights=bool(c["need_weights"]),
                          average_attn_weights=bool(c["average"]))
    loss = (result * t[p + "w_out"]).sum()
    if c["need_weights"]:
        loss = loss + (weights * t[p + "w_weights"]).sum()
        out[p + "weights"] = weights
    loss.backward()
    out[p + "out"] = result
    out[p + "grad.query"] = query.grad
    if not c["self"]:
        out[p + "grad.key"] = key.grad
        out[p + "grad.value"] = value.grad
    for pname, param in mha.named_parameters():
        out[p + "grad." + pname] = param.grad


def layer_norm_cases(t, out, eps):
    for name, with_weight in (("weight_only", True), ("no_affine", False)):
        x = t["ln.x"].clone().requires_grad_(True)
        w = t["ln.w"].clone().requires_grad_(True) if with_weight else None
        y = F.layer_norm(x, (x.shape[-1],), w, None, eps)
        (y * t["ln.w_out"]).sum().backward()
        out["ln." + name + ".out"] = y
        out["ln." + name + ".grad.x"] = x.grad
        if with_weight:
            out["ln." + name + ".grad.weight"] = w.grad


def embedding_cases(t, out, paddings):
    for name, padding in paddings.items():
        weight = t["emb.weight"]
        emb = torch.nn.Embedding(weight.shape[0], weight.shape[1], padding_idx=padding, dtype=torch.float64)
        with torch.no_grad():
            emb.weight.copy_(weight)  # the padding row too: its gradient must be zero anyway
        y = emb(t["emb.indices"])
        (y * t["emb.w_out"]).sum().backward()
        out["emb." + name + ".out"] = y
        out["emb." + name + ".grad.weight"] = emb.weight.grad


def main():
    t, meta = read_safetensors(sys.argv[1])
    out = {}
    for key, value in meta.items():
        if key.startswith("mha."):
            mha_case(key[len("mha."):], parse_case(value), t, out)
    layer_norm_cases(t, out, float(meta["ln_eps"]))
    embedding_cases(t, out, {name[len("emb_padding."):]: int(v) for name, v in meta.items()
                             if name.startswith("emb_padding.")})
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
