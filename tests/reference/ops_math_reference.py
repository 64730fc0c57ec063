"""PyTorch side of the rounding / min / logsumexp / tril / one_hot reference check (run by
test_ops_math_reference under /usr/bin/python3).

Reads fixed inputs written by strata (per dtype tag "f32" / "f64"), runs every op of OPS in
PyTorch and writes, per op and tag, its output ("<op>.<tag>"; Bool and int64 outputs as
numbers) and, for floating outputs, the gradient of sum(out * w(out.shape)) for each
differentiable input ("<op>.<tag>.grad<k>"). The weights are exact rationals both sides
build the same way (weights()). The C++ test runs the same table of ops.
"""
import sys

import torch
import torch.nn.functional as F
from safetensors_numpy import read_safetensors, write_safetensors

# name: (function, names of its tensor inputs). Inputs named in DIFFERENTIABLE get gradients.
OPS = {
    "round": (torch.round, ["xr"]),
    "floor": (torch.floor, ["xr"]),
    "ceil": (torch.ceil, ["xr"]),
    "trunc": (torch.trunc, ["xr"]),
    "sign": (torch.sign, ["xr"]),
    "isnan": (torch.isnan, ["xs"]),
    "isinf": (torch.isinf, ["xs"]),
    "isfinite": (torch.isfinite, ["xs"]),
    "logsumexp_last": (lambda x: torch.logsumexp(x, -1), ["x3"]),
    "logsumexp_0_2_keepdim": (lambda x: torch.logsumexp(x, (0, 2), keepdim=True), ["x3"]),
    "logsumexp_large": (lambda x: torch.logsumexp(x * 300.0, 1), ["x"]),
    "logsumexp_specials": (lambda x: torch.logsumexp(x, 1), ["xl"]),
    "min": (lambda x: torch.min(x, 1).values, ["xm"]),
    "min_indices": (lambda x: torch.min(x, 1).indices, ["xm"]),
    "min_dim0_keepdim": (lambda x: torch.min(x, 0, keepdim=True).values, ["xm"]),
    "argmin": (lambda x: torch.argmin(x, 0), ["xm"]),
    "tril": (torch.tril, ["x3"]),
    "tril_minus1": (lambda x: torch.tril(x, -1), ["x3"]),
    "triu": (torch.triu, ["x3"]),
    "triu_2": (lambda x: torch.triu(x, 2), ["x3"]),
    "one_hot": (lambda i: F.one_hot(i), ["idx"]),
    "one_hot_7": (lambda i: F.one_hot(i, 7), ["idx"]),
}
DIFFERENTIABLE = {"x", "xr", "x3", "xl", "xm"}


def weights(shape, dtype):
    """w_i = ((7 i) mod 11 - 5) / 4 in row-major order: exact in float32 and float64."""
    n = 1
    for s in shape:
        n *= s
    i = torch.arange(n, dtype=torch.int64)
    return (((7 * i) % 11 - 5).to(torch.float64) / 4.0).reshape(shape).to(dtype)


def main():
    torch.set_num_threads(1)
    inputs, _ = read_safetensors(sys.argv[1])
    out = {}
    for tag in ("f32", "f64"):
        for name, (fn, args) in OPS.items():
            ts = [inputs[a if a == "idx" else f"{a}.{tag}"].clone() for a in args]
            ts = [t.requires_grad_(a in DIFFERENTIABLE) for t, a in zip(ts, args)]
            y = fn(*ts)
            if y.dtype in (torch.bool, torch.int64) or not y.requires_grad:
                out[f"{name}.{tag}"] = y.detach().to(torch.float64)
                continue
            out[f"{name}.{tag}"] = y.detach()
            (y * weights(y.shape, y.dtype)).sum().backward()
            for k, t in enumerate(ts):
                if t.requires_grad:
                    out[f"{name}.{tag}.grad{k}"] = t.grad
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
