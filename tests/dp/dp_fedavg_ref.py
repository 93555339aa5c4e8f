#!/usr/bin/env python3
"""Independent NumPy reference for programs/dp_fedavg.json (DP-FedAvg, fixed clipping).

Recomputes, with NumPy and the plain-Python Threefry of tests/golden/ref_random.py
(no fedvm code), what

    fedvm run programs/dp_fedavg.json --data train=F --rounds R --clients-per-round K --seed S
        --set epochs=1 --set noise_multiplier=0 --set clip=C --set expected_clients=M --set server_lr=ETA

computes: each round's clients (uniform without replacement), each client's one
epoch of SGD (its examples shuffled under random_fold_in(client key, 0), batches
of 10, learning rate 0.01, mean softmax cross-entropy), its update x_t - x_k as
one vector (w row-major, then b) clipped to norm C, the sum of the clipped
updates, x_{t+1} = x_t - ETA * sum / M (noise multiplier 0: no noise), and the
metrics of x_t on the round's clients' examples. Compares with fedvm's metrics
lines and its last checkpoint (tensors w and b) to a relative 2e-4 (float32
sums in another order differ in the last bits), and says how many updates the
clip changed (the check means something only if some were clipped and some
not).

    fedvm run ... --set noise_multiplier=Z (the same otherwise, R = 1)

is checked by --noise: from the zero model, one round gives x_1 = -ETA (sum + Z C n) / M
with n the round's standard normal vector, so n = -(M x_1 / ETA + sum) / (Z C), with
sum from the noiseless run's checkpoint: its 610 entries must look standard
normal (mean within 4 standard errors of 0, standard deviation within 10% of 1,
no entry beyond 5).

    fedvm run programs/dp_fedavg_adaptive.json ... --set noise_multiplier=0 --set clipped_count_stddev=0
        --set initial_clip=C --set target_quantile=GAMMA --set clip_lr=ETA_C (the rest as above)

is checked by --adaptive GAMMA ETA_C: the same rounds, each clipping to the round's C_t and then
C_{t+1} = C_t exp(-ETA_C (b - GAMMA)), b = (sum_k (b_k - 1/2)) / M + 1/2 with b_k = 1 for an
unclipped update (no noise on either sum); the metrics' "clip" is C_t, the checkpoint's tensors
model.w, model.b and clip.

usage: dp_fedavg_ref.py DATA.sqlite ROUNDS K SEED C M ETA METRICS.jsonl CHECKPOINT.safetensors [--adaptive GAMMA ETA_C]
       dp_fedavg_ref.py --noise Z C M ETA NOISELESS.safetensors NOISED.safetensors
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
sys.path.insert(0, os.path.join(HERE, "..", "train"))
sys.path.insert(0, os.path.join(HERE, ".."))
import ref_random  # noqa: E402
from reference import loss_and_grad, read  # noqa: E402
from reflib import compare_rounds, read_safetensors  # noqa: E402

F32 = np.float32


def flat(w, b):
    return np.concatenate([w.reshape(-1), b]).astype(F32)


def run(path, rounds, k, seed, clip, m, eta, adaptive=None):
    train = read(path, "federated_data")
    w, b = np.zeros((60, 10), F32), np.zeros(10, F32)
    lr = F32(0.01)
    lines, clipped, kept = [], 0, 0
    for r in range(1, rounds + 1):
        picked = ref_random.sample_clients(seed, r, len(train), k)
        total = np.zeros(610, F32)
        bits = F32(0)
        loss_sum = correct = examples = 0.0
        for c in picked:
            x, y = train[c]
            n = len(y)
            logits = x @ w + b
            loss_sum += float(loss_and_grad(w, b, x, y)[0]) * n
            correct += float((logits.argmax(axis=1) == y).sum())
            examples += n
            perm = ref_random.permutation(ref_random.fold_in(ref_random.client_key(seed, r, c), 0), n)
            xs, ys = x[perm], y[perm]
            cw, cb = w.copy(), b.copy()
            for lo in range(0, n, 10):
                _, gw, gb = loss_and_grad(cw, cb, xs[lo:lo + 10], ys[lo:lo + 10])
                cw, cb = cw - lr * gw, cb - lr * gb
            g = flat(w - cw, b - cb)
            norm = np.sqrt(np.sum(g * g, dtype=F32), dtype=F32)
            scale = min(F32(1), F32(clip) / max(norm, F32(1e-12)))
            clipped, kept = clipped + (norm > F32(clip)), kept + (norm <= F32(clip))
            bits = bits + (F32(norm <= F32(clip)) - F32(0.5))
            total = total + g * F32(scale)
        lines.append({"round": r, "train": {"loss": loss_sum / examples, "accuracy": correct / examples,
                                            "examples": examples}})
        if adaptive:
            lines[-1]["train"]["clip"] = float(clip)
        new = flat(w, b) - F32(eta) * (total / F32(m))
        w, b = new[:600].reshape(60, 10), new[600:]
        if adaptive:
            gamma, eta_c = adaptive
            b_tilde = bits / F32(m) + F32(0.5)
            clip = F32(clip) * np.exp(-(F32(eta_c) * (b_tilde - F32(gamma))), dtype=F32)
    return lines, w, b, clipped, kept, clip


def close(a, b):
    return abs(a - b) <= 2e-4 * max(1.0, abs(b))


def main(argv):
    if len(argv) == 8 and argv[1] == "--noise":
        z, clip, m, eta = (float(v) for v in argv[2:6])
        t0, _ = read_safetensors(argv[6])
        t1, _ = read_safetensors(argv[7])
        x0, x1 = flat(t0["w"], t0["b"]), flat(t1["w"], t1["b"])
        total = -F32(m) * x0 / F32(eta)  # the noiseless run's sum, from x_1 = -ETA sum / M
        n = (-(F32(m) * x1 / F32(eta)) - total) / F32(z * clip)
        mean, std = float(n.mean()), float(n.std())
        ok = abs(mean) < 4 / np.sqrt(n.size) and abs(std - 1) < 0.1 and float(np.abs(n).max()) < 5
        print("dp_fedavg noise: %d entries, mean %.4f, standard deviation %.4f, largest %.3f: %s"
              % (n.size, mean, std, float(np.abs(n).max()), "ok" if ok else "NOT standard normal"))
        return 0 if ok else 1
    adaptive = None
    if len(argv) == 13 and argv[10] == "--adaptive":
        adaptive = (float(argv[11]), float(argv[12]))
    elif len(argv) != 10:
        print(__doc__)
        return 2
    path, rounds, k, seed = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    clip, m, eta = float(argv[5]), float(argv[6]), float(argv[7])
    want, w, b, clipped, kept, last_clip = run(path, rounds, k, seed, clip, m, eta, adaptive)
    differ = compare_rounds(argv[8], want, close, "dp_fedavg reference")
    for line in differ:
        print(line)
    bad = len(differ)
    tensors, _ = read_safetensors(argv[9])
    if adaptive:
        tensors = {"w": tensors.get("model.w"), "b": tensors.get("model.b"), "clip": tensors.get("clip")}
        if tensors["clip"] is None or not close(float(tensors["clip"]), float(last_clip)):
            print("clip norm after the last round: fedvm %r, reference %r" % (tensors["clip"], last_clip))
            bad += 1
    for name, ref in (("w", w), ("b", b)):
        err = float(np.abs(tensors[name] - ref).max())
        if tensors[name].shape != ref.shape or err > 2e-4 * max(1.0, float(np.abs(ref).max())):
            print("model %s differs from the reference by %g" % (name, err))
            bad += 1
    if not clipped or not kept:
        print("the clip changed %d updates and left %d: choose C between their norms" % (clipped, kept))
        bad += 1
    print("dp_fedavg reference: %d rounds of %d clients agree (%d updates clipped, %d not)%s"
          % (rounds, k, clipped, kept, "" if not bad else ", except %d values" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
