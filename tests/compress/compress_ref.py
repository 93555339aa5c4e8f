#!/usr/bin/env python3
"""Independent NumPy reference for programs/fedavg_quantized.json, fedavg_topk.json and fedavg_trimmed.json.

Recomputes, with NumPy and the plain-Python Threefry of tests/golden/ref_random.py
(no fedvm code), what

    fedvm run programs/fedavg_quantized.json --data train=F --rounds R --seed S --set epochs=E --set bits=B
    fedvm run programs/fedavg_topk.json      --data train=F --rounds R --seed S --set epochs=E --set k=K
    fedvm run programs/fedavg_trimmed.json   --data train=F --rounds R --seed S --set epochs=E

compute with every client in every round: each client's E epochs of SGD (epoch e
over its examples shuffled under random_fold_in(client key, e), batches of 10,
learning rate 0.01), its update x_t - x_k as one vector (w row-major, then b), and

- quantized: w's and b's parts each quantized to B bits between their minimum and
  maximum, q = min(floor((g - lo) / span * L + u), L), L = 2^B - 1, decoded as
  q / L * span + lo, with u = jax.random.uniform(random_fold_in(client key, 2^32 - 1), (610,))
  (its Threefry words written out here from JAX's definition);
- top-k: a = update + e_c (the client's error, zero at first), the K entries of
  largest |a| sent (a stable descending sort: ties to the lower index), e_c = a - sent;

then x_{t+1} = x_t - sum_k n_k s_k / sum_k n_k; or

- trimmed: updates that are not finite zeroed, x_{t+1} = x_t - m with m, coordinate by
  coordinate, the plain mean of the clients' values sorted, without the BETA smallest and
  the BETA largest (zero when no value is left).
 The bytes are counted by hand from
the encoded forms (quantized: ceil(600 B / 8) + ceil(10 B / 8) + 16 a client; top-k:
8 K; down: 4 * 610 a client). Compares every round's metrics (relative 1e-4), the
last checkpoint (the largest difference relative to the largest entry, 1e-4) and,
for top-k, the clients' errors in client_states.sqlite.

usage: compress_ref.py quantized BITS DATA.sqlite ROUNDS SEED EPOCHS METRICS.jsonl CHECKPOINT.safetensors
       compress_ref.py trimmed BETA DATA.sqlite ROUNDS SEED EPOCHS METRICS.jsonl CHECKPOINT.safetensors
       compress_ref.py topk K DATA.sqlite ROUNDS SEED EPOCHS METRICS.jsonl CHECKPOINT.safetensors STATES.sqlite
"""
import json
import os
import sqlite3
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "dp"))
sys.path.insert(0, os.path.join(HERE, ".."))
from dp_fedavg_ref import F32, flat, loss_and_grad, read, ref_random  # noqa: E402
from reflib import compare_rounds, parse_safetensors, read_safetensors, rel_diff  # noqa: E402

TOL = 1e-4


def uniform(key, m):
    """jax.random.uniform(key, (m,), float32) with classic Threefry bits: hash call i < h = ceil(m/2)
    encrypts the counters (i, h + i) (a counter >= m reads as 0), giving words i and h + i."""
    h = (m + 1) // 2
    words = [0] * (2 * h)
    for i in range(h):
        hi = h + i if h + i < m else 0
        words[i], words[h + i] = ref_random.threefry2x32(key, [i, hi])
    w = np.array(words[:m], dtype=np.uint32)
    return ((w >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32) - F32(1)


def quantize(x, u, bits):
    lo, hi = x.min(), x.max()
    diff = F32(hi - lo)
    span = F32(1) if diff == 0 else diff
    levels = F32(2.0 ** bits - 1)
    q = np.minimum(np.floor(((x - lo) / span * levels + u).astype(F32)), levels).astype(F32)
    return (q / levels * span + lo).astype(F32)


def top_k(a, k):
    keep = np.argsort(-np.abs(a), kind="stable")[:k]
    s = np.zeros_like(a)
    s[keep] = a[keep]
    return s


def close(a, b):
    return abs(a - b) <= TOL * max(1e-6, abs(b))


def main(argv):
    if len(argv) not in (9, 10) or argv[1] not in ("quantized", "topk", "trimmed") or (argv[1] == "topk") != (len(argv) == 10):
        print(__doc__)
        return 2
    algo, h = argv[1], int(argv[2])
    path, rounds, seed, epochs = argv[3], int(argv[4]), int(argv[5]), int(argv[6])
    train = read(path, "federated_data")
    w, b = np.zeros((60, 10), F32), np.zeros(10, F32)
    lr = F32(0.01)
    errors = {}
    want = []
    np.seterr(all="ignore")  # a malicious client's numbers may overflow
    for r in range(1, rounds + 1):
        updates = []
        num = np.zeros(610, F32)
        den = F32(0)
        loss_sum = correct = examples = up = down = norms = 0.0
        for c in range(len(train)):
            x, y = train[c]
            n = len(y)
            loss_sum += float(loss_and_grad(w, b, x, y)[0]) * n
            correct += float(((x @ w + b).argmax(axis=1) == y).sum())
            examples += n
            ck = ref_random.client_key(seed, r, c)
            cw, cb = w.copy(), b.copy()
            for e in range(epochs):
                perm = ref_random.permutation(ref_random.fold_in(ck, e), n)
                xs, ys = x[perm], y[perm]
                for lo in range(0, n, 10):
                    _, gw, gb = loss_and_grad(cw, cb, xs[lo:lo + 10], ys[lo:lo + 10])
                    cw, cb = cw - lr * gw, cb - lr * gb
            g = flat(w - cw, b - cb)
            if algo == "trimmed":
                updates.append(g if np.all(np.isfinite(g)) else np.zeros(610, F32))
                continue
            if algo == "quantized":
                u = uniform(ref_random.fold_in(ck, 0xFFFFFFFF), 610)
                s = np.concatenate([quantize(g[:600], u[:600], h), quantize(g[600:], u[600:], h)])
                up += (600 * h + 7) // 8 + (10 * h + 7) // 8 + 16
            else:
                a = (g + errors.get(c, np.zeros(610, F32))).astype(F32)
                s = top_k(a, h)
                errors[c] = (a - s).astype(F32)
                norms += float(np.sqrt(np.sum(errors[c] * errors[c], dtype=F32)))
                up += 8 * min(h, 610)
            down += 4 * 610
            num = num + F32(n) * s
            den = den + F32(n)
        metrics = {"loss": loss_sum / examples, "accuracy": correct / examples, "examples": examples}
        if algo == "trimmed":
            metrics["clients"] = len(updates)
            ranked = np.sort(np.array(updates, dtype=np.float64), axis=0)
            kept = ranked[h:len(updates) - h]
            mean = kept.mean(axis=0).astype(F32) if len(kept) else np.zeros(610, F32)
            new = flat(w, b) - mean
            w, b = new[:600].reshape(60, 10), new[600:]
            want.append({"round": r, "train": metrics})
            continue
        metrics.update({"bytes_up": up, "bytes_down": down})
        if algo == "topk":
            metrics["error_norm"] = norms
        want.append({"round": r, "train": metrics})
        new = flat(w, b) - num / den
        w, b = new[:600].reshape(60, 10), new[600:]
    bad = compare_rounds(argv[7], want, close, "compress reference")
    ckpt, _ = read_safetensors(argv[8])
    worst = 0.0
    for name, ref in (("w", w), ("b", b)):
        err = rel_diff(ckpt[name], ref) if ckpt[name].shape == ref.shape else float("inf")
        worst = max(worst, err)
        if not err <= TOL:
            bad.append("model %s: relative difference %.3g" % (name, err))
    if algo == "topk":
        latest = {}
        for c, _, blob in sqlite3.connect(argv[9]).execute(
                "SELECT client, round, state FROM client_state ORDER BY client, round"):
            latest[c] = list(parse_safetensors(blob)[0].values())[0].reshape(-1)
        if sorted(latest) != sorted(errors):
            bad.append("the store holds clients %s, the reference %s" % (sorted(latest), sorted(errors)))
        for c in errors:
            if c in latest:
                err = rel_diff(latest[c], errors[c])
                worst = max(worst, err)
                if not err <= TOL:
                    bad.append("client %d error: relative difference %.3g" % (c, err))
    for line in bad[:40]:
        print(line)
    last = want[-1]["train"]
    sizes = ", bytes up %g and down %g a round" % (last["bytes_up"], last["bytes_down"]) if "bytes_up" in last else ""
    print("compress reference (%s %s=%d): %d rounds of %d clients%s, largest relative difference %.2g: %s"
          % (algo, {"quantized": "bits", "topk": "k", "trimmed": "beta"}[algo], h, rounds, len(train), sizes, worst,
             "agree" if not bad else "%d values differ" % len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
