#!/usr/bin/python3
"""check_safetensors.py - reads the safetensors files fedvm wrote, independently of fedvm.

Usage: check_safetensors.py DIR

DIR holds the files tests/test_safetensors.c writes when FVM_SAFETENSORS_OUT
names it (see the Makefile's test target). This reader follows the format's
description (https://github.com/huggingface/safetensors) with nothing but
Python's json and struct modules and NumPy: an 8-byte little-endian header
length, a JSON header, then the data buffer. It checks the layout (header
padded with spaces to a multiple of 8, offsets tiling the buffer in header
order), the names, dtypes and shapes of the state, the metadata, and every
value against the formula the C test filled them with.

The order is the reference writer's (huggingface/safetensors, tensor.rs
prepare(): "sorting by descending dtype alignment, then by name", its Dtype
enum listing dtypes "in increasing alignment order"), so that every
tensor's data starts at a multiple of its element size: the check asserts
that order and that alignment (in the file, 8 + header length + begin), as
zero-copy readers (PyTorch's) need.
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np

NUMPY = {"BOOL": np.bool_, "U8": np.uint8, "I32": "<i4", "I64": "<i8", "U32": "<u4", "F32": "<f4", "F64": "<f8"}
# The position of each dtype in the reference's Dtype enum (BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16,
# BF16, I32, U32, F32, F64, I64, U64): files list tensors by it, highest first, then by name.
REFERENCE_RANK = {"BOOL": 0, "U8": 1, "I32": 9, "U32": 10, "F32": 11, "F64": 12, "I64": 13}

# The state of test_export, in path order: name, dtype, shape (leaf k is the k-th).
STATE = [
    ("model.w1", "F32", [3, 4]),
    ("model.b1", "F32", [4]),
    ("model.w2", "F64", [4, 2]),
    ("opt.step", "I64", []),
    ("opt.m.w1", "F32", [3, 4]),
    ("opt.p.0", "U8", [5]),
    ("opt.p.1", "BOOL", [2, 3]),
    ("stats.0", "I32", [6]),
    ("stats.1", "U32", [3]),
    ("stats.empty", "F32", [2, 0]),
    ("stats.scalar", "F64", []),
]
STATE_META = {"program": "fedavg.json", "round": "12", "note": "\u00fcnicode \"quoted\"\n"}
BARE = [("value", "F32", [2, 3])]


def expected(dtype, shape, k):
    """Element i of leaf k, as fill() in tests/test_safetensors.c computes it."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    i = np.arange(n, dtype=np.int64)
    iu = i.astype(np.uint64)
    if dtype == "BOOL":
        v = (i * 7 + k) % 3 == 0
    elif dtype == "U8":
        v = ((i * 37 + k) % 256).astype(np.uint8)
    elif dtype in ("I32", "U32"):
        u = [(int(x) * 2654435761 + k * 97) % 2**32 for x in i]
        v = np.array(u, dtype=np.uint32)
        if dtype == "I32":
            v = v.view(np.int32)
    elif dtype == "I64":
        u = [(int(x) * 0x9E3779B97F4A7C15 + k) % 2**64 for x in iu]
        v = np.array(u, dtype=np.uint64).view(np.int64)
    elif dtype == "F32":
        v = np.array([(int(x) - 5) / 3.0 + k for x in i], dtype=np.float64).astype(np.float32)
    else:
        v = np.array([(int(x) - 5) / 3.0 + k for x in i], dtype=np.float64)
    return v.reshape(shape)


def fail(path, msg):
    sys.exit(f"check_safetensors: {path}: {msg}")


def read(path):
    """(metadata, [(name, dtype, shape, array)]) in header order, checking the layout."""
    raw = path.read_bytes()
    if len(raw) < 8:
        fail(path, "shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        fail(path, f"header length {n} past the end")
    if n % 8:
        fail(path, f"header length {n} is not a multiple of 8")
    text = raw[8 : 8 + n].decode("utf-8")
    body = text.rstrip(" ")
    if len(text) - len(body) >= 8:
        fail(path, "more padding than needed")

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            fail(path, f"duplicate keys in {keys}")
        return dict(pairs)  # keeps the order

    header = json.loads(body, object_pairs_hook=no_duplicates)
    if json.dumps(header, separators=(",", ":"), ensure_ascii=False) != body:
        fail(path, "header is not compact JSON")
    meta = header.pop("__metadata__", {})
    if meta and list(meta) != sorted(meta):
        fail(path, f"metadata keys not sorted: {list(meta)}")
    entries = list(header.items())
    for key, info in entries:
        if list(info) != ["dtype", "shape", "data_offsets"]:
            fail(path, f"{key}: keys {list(info)}")
    buf = raw[8 + n :]
    pos = 0
    tensors = []
    for name, info in entries:
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        if begin != pos:
            fail(path, f"{name}: starts at {begin}, the previous tensor ended at {pos}")
        npd = np.dtype(NUMPY[dtype])
        if (8 + n + begin) % npd.itemsize:
            fail(path, f"{name}: its data starts at file offset {8 + n + begin}, not a multiple of {npd.itemsize}")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * npd.itemsize:
            fail(path, f"{name}: {end - begin} bytes for {dtype}{shape}")
        arr = np.frombuffer(buf[begin:end], dtype=npd).reshape(shape)
        tensors.append((name, dtype, shape, arr))
        pos = end
    if pos != len(buf):
        fail(path, f"tensors cover {pos} of {len(buf)} buffer bytes")
    return meta, tensors


def check(path, want, want_meta):
    """want: the state's leaves in path order (leaf k filled with formula k)."""
    meta, tensors = read(path)
    if meta != want_meta:
        fail(path, f"metadata {meta}, want {want_meta}")
    got = [(name, dtype, shape) for name, dtype, shape, _ in tensors]
    ordered = sorted(want, key=lambda w: (-REFERENCE_RANK[w[1]], w[0].encode("utf-8")))
    if got != [tuple(w) for w in ordered]:
        fail(path, f"tensors {got},\n want {ordered}")
    leaf = {w[0]: k for k, w in enumerate(want)}
    for name, dtype, shape, arr in tensors:
        exp = expected(dtype, shape, leaf[name])
        if arr.dtype != exp.dtype or arr.shape != exp.shape or arr.tobytes() != exp.tobytes():
            fail(path, f"{name}: values {arr.ravel()[:8]}..., want {exp.ravel()[:8]}...")
    return len(tensors)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = Path(sys.argv[1])
    n = check(d / "state.safetensors", STATE, STATE_META)
    n += check(d / "bare.safetensors", BARE, {})
    print(f"safetensors: 2 files, {n} tensors read back by an independent reader (json + numpy)")


if __name__ == "__main__":
    main()
