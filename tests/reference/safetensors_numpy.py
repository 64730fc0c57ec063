"""safetensors reading and writing with json + struct + numpy, so that the reference scripts
need only Debian's python3-torch (no safetensors package)."""
import json
import struct

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "BOOL": np.bool_}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[base + b:base + e], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, meta


def write_safetensors(path, tensors):
    """Writes float64 tensors as F64 and everything else as F32."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        wide = t.dtype == torch.float64
        arr = t.detach().contiguous().numpy().astype(np.float64 if wide else np.float32)
        raw = arr.tobytes()
        header[name] = {"dtype": "F64" if wide else "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)
