#!/usr/bin/env python3
"""Independent reference for fedvm's golden programs.

Each case in tests/golden/*.json names a program, its arguments and the
expected result. The expected results come from this file: plain Python and
NumPy (no fedvm code, no IR interpretation) computing what each program
means, from the same data files. Where a program's float results depend on
the order of a sum (tensor_sums.json), they are NumPy's own np.sum and
np.mean on float32 arrays, whose order fedvm's sum and mean follow. Run with
--check (what `make test` does) to verify that the committed expectations
equal this reference, or --write to regenerate them.
"""
import functools
import json
import math
import operator
import os
import sys

import numpy as np

import ref_random

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
CASES = os.path.dirname(os.path.abspath(__file__))


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return json.load(f)


def sensor(readings, threshold):
    fractions = [sum(1 for r in c if r > threshold) / len(c) for c in readings]
    return sum(fractions) / len(fractions)


def histogram(values):
    h = [0] * 10
    for client in values:
        for v in client:
            if 0 <= v < 10:
                h[v] += 1
    return h


def secure_sum(counters, bitwidth):
    m = 1 << bitwidth
    return [sum(c[i] % m for c in counters) % m for i in range(len(counters[0]))]


def secure_sums(x, big, w, c, d):
    """Modular sums: each client's value taken into [0, m) (Python's %, floored like tf.math.mod: -5 % 97 is
    92), then the sum modulo m; the secure sum with max_input: every value in [0, max_input], the exact sum."""
    def modular(values, m):
        return [sum(v[i] % m for v in values) % m for i in range(len(values[0]))]
    assert all(0 <= v <= 200 for row in c for v in row) and all(0 <= v <= 200 for v in d)
    return {"residues": modular(x, 97), "wide": modular(big, 2 ** 63 - 1), "words": modular(w, 2 ** 32),
            "exact": {"c": [sum(row[i] for row in c) for i in range(2)], "d": sum(d)}}


def all_equal_map(w, c, xs):
    """v = c * w, one value for every client; the loss sums v . x over the clients, its gradient in w is
    c * sum(x); the sum over clients of v is n * v."""
    v = [c * wi for wi in w]
    loss = sum(v[0] * x[0] + v[1] * x[1] for x in xs)
    grad = [c * sum(x[i] for x in xs) for i in range(2)]
    return {"loss_and_grad": {"value": loss, "grad": grad}, "copies": [len(xs) * vi for vi in v]}


def literals_fields(data, state):
    """Per client: c = clip(1 - 0.5 x, 0, 1) in float32; kept = c where x > 2, else -1; m = max(3 n - 1, 0);
    r = n mod 4, floored (the divisor's sign, as NumPy's %). Summed over clients; the server's
    2 (w + sum kept) + shift."""
    f = np.float32
    kept_sum = np.zeros(3, f)
    m_sum, r_sum = 0, 0
    for c in data:
        x = np.array(c["x"], f)
        clipped = np.clip(f(1) - x * f(0.5), f(0), f(1))
        kept_sum = kept_sum + np.where(x > f(2), clipped, f(-1))
        m_sum += max(3 * c["n"] - 1, 0)
        r_sum += c["n"] % 4
    w = np.array(state["w"], f)
    nxt = f(2) * (w + kept_sum) + f(state["shift"])
    return {"next": [float(v) for v in nxt], "m_sum": m_sum, "r_sum": r_sum}


def mean_variance(xs):
    n = len(xs)
    mean = sum(xs) / n
    return {"mean": mean, "variance": sum((x - mean) ** 2 for x in xs) / n}


def temperature_range(clients):
    means = [sum(c) / len(c) for c in clients]
    pooled = sum(sum(c) for c in clients) / sum(len(c) for c in clients)
    return {"coldest": min(means), "warmest": max(means), "overall": pooled}


def fedsgd_linear(clients, rounds, lr=0.1):
    w, b = [0.0, 0.0], 0.0
    metrics = []
    for _ in range(rounds):
        gw, gb, loss, n = [0.0, 0.0], 0.0, 0.0, 0
        for client in clients:
            for e in client:
                err = e["x"][0] * w[0] + e["x"][1] * w[1] + b - e["y"]
                gw = [gw[0] + err * e["x"][0], gw[1] + err * e["x"][1]]
                gb += err
                loss += 0.5 * err * err
                n += 1
        metrics.append({"loss": loss / n})
        w = [w[0] - lr * gw[0] / n, w[1] - lr * gw[1] / n]
        b = b - lr * gb / n
    return {"metrics": metrics, "state": {"w": w, "b": b}}


def fedsgd_logistic(clients, rounds, lr=0.5):
    """FedSGD on the pooled mean binary cross-entropy; the gradient by hand:
    d/dw = mean((p - y) x), d/db = mean(p - y)."""
    examples = [e for c in clients for e in c]
    n = len(examples)
    w, b = [0.0, 0.0], 0.0
    metrics = []
    for _ in range(rounds):
        loss, gw, gb = 0.0, [0.0, 0.0], 0.0
        for e in examples:
            z = e["x"][0] * w[0] + e["x"][1] * w[1] + b
            p = 1 / (1 + math.exp(-z))
            loss += -(e["y"] * math.log(p) + (1 - e["y"]) * math.log(1 - p))
            gw = [gw[0] + (p - e["y"]) * e["x"][0], gw[1] + (p - e["y"]) * e["x"][1]]
            gb += p - e["y"]
        metrics.append({"loss": loss / n})
        w = [w[0] - lr * gw[0] / n, w[1] - lr * gw[1] / n]
        b = b - lr * gb / n
    return {"metrics": metrics, "state": {"w": w, "b": b}}


def drjax_mean_loss(w, xs):
    """DrJAX's example: mean over clients of 0.5 (x.w - 1)^2, its gradient, and the loss after a step of 0.01."""
    def loss(w):
        return sum(0.5 * (x[0] * w[0] + x[1] * w[1] - 1) ** 2 for x in xs) / len(xs)
    g = [sum((x[0] * w[0] + x[1] * w[1] - 1) * x[i] for x in xs) / len(xs) for i in range(2)]
    w2 = [w[0] - 0.01 * g[0], w[1] - 0.01 * g[1]]
    return {"loss": loss(w), "grad": g, "loss_after_step": loss(w2)}


def jvp_sum_loss(w, xs, t):
    """The sum over clients of 0.5 (x.w - 1)^2 and its derivative along t, sum_k (x_k.w - 1)(x_k.t)."""
    def dot(a, b):
        return sum(p * q for p, q in zip(a, b))
    errors = [dot(x, w) - 1.0 for x in xs]
    return {"value": sum(0.5 * e * e for e in errors), "tangent": sum(e * dot(x, t) for e, x in zip(errors, xs))}


def shuffle_repeat(xs, rows, key):
    """sequence_shuffle is Fisher-Yates over the key's Threefry stream; sequence_repeat concatenates copies."""
    s = [xs[i] for i in ref_random.permutation(key, len(xs))]
    return {"shuffled": s, "repeated": s * 3, "rows": [rows[i] for i in ref_random.permutation(key, len(rows))],
            "empty": 0}


def fold_sum(vectors):
    """Clients' vectors added entry by entry from the first client on (never from +0.0), as aggregations fold."""
    return [functools.reduce(operator.add, col) for col in zip(*vectors)]


def signed_zeros(x, w):
    """federated_sum, _mean and _weighted_mean keep the sign of a zero: -0.0 + -0.0 is -0.0."""
    s = fold_sum(x)
    ws = fold_sum([[v * wi for v in xi] for xi, wi in zip(x, w)])
    return {"sum": s, "mean": [v / len(x) for v in s], "weighted_mean": [v / sum(w) for v in ws]}


def label_filter(data, label, classes=4, take=2, lo=0.0, hi=3.0):
    """Per client: the examples of the label, the first `take` of them summed and clipped to [lo, hi], the rest
    counted, and every label counted (a label outside [0, classes) nowhere); summed over clients, with the
    cumulative counts."""
    first_x, others, hist = [0.0, 0.0], 0.0, [0.0] * classes
    for client in data:
        kept = [e for e in client if e["y"] == label]
        s = [sum(e["x"][i] for e in kept[:take]) for i in range(2)]
        first_x = [a + min(max(v, lo), hi) for a, v in zip(first_x, s)]
        others += len(kept[take:])
        for e in client:
            if 0 <= e["y"] < classes:
                hist[e["y"]] += 1
    cumulative = [sum(hist[:i + 1]) for i in range(classes)]
    return {"first_x": first_x, "others": others, "hist": hist, "cumulative": cumulative, "classes": classes}


def tensor_sums():
    """np.sum and np.mean of the program's float32 (and float64) arrays: pairwise along a reduced last axis,
    a running sum per column over axis 0. 6000 elements, so every NumPy since 1.9 gives these bits (longer
    rows than its buffer of 8192 elements would be summed in blocks by NumPy before 2.3)."""
    k = (np.arange(6000, dtype=np.int64) * 14569 + 12345) % 99991
    x64 = (k - 49495).astype(np.float64) / 10000.0
    x = x64.astype(np.float32)
    rows, cols, cube = x.reshape(12, 500), x.reshape(500, 12), x.reshape(5, 12, 100)
    def f32(a):
        """fedvm writes a float32 as the shortest decimal that reads back as it (one per float32 value)."""
        assert a.dtype == np.float32  # float32 sums and means add in float32
        return float(str(a)) if a.ndim == 0 else [float(str(v)) for v in a]

    return {"all": f32(np.sum(x)), "all_of_rows": f32(np.sum(rows)),
            "last_axis": f32(np.sum(rows, axis=1)), "first_axis": f32(np.sum(cols, axis=0)),
            "outer_axes": f32(np.sum(cube, axis=(0, 2))), "mean_all": f32(np.mean(x)),
            "mean_last_axis": f32(np.mean(rows, axis=-1)), "mean_first_axis": f32(np.mean(cols, axis=0)),
            "all_f64": float(np.sum(x64)), "mean_f64": float(np.mean(x64))}


def expectation(case):
    """The expected result of one case, from its program's meaning."""
    prog = os.path.basename(case["program"])
    args = case["args"]

    def arg(name):
        text = args[name]
        return load(text[1:]) if isinstance(text, str) and text.startswith("@") else json.loads(text)

    if prog == "sensor_threshold.json":
        return sensor(arg("readings"), arg("threshold"))
    if prog == "histogram.json":
        return histogram(arg("values"))
    if prog == "secure_sum.json":
        return secure_sum(arg("counters"), 8)
    if prog == "secure_sums.json":
        return secure_sums(arg("x"), arg("big"), arg("w"), arg("c"), arg("d"))
    if prog == "all_equal_map.json":
        return all_equal_map(arg("w"), arg("c"), arg("x"))
    if prog == "literals_fields.json":
        return literals_fields(arg("data"), arg("state"))
    if prog == "mean_variance.json":
        return mean_variance(arg("measurements"))
    if prog == "temperature_range.yaml":
        return temperature_range(arg("temps"))
    if prog == "fedsgd_logistic.json":
        return fedsgd_logistic(arg("data"), case["rounds"])
    if prog == "drjax_mean_loss.json":
        return drjax_mean_loss(arg("w"), arg("x"))
    if prog == "has_aux_sum_loss.json":  # sum_k (x_k.w - 1)^2, its gradient, the mean beside it
        w, xs = arg("w"), arg("x")
        errors = [x[0] * w[0] + x[1] * w[1] - 1 for x in xs]
        total = sum(e * e for e in errors)
        g = [sum(2 * e * x[i] for e, x in zip(errors, xs)) for i in range(2)]
        return {"value": total, "mean": total / len(xs), "grad": g, "grad_of_grad": g, "mean_of_grad": total / len(xs)}
    if prog == "jvp_sum_loss.json":
        return jvp_sum_loss(arg("w"), arg("x"), arg("t"))
    if prog == "jvp_mean_loss.json":
        r, n = jvp_sum_loss(arg("w"), arg("x"), arg("t")), len(arg("x"))
        return {"value": r["value"] / n, "tangent": r["tangent"] / n}
    if prog == "fedsgd_linear.json":
        return fedsgd_linear(arg("data"), case["rounds"])
    if prog == "signed_zeros.json":
        return signed_zeros(arg("x"), arg("w"))
    if prog == "empty_sum.json":
        return [0.0] * case["width"]  # a sum over no clients: +0.0, the zeros of its type
    if prog == "label_filter.json":
        return label_filter(arg("data"), arg("label"))
    if prog == "shuffle_repeat.json":
        return shuffle_repeat(arg("xs"), arg("rows"), arg("key"))
    if prog == "tensor_sums.json":
        return tensor_sums()
    raise SystemExit("reference.py: no reference for " + prog)


def close(a, b, tol):
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == 0 and b == 0 and math.copysign(1, a) != math.copysign(1, b):
            return False  # -0.0 is not +0.0
        return abs(a - b) <= tol * max(1.0, abs(b))
    return a == b


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    bad = 0
    names = sorted(n for n in os.listdir(CASES) if n.endswith(".json"))
    for name in names:
        path = os.path.join(CASES, name)
        with open(path) as f:
            case = json.load(f)
        want = expectation(case)
        if mode == "--write":
            case["expect"] = want
            with open(path, "w") as f:
                json.dump(case, f, indent=2)
                f.write("\n")
        elif not close(case.get("expect"), want, 1e-12):
            print("%s: expect %r, the reference gives %r" % (name, case.get("expect"), want))
            bad += 1
    if mode == "--check":
        print("golden expectations: %d cases agree with the reference%s" % (len(names) - bad,
              "" if not bad else ", %d differ" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
