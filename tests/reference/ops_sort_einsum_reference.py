"""PyTorch results of sort, argsort, nonzero, bincount, einsum and broadcast matmul for
tests/reference/test_ops_sort_einsum_reference.cpp.

Usage: /usr/bin/python3 ops_sort_einsum_reference.py input.safetensors output.safetensors
Reads the inputs strata wrote, runs each op in PyTorch 1.13 and writes every result, and the
gradient of sum(result * upstream) for each differentiable input (upstream[i] =
((i % 7) - 3) / 4 over the result's elements), under the names the C++ test uses. Indices
and counts are written as float64 (exact for these small values).
"""
import sys

import torch

from safetensors_numpy import read_safetensors, write_safetensors

# name: (equation, operand names); the C++ test lists the same cases.
EINSUM_CASES = {
    "matmul": ("ij,jk->ik", ["a", "b"]),
    "bmm": ("bij,bjk->bik", ["ba", "bb"]),
    "scores": ("bhqd,bhkd->bhqk", ["q", "k"]),
    "transpose": ("ij->ji", ["a"]),
    "total": ("ij->", ["a"]),
    "dot": ("i,i->", ["v", "v2"]),
    "ellipsis": ("...ij,...jk->...ik", ["ea", "eb"]),
    "diagonal": ("ii->i", ["sq"]),
    "trace_implicit": ("ii", ["sq"]),
    "outer_implicit": ("i,j", ["v", "v2"]),
    "chain": ("ij,jk,k->i", ["a", "b", "w"]),
}
MATMUL_CASES = {"broadcast_4d_3d": ("ma", "mb"), "vector_batch": ("v", "mb")}


def upstream(out):
    i = torch.arange(out.numel(), dtype=torch.float64)
    return ((i % 7) - 3).div(4).reshape(out.shape)


def with_grads(name, fn, inputs, out):
    leaves = [inputs[n].clone().requires_grad_(True) for n in fn[1]]
    res = fn[0](*leaves)
    out[name] = res.detach()
    (res * upstream(res)).sum().backward()
    for i, leaf in enumerate(leaves):
        out[f"{name}_grad{i}"] = leaf.grad


def main():
    t, _ = read_safetensors(sys.argv[1])
    out = {}
    for sfx in ("_f32", "_f64"):
        s = t["sx" + sfx]
        for dim, desc in ((1, False), (1, True), (0, False), (0, True)):
            r = torch.sort(s, dim=dim, descending=desc, stable=True)
            key = f"sort_{dim}_{'desc' if desc else 'asc'}{sfx}"
            out[key + "_values"] = r.values
            out[key + "_indices"] = r.indices.double()
        out["argsort_desc" + sfx] = torch.argsort(s, dim=1, descending=True).double()
        out["nonzero" + sfx] = torch.nonzero(t["nz" + sfx]).double()
    with_grads("sort_grad", (lambda x: torch.sort(x, dim=1, stable=True).values, ["sg"]), t, out)
    out["bincount"] = torch.bincount(t["bins"]).double()
    out["bincount_min"] = torch.bincount(t["bins"], minlength=12).double()
    out["bincount_weighted"] = torch.bincount(t["bins"], t["binw"])
    for name, (eq, ops) in EINSUM_CASES.items():
        with_grads("einsum_" + name, (lambda *xs, eq=eq: torch.einsum(eq, *xs), ops), t, out)
    for name, ops in MATMUL_CASES.items():
        with_grads("matmul_" + name, (torch.matmul, list(ops)), t, out)
    write_safetensors(sys.argv[2], {k: v.contiguous() for k, v in out.items()})


if __name__ == "__main__":
    main()
