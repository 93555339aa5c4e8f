#!/usr/bin/env python3
"""check_xdev_update.py PLAN BROADCAST UPDATE [LINEAR_CLIENTS.json]

Reads a cross-device update file that 'fedvm device' wrote, with nothing of
fedvm's but the files: Python's json, hashlib and struct, and NumPy.

- The safetensors header: an 8-byte little-endian length, a JSON object,
  the data buffer covered exactly by the tensors in header order.
- The tensors are exactly those the plan's client outputs list
  (client.outputs[*].tensors), with their dtypes and shapes.
- The metadata: fedvm.kind "update", fedvm.plan the SHA-256 of the plan
  file's bytes, fedvm.round the broadcast's round, fedvm.client one of the
  clients the broadcast selected.
- Secure-sum inputs are reduced modulo the plan's modulus (every element in
  [0, modulus)) or within the secure sum's max_input (in [0, max_input]).
- With LINEAR_CLIENTS (programs/fedsgd_linear.json's data), the update's
  values are recomputed by hand: the client's sums of 0.5 * (x.w + b - y)^2
  and of its gradient, from the broadcast's model, in float32.
"""
import hashlib
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U32": np.uint32, "U8": np.uint8,
          "BOOL": np.bool_}


def read(path):
    raw = open(path, "rb").read()
    if len(raw) < 8:
        sys.exit("%s: shorter than a safetensors header" % path)
    n = struct.unpack("<Q", raw[:8])[0]
    if 8 + n > len(raw):
        sys.exit("%s: header length %d past the end of the file" % (path, n))
    head = json.loads(raw[8:8 + n].decode("utf-8"), object_pairs_hook=lambda kv: dict(kv))
    meta = head.pop("__metadata__", {})
    data = raw[8 + n:]
    at, tensors = 0, {}
    for name, e in head.items():
        begin, end = e["data_offsets"]
        if begin != at:
            sys.exit("%s: tensor %s starts at %d, expected %d" % (path, name, begin, at))
        dt = DTYPES[e["dtype"]]
        count = int(np.prod(e["shape"], dtype=np.int64))
        if end - begin != count * np.dtype(dt).itemsize:
            sys.exit("%s: tensor %s has %d bytes for shape %s" % (path, name, end - begin, e["shape"]))
        tensors[name] = (e["dtype"], e["shape"], np.frombuffer(data[begin:end], dtype=dt).reshape(e["shape"]))
        at = end
    if at != len(data):
        sys.exit("%s: the tensors cover %d of %d data bytes" % (path, at, len(data)))
    return meta, tensors


def main():
    plan_path, bc_path, up_path = sys.argv[1:4]
    plan_bytes = open(plan_path, "rb").read()
    plan = json.loads(plan_bytes)
    bmeta, btensors = read(bc_path)
    meta, tensors = read(up_path)
    want = {}
    for out in plan["client"]["outputs"]:
        for t in out["tensors"]:
            want[t["name"]] = (t["dtype"], t["shape"])
    got = {k: v[:2] for k, v in tensors.items()}
    if got != want:
        sys.exit("tensors %s, the plan lists %s" % (got, want))
    checks = {"fedvm.kind": "update", "fedvm.plan": hashlib.sha256(plan_bytes).hexdigest(),
              "fedvm.round": bmeta["fedvm.round"]}
    for k, v in checks.items():
        if meta.get(k) != v:
            sys.exit("metadata %s is %r, expected %r" % (k, meta.get(k), v))
    client = int(meta["fedvm.client"])
    if client not in [int(c) for c in bmeta["fedvm.clients"].split(",")]:
        sys.exit("client %d was not selected" % client)
    for out in plan["client"]["outputs"]:
        if out["aggregation"] == "secure_sum":  # reduced into [0, modulus), or in [0, max_input]
            top = out["modulus"] - 1 if "modulus" in out else out.get("max_input", 2 ** 63 - 1)
            for t in out["tensors"]:
                v = tensors[t["name"]][2].astype(np.int64)
                if v.min() < 0 or v.max() > top:
                    sys.exit("%s holds %s, outside [0, %d]" % (t["name"], v.tolist(), top))
    if len(sys.argv) > 4:
        examples = json.load(open(sys.argv[4]))[client]
        w, b = btensors["b0.w"][2], btensors["b0.b"][2]
        gw, gb, loss, n = np.zeros(2, np.float32), np.float32(0), np.float32(0), np.float32(0)
        for e in examples:
            x, y = np.array(e["x"], np.float32), np.float32(e["y"])
            err = np.float32(np.float32(x[0] * w[0] + x[1] * w[1]) + b - y)
            gw, gb = gw + err * x, gb + err
            loss, n = loss + np.float32(0.5) * (err * err), n + np.float32(1)
        mine = {"updates.u0.gw": gw, "updates.u0.gb": gb, "updates.u0.loss": loss, "updates.u0.n": n}
        for k, v in mine.items():
            if not np.allclose(tensors[k][2], v, rtol=1e-6, atol=1e-6):
                sys.exit("%s is %s, by hand %s" % (k, tensors[k][2].tolist(), np.asarray(v).tolist()))
    print("%s: %d tensors, round %s, client %d: ok" % (up_path, len(tensors), meta["fedvm.round"], client))


main()
