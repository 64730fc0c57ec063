"""PyTorch side of the elementwise-op reference check (run by test_ops_elementwise_reference
under /usr/bin/python3).

Reads fixed inputs written by strata (x, y, ... per dtype tag "f32" / "f64"), runs every op of
OPS in PyTorch and writes, per op and tag, its output ("<op>.<tag>", Bool outputs as 0/1)
and the gradient of sum(out * w) for each differentiable input ("<op>.<tag>.grad<k>").
The C++ test runs the same table of ops.
"""
import sys

import torch
import torch.nn.functional as F
from safetensors_numpy import read_safetensors, write_safetensors

# name: (function, names of its tensor inputs). Inputs named in DIFFERENTIABLE get gradients.
OPS = {
    "sigmoid": (torch.sigmoid, ["x"]),
    "silu": (F.silu, ["x"]),
    "relu": (torch.relu, ["x"]),
    "abs": (torch.abs, ["x"]),
    "exp": (torch.exp, ["x"]),
    "tanh": (torch.tanh, ["x"]),
    "log": (torch.log, ["xp"]),
    "sqrt": (torch.sqrt, ["xp"]),
    "rsqrt": (torch.rsqrt, ["xp"]),
    "clamp": (lambda x: torch.clamp(x, -0.5, 0.75), ["x"]),
    "clamp_min": (lambda x: torch.clamp(x, min=-0.5), ["x"]),
    "clamp_max": (lambda x: torch.clamp(x, max=0.75), ["x"]),
    "add": (torch.add, ["x", "y"]),
    "sub": (torch.sub, ["y", "x"]),
    "mul": (torch.mul, ["x", "y"]),
    "div": (torch.div, ["x", "yp"]),
    "minimum": (torch.minimum, ["x", "y"]),
    "maximum": (torch.maximum, ["y", "x"]),
    "pow": (torch.pow, ["xp", "y"]),
    "pow_scalar_exponent": (lambda x: torch.pow(x, 2.5), ["xp"]),
    "pow_scalar_base": (lambda y: torch.pow(1.5, y), ["x"]),
    "where": (torch.where, ["cond", "x", "y"]),
    "masked_fill": (lambda x, m: x.masked_fill(m, -2.0), ["x", "cond"]),
    "eq": (torch.eq, ["x", "y"]),
    "ne": (torch.ne, ["x", "y"]),
    "lt": (torch.lt, ["x", "y"]),
    "le": (torch.le, ["x", "y"]),
    "gt": (torch.gt, ["x", "y"]),
    "ge": (torch.ge, ["x", "y"]),
}
DIFFERENTIABLE = {"x", "xp", "y", "yp"}


def main():
    torch.set_num_threads(1)
    inputs, _ = read_safetensors(sys.argv[1])
    out = {}
    for tag in ("f32", "f64"):
        for name, (fn, args) in OPS.items():
            ts = [inputs[f"{a}.{tag}"].clone().requires_grad_(a in DIFFERENTIABLE) for a in args]
            y = fn(*ts)
            w = inputs[f"w.{tag}"]
            if y.dtype == torch.bool:
                out[f"{name}.{tag}"] = y.to(w.dtype)
                continue
            out[f"{name}.{tag}"] = y.detach()
            (y * w).sum().backward()
            for k, t in enumerate(ts):
                if t.requires_grad:
                    out[f"{name}.{tag}.grad{k}"] = t.grad
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
