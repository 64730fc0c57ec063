#!/usr/bin/python3
"""Reads a safetensors file written by strata with nothing but json + struct (numpy, when
installed, cross-checks the decoding) and compares it with expectations from the C++ test.

usage: read_safetensors.py EXPECTATIONS.json

EXPECTATIONS = {
  "file": "model.safetensors",
  "tensors": {name: {"dtype": "F32", "shape": [..],
                     "values": [..]                 # optional, row-major
                     "transpose_of": [..]}},        # optional, row-major [a, b] source of a [b, a] tensor
  "metadata": {..},                                 # optional, must match exactly
  "crc32_key": "data_crc32",                        # optional: metadata key holding zlib.crc32(data) as 8 hex digits
  "config": {"path": "config.json", "expect": {..}} # optional: fields config.json must hold
}
Exits 0 when everything matches, 1 with a message naming the first difference.
"""
import json
import struct
import sys
import zlib

FORMATS = {"F32": ("f", 4), "F64": ("d", 8), "F16": ("e", 2), "I32": ("i", 4), "I64": ("q", 8), "BF16": ("H", 2)}


def fail(msg):
    print("read_safetensors.py: " + msg)
    sys.exit(1)


def decode(dtype, raw):
    code, size = FORMATS[dtype]
    values = list(struct.unpack("<%d%s" % (len(raw) // size, code), raw))
    if dtype == "BF16":  # bfloat16 is the upper half of a float32
        values = [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in values]
    return values


def decode_numpy(np, dtype, raw):
    if dtype == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype("<u4") << 16).view("<f4").tolist()
    names = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I32": "<i4", "I64": "<i8"}
    return np.frombuffer(raw, dtype=names[dtype]).tolist()


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def main():
    with open(sys.argv[1]) as f:
        expect = json.load(f)
    with open(expect["file"], "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if n % 8 != 0:
        fail("header length %d is not a multiple of 8" % n)
    if 8 + n > len(blob):
        fail("header length %d beyond file size %d" % (n, len(blob)))
    text = blob[8:8 + n].decode("utf-8")
    if not text.startswith("{"):
        fail("header does not start with '{'")
    stripped = text.rstrip(" ")
    if not stripped.endswith("}"):
        fail("header padding is not spaces")
    header = json.loads(text)
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", {})

    # Layout: sorted by offset, contiguous, covering the data section exactly.
    pos = 0
    for name, info in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        begin, end = info["data_offsets"]
        if begin != pos:
            fail("tensor %s starts at %d, expected %d" % (name, begin, pos))
        size = FORMATS[info["dtype"]][1]
        if end - begin != numel(info["shape"]) * size:
            fail("tensor %s: byte range does not match shape %s" % (name, info["shape"]))
        if begin % size != 0:
            fail("tensor %s at %d is not aligned to its element size %d" % (name, begin, size))
        pos = end
    if pos != len(data):
        fail("tensors cover %d bytes, data section has %d" % (pos, len(data)))

    try:
        import numpy as np
    except ImportError:
        np = None

    want = expect["tensors"]
    if sorted(header) != sorted(want):
        fail("tensor names differ: file has %s, expected %s" % (sorted(header), sorted(want)))
    for name, w in want.items():
        info = header[name]
        if info["dtype"] != w["dtype"]:
            fail("tensor %s: dtype %s, expected %s" % (name, info["dtype"], w["dtype"]))
        if info["shape"] != w["shape"]:
            fail("tensor %s: shape %s, expected %s" % (name, info["shape"], w["shape"]))
        begin, end = info["data_offsets"]
        values = decode(info["dtype"], data[begin:end])
        if np is not None and decode_numpy(np, info["dtype"], data[begin:end]) != values:
            fail("tensor %s: numpy and struct decode differently" % name)
        if "values" in w and values != w["values"]:
            fail("tensor %s: values %s, expected %s" % (name, values[:8], w["values"][:8]))
        if "transpose_of" in w:
            rows, cols = w["shape"]  # file layout [cols_of_source, rows_of_source]
            src = w["transpose_of"]
            expected = [src[c * rows + r] for r in range(rows) for c in range(cols)]
            if values != expected:
                fail("tensor %s: not the transpose of the strata tensor (first values %s, expected %s)"
                     % (name, values[:8], expected[:8]))

    if "metadata" in expect and metadata != expect["metadata"]:
        fail("metadata %s, expected %s" % (metadata, expect["metadata"]))
    if "crc32_key" in expect:
        found = "%08x" % zlib.crc32(data)
        if metadata.get(expect["crc32_key"]) != found:
            fail("zlib.crc32 of the data section is %s, metadata says %s" % (found, metadata.get(expect["crc32_key"])))
    if "config" in expect:
        with open(expect["config"]["path"]) as f:
            config = json.load(f)
        for key, value in expect["config"]["expect"].items():
            if config.get(key, "<missing>") != value:
                fail("config.json %s = %r, expected %r" % (key, config.get(key, "<missing>"), value))
    print("read_safetensors.py: OK (%d tensors%s)" % (len(want), ", numpy cross-check" if np else ""))


if __name__ == "__main__":
    main()
