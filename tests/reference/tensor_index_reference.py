"""PyTorch results of Tensor.index / index_put_ expressions for
tests/reference/test_tensor_index_reference.cpp (which holds the same table in C++).

Usage: /usr/bin/python3 tensor_index_reference.py input.safetensors output.safetensors
Reads x [4, 5, 6] and y [2, 3, 4, 5] (float64), int64 index tensors i_* and masks m_*
(written as int64, used as bool), and writes each expression's result in float64.
"""
import sys

import torch

from safetensors_numpy import read_safetensors, write_safetensors


def put(x, index, value):
    out = x.clone()
    out[index] = value
    return out


def results(t):
    x, y = t["x"], t["y"]
    i1, i2, ia, ib, ja, jb, jc = (t[n] for n in ("i1", "i2", "ia", "ib", "ja", "jb", "jc"))
    m0, m12 = t["m0"].bool(), t["m12"].bool()
    return {
        "int_slice": x[1, 1:4],
        "neg_start_step": x[-3:, ::2, -1],
        "clamped_slices": x[-10:10, 2:100:3],
        "ellipsis_none": x[None, ..., 0, None],
        "empty_slice": x[3:1],
        "adv_one": x[i1],
        "adv_2d_middle": x[:, i2],
        "adv_adjacent_broadcast": x[:, ia, ib],
        "adv_separated": x[ia, :, ib],
        "adv_after_none": x[None, ia, :, ib],
        "int_makes_adjacent": y[0, :, ja, jb],
        "int_between": y[jc, 1, :, jb],
        "adv_around_int": y[:, ja, 1, jb],
        "mask_rows": x[m0],
        "mask_2d": x[:, m12],
        "mask_then_int": x[m0, :, 2],
        "mask_compare": x[x > 0.5],
        "put_slices": put(x, (slice(1, 3), slice(None, None, 2)), t["v_slices"]),
        "put_separated": put(x, (ia, slice(None), ib), t["v_row"]),
        "put_adjacent": put(x, (slice(None), ia, ib), t["v_adjacent"]),
        "put_mask_scalar": put(x, m0, 0.5),
        "put_int_mask": put(y, (1, m12[:3, :4]), -2.0),
    }


def main():
    tensors, _ = read_safetensors(sys.argv[1])
    write_safetensors(sys.argv[2], {k: v.double() for k, v in results(tensors).items()})


if __name__ == "__main__":
    main()
