#!/usr/bin/env python3
"""Independent reference for tests/train/softmax.json's training run.

Recomputes, with NumPy and the plain-Python Threefry of tests/golden/ref_random.py
(no fedvm code), what `fedvm run tests/train/softmax.json --data train=F
--data test=F:test --rounds R --clients-per-round K --seed S` computes: each
round's clients (uniform without replacement from the seed and the round),
each client's key, its shuffled examples, one epoch of SGD with batch 10 and
learning rate 0.01 on the mean softmax cross-entropy, the example-weighted
mean of the client models; then the metrics of every round and the
evaluation after the last. Reads the FedJAX file with sqlite3, zlib and
msgpack as FedJAX does. Compares with fedvm's JSON lines (given as a file) to
a relative tolerance: float32 sums in another order differ in the last bits.

usage: reference.py DATA.sqlite ROUNDS K SEED FEDVM_OUTPUT.jsonl [CHECKPOINT.safetensors]

With a checkpoint (fedvm's state after the last round), its tensors "w" and
"b" are read with json and NumPy from the safetensors layout (8-byte
little-endian header length, JSON header, data) and compared with the
reference model.
"""
import json
import os
import sqlite3
import sys
import zlib

import msgpack
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
import ref_random  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reflib import read_safetensors  # noqa: E402


def ndarray(code, data):
    assert code == 1, code
    shape, dtype, buf = msgpack.unpackb(data, raw=True)
    return np.frombuffer(buf, dtype=np.dtype(dtype.decode())).reshape(shape)


def read(path, table):
    db = sqlite3.connect(path)
    rows = db.execute("SELECT data FROM %s ORDER BY rowid" % table).fetchall()
    out = []
    for (blob,) in rows:
        cols = msgpack.unpackb(zlib.decompress(blob), ext_hook=ndarray, raw=False)
        out.append((cols["x"].astype(np.float32), cols["y"].astype(np.int32)))
    return out


def loss_and_grad(w, b, x, y):
    z = x @ w + b
    z = z - z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1, keepdims=True))
    logp = z - lse
    n = np.float32(len(y))
    loss = -logp[np.arange(len(y)), y].mean(dtype=np.float32)
    dz = np.exp(logp)
    dz[np.arange(len(y)), y] -= 1
    dz /= n
    return loss, x.T @ dz, dz.sum(axis=0)


def accuracy(w, b, x, y):
    loss, _, _ = loss_and_grad(w, b, x, y)
    return float(loss), float(((x @ w + b).argmax(axis=1) == y).mean())


def main():
    path, rounds, k, seed, fedvm_out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    train, test = read(path, "federated_data"), read(path, "federated_data_test")
    xt = np.concatenate([c[0] for c in test])
    yt = np.concatenate([c[1] for c in test])
    w, b = np.zeros((60, 10), np.float32), np.zeros(10, np.float32)
    lr = np.float32(0.01)
    want = []
    for r in range(1, rounds + 1):
        picked = ref_random.sample_clients(seed, r, len(train), k)
        models, ns, losses = [], [], []
        for c in picked:
            x, y = train[c]
            perm = ref_random.permutation(ref_random.client_key(seed, r, c), len(y))
            xs, ys = x[perm], y[perm]
            cw, cb = w.copy(), b.copy()
            for lo in range(0, len(ys), 10):
                _, gw, gb = loss_and_grad(cw, cb, xs[lo:lo + 10], ys[lo:lo + 10])
                cw, cb = cw - lr * gw, cb - lr * gb
            models.append((cw, cb))
            ns.append(float(len(y)))
            losses.append(float(loss_and_grad(w, b, x, y)[0]))
        total = sum(ns)
        w = sum(n * m[0] for n, m in zip(ns, models)) / np.float32(total)
        b = sum(n * m[1] for n, m in zip(ns, models)) / np.float32(total)
        want.append({"round": r, "train": {"loss": sum(n * l for n, l in zip(ns, losses)) / total, "examples": total}})
    tl, ta = accuracy(w, b, xt, yt)
    want[-1]["eval"] = {"loss": tl, "accuracy": ta}

    with open(fedvm_out) as f:
        got = [json.loads(line) for line in f if line.strip()]
    bad = 0
    if len(got) != len(want):
        print("reference: fedvm printed %d rounds, expected %d" % (len(got), len(want)))
        return 1
    for g, e in zip(got, want):
        for part in ("train", "eval"):
            for key, v in e.get(part, {}).items():
                gv = g.get(part, {}).get(key)
                if gv is None or abs(gv - v) > 2e-4 * max(1.0, abs(v)):
                    print("reference: round %d %s.%s: fedvm %r, reference %r" % (e["round"], part, key, gv, v))
                    bad += 1
    if len(sys.argv) > 6:
        tensors, meta = read_safetensors(sys.argv[6])
        if sorted(tensors) != ["b", "w"] or meta.get("fedvm.round") != str(rounds) or meta.get("fedvm.seed") != str(seed):
            print("reference: checkpoint holds %s, metadata %r" % (sorted(tensors), meta))
            bad += 1
        else:
            for name, ref in (("w", w), ("b", b)):
                err = np.abs(tensors[name] - ref).max()
                if tensors[name].shape != ref.shape or err > 2e-4 * max(1.0, np.abs(ref).max()):
                    print("reference: checkpoint tensor %s differs from the reference by %g" % (name, err))
                    bad += 1
    print("training reference: %d rounds of %d clients agree%s" % (rounds, k, "" if not bad else " except %d values" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
