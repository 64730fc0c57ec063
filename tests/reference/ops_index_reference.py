"""PyTorch results of the index and reduction ops for tests/reference/test_ops_index_reference.cpp.

Usage: /usr/bin/python3 ops_index_reference.py input.safetensors output.safetensors
Reads the inputs strata wrote (x, y, ties, src in float32 and float64, int64 indices), runs
each op in PyTorch 1.13 and writes every result under the name the C++ test uses. Indices are
written as floating-point numbers (exact for these small values).
"""
import sys

import torch

from safetensors_numpy import read_safetensors, write_safetensors


def results(t, idx, sfx):
    x, y, ties, src = (t[name + sfx] for name in ("x", "y", "ties", "src"))
    out = {
        "index_select_1": torch.index_select(x, 1, idx["sel"]),
        "index_select_neg3": torch.index_select(y, -3, idx["sel_y"]),
        "index_add_0": torch.index_add(x, 0, idx["add"], src),
        "gather_1": torch.gather(x, 1, idx["gather_x"]),
        "gather_0_transposed": torch.gather(y.transpose(0, 2), 0, idx["gather_y"]),
        "scatter_add_0": torch.scatter_add(x, 0, idx["scatter"], src),
        "cat_neg2": torch.cat([x, src], -2),
        "cat_neg1": torch.cat([x, y[0, :, :2]], -1),
        "stack_neg2": torch.stack([x, x * 2], -2),
        "mean_0_2_keepdim": y.mean(dim=[0, 2], keepdim=True),
        "var_1": y.var(1),
        "var_0_2_biased_keepdim": y.var([0, 2], unbiased=False, keepdim=True),
        "var_all": y.var(),
        "max_1_values": ties.max(1).values,
        "max_1_indices": ties.max(1).indices,
        "max_0_keepdim_values": ties.max(0, keepdim=True).values,
        "max_0_keepdim_indices": ties.max(0, keepdim=True).indices,
        "argmax_neg1": ties.argmax(-1),
        "topk_3_1_values": x.topk(3, 1).values,
        "topk_3_1_indices": x.topk(3, 1).indices,
        "topk_2_0_smallest_values": y.topk(2, 0, largest=False).values,
        "topk_2_0_smallest_indices": y.topk(2, 0, largest=False).indices,
        "log_softmax_1": torch.log_softmax(y, 1),
        "log_softmax_neg1": torch.log_softmax(x, -1),
        "cumsum_2": torch.cumsum(y, 2),
        "cumsum_0": torch.cumsum(x, 0),
    }
    for i, piece in enumerate(torch.split(x, 4, -1)):
        out[f"split_4_neg1_{i}"] = piece
    for i, piece in enumerate(torch.split(x, [1, 3, 2], 1)):
        out[f"split_sizes_{i}"] = piece
    for i, piece in enumerate(torch.chunk(y, 3, -1)):  # 5 columns: sizes 2, 2, 1
        out[f"chunk_3_neg1_{i}"] = piece
    wide = sfx == "_f64"
    return {name + sfx: (v.double() if wide else v.float()) for name, v in out.items()}


def main():
    tensors, _ = read_safetensors(sys.argv[1])
    idx = {k[len("idx_"):]: v for k, v in tensors.items() if k.startswith("idx_")}
    out = {}
    for sfx in ("_f32", "_f64"):
        out.update(results(tensors, idx, sfx))
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
