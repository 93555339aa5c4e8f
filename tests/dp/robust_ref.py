#!/usr/bin/env python3
"""Independent NumPy reference for programs/fedavg_robust.json (FedAvg with zeroing and clipping).

Recomputes, with NumPy and the plain-Python Threefry of tests/golden/ref_random.py
(no fedvm code), what

    fedvm run programs/fedavg_robust.json --data train=F --rounds R --seed S --set epochs=1
        --set zeroing_norm=Z --set clipping_norm=C

computes with every client in every round: each client's one epoch of SGD (its
examples shuffled under random_fold_in(client key, 0), batches of 10, learning
rate 0.01), its update x_t - x_k as one vector (w row-major, then b), replaced
by zeros when its L2 norm is above Z or not finite, then clipped to norm C; the
example-weighted mean of these, x_{t+1} = x_t - mean; and the metrics (loss,
accuracy, examples of x_t on the clients' examples, how many updates were
zeroed and clipped). Compares with fedvm's metrics lines and its last
checkpoint to a relative 2e-4.

usage: robust_ref.py DATA.sqlite ROUNDS SEED Z C METRICS.jsonl CHECKPOINT.safetensors
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dp_fedavg_ref import F32, close, flat, loss_and_grad, read, ref_random  # noqa: E402
from reflib import compare_rounds, read_safetensors  # noqa: E402


def main(argv):
    if len(argv) != 8:
        print(__doc__)
        return 2
    path, rounds, seed, zero_at, clip = argv[1], int(argv[2]), int(argv[3]), float(argv[4]), float(argv[5])
    train = read(path, "federated_data")
    w, b = np.zeros((60, 10), F32), np.zeros(10, F32)
    lr = F32(0.01)
    want = []
    with np.errstate(all="ignore"):  # the malicious client's numbers may overflow
        for r in range(1, rounds + 1):
            num = np.zeros(610, F32)
            den = F32(0)
            loss_sum = correct = examples = zeroed = clipped = 0.0
            for c in range(len(train)):
                x, y = train[c]
                n = len(y)
                loss_sum += float(loss_and_grad(w, b, x, y)[0]) * n
                correct += float(((x @ w + b).argmax(axis=1) == y).sum())
                examples += n
                perm = ref_random.permutation(ref_random.fold_in(ref_random.client_key(seed, r, c), 0), n)
                xs, ys = x[perm], y[perm]
                cw, cb = w.copy(), b.copy()
                for lo in range(0, n, 10):
                    _, gw, gb = loss_and_grad(cw, cb, xs[lo:lo + 10], ys[lo:lo + 10])
                    cw, cb = cw - lr * gw, cb - lr * gb
                g = flat(w - cw, b - cb)
                norm = np.sqrt(np.sum(g * g, dtype=F32), dtype=F32)
                if not norm <= F32(zero_at):
                    g, norm, zeroed = np.zeros(610, F32), F32(0), zeroed + 1
                if norm > F32(clip):
                    g, clipped = g * (F32(clip) / norm), clipped + 1
                num = num + F32(n) * g
                den = den + F32(n)
            want.append({"round": r, "train": {"loss": loss_sum / examples, "accuracy": correct / examples,
                                                "examples": examples, "zeroed": zeroed, "clipped": clipped}})
            new = flat(w, b) - num / den
            w, b = new[:600].reshape(60, 10), new[600:]
    differ = compare_rounds(argv[6], want, close, "robust reference")
    for line in differ:
        print(line)
    bad = len(differ)
    tensors, _ = read_safetensors(argv[7])
    for name, ref in (("w", w), ("b", b)):
        err = float(np.abs(tensors[name] - ref).max())
        if tensors[name].shape != ref.shape or not err <= 2e-4 * max(1.0, float(np.abs(ref).max())):
            print("model %s differs from the reference by %g" % (name, err))
            bad += 1
    z = sum(e["train"]["zeroed"] for e in want)
    c = sum(e["train"]["clipped"] for e in want)
    print("robust reference: %d rounds of %d clients agree (%d updates zeroed, %d clipped)%s"
          % (rounds, len(train), z, c, "" if not bad else ", except %d values" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
