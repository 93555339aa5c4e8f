"""reflib.py - what the tests' NumPy references share: reading fedvm's safetensors files and
comparing a reference's figures with fedvm's. Written from the file format (format/SPEC.md,
"Checkpoints"), not from fedvm's code, like the references that use it.

A reference in a folder under tests/ imports it after
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
"""
import json

import numpy as np

# safetensors dtype names and their little-endian NumPy types
DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U32": "<u4", "U8": "u1"}


def parse_safetensors(raw):
    """The tensors of a safetensors blob as {name: array (its stored dtype, read-only)} and its
    __metadata__: an 8-byte little-endian header length, the JSON header, the data."""
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        lo, hi = e["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return out, meta


def read_safetensors(path):
    """parse_safetensors of the file at path."""
    with open(path, "rb") as f:
        return parse_safetensors(f.read())


def rel_diff(got, want):
    """The largest absolute difference relative to the largest magnitude of want (at least 1e-6)."""
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / max(1e-6, float(np.max(np.abs(want)))))


def close_rel(name, got, want, fails, tol=1e-4):
    """Appends to fails when got is not want to a relative tol (rel_diff); returns the difference."""
    err = rel_diff(got, want)
    if not err < tol:
        fails.append("%s: relative difference %.3g" % (name, err))
    return err


def compare_rounds(metrics_path, want, close, what):
    """Compares every round's train metrics of fedvm's metrics file (JSON lines) with want (a list
    of {"round": r, "train": {key: value}}), value by value with close(got, want). Returns the
    differences, one line each; a different count of rounds is one line."""
    got = [json.loads(line) for line in open(metrics_path) if line.strip()]
    got = [g for g in got if "round" in g]
    if len(got) != len(want):
        return ["%s: %d rounds in the metrics, expected %d" % (what, len(got), len(want))]
    bad = []
    for g, e in zip(got, want):
        for key, v in e["train"].items():
            gv = g["train"].get(key)
            if gv is None or not close(gv, v):
                bad.append("round %d train.%s: fedvm %r, reference %r" % (e["round"], key, gv, v))
    return bad
