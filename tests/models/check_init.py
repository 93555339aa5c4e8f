#!/usr/bin/env python3
"""check_init.py [ROOT] - Haiku's initializers in programs/lib/init.json and the LSTM models, against references.

FedJAX's models are Haiku modules, and Haiku's default initializers are
truncated normals (haiku/_src/initializers.py): TruncatedNormal(stddev) is
stddev times a standard normal draw truncated to [-2, 2], not rescaled for
the truncation; hk.Linear draws TruncatedNormal(1 / sqrt(fan_in)), hk.Embed
TruncatedNormal(1), biases are zero, and hk.LSTM adds a constant 1 to the
forget gate. This check runs, in-process (the fedvm package over
lib/libfedvm.so):

- truncated_normal_in of programs/lib/init.json on a grid of 2^16 + 1
  uniform values against sqrt(2) erfinv(a + (b - a) u), a = erf(-sqrt 2),
  b = erf(sqrt 2), with erfinv found by bisection on math.erf: within 2e-6;
- char_lstm_init (programs/models/char_lstm.json) and so_nwp_init
  (programs/models/so_nwp.json) from a key: every weight against the
  truncated normal of its layer's standard deviation, written here from
  FedJAX's models (Kolmogorov-Smirnov distance at most 1.95 / sqrt(n), the
  0.1% level; the sample's standard deviation within 5 standard errors of
  0.87962566 * stddev; no value beyond 2 stddev), the biases zero but the
  LSTM forget gates' 1 (fedvm's gates are i, f, g, o).

It is shown to be able to fail: Glorot-uniform weights of char_lstm's shapes
(its initialization before Haiku's, drawn here with NumPy) fail it, and so do
the weights checked against a standard deviation 8% off.

Usage: check_init.py [ROOT]  (ROOT: the checkout, default the current directory)
"""
import math
import os
import sys

import numpy as np

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
sys.dont_write_bytecode = True  # nothing written into the checkout
sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
import fedvm  # noqa: E402

TRUNC_STD = 0.87962566103423978  # the standard deviation of N(0, 1) truncated to [-2, 2]
A = math.erf(-math.sqrt(2.0))
ERF = np.frompyfunc(math.erf, 1, 1)

# each weight's standard deviation, from FedJAX's models: hk.Linear's 1 / sqrt(fan_in), where hk.LSTM's
# one Linear takes [x, h]; hk.Embed's 1
CHAR_LSTM = {"embed": 1.0, "lstm1.wx": 1 / math.sqrt(8 + 256), "lstm1.wh": 1 / math.sqrt(8 + 256),
             "lstm2.wx": 1 / math.sqrt(512), "lstm2.wh": 1 / math.sqrt(512), "dense": 1 / math.sqrt(256)}
SO_NWP = {"embed": 1.0, "lstm.wx": 1 / math.sqrt(96 + 670), "lstm.wh": 1 / math.sqrt(96 + 670),
          "proj": 1 / math.sqrt(670), "dense": 1 / math.sqrt(96)}


def erfinv(y):
    lo, hi = -6.0, 6.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if math.erf(mid) < y:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def check_function(lib):
    u = np.concatenate([np.arange(2 ** 16) / 2 ** 16, [1 - 2 ** -24]]).astype(np.float32)
    got = np.asarray(lib.truncated_normal_in(u.reshape(-1, 1), np.float32(1.0)), np.float64).ravel()
    want = np.array([min(2.0, max(-2.0, math.sqrt(2.0) * erfinv(A - 2 * A * float(x)))) for x in u])
    err = np.abs(got - want).max()
    print("truncated_normal_in: largest difference from sqrt(2) erfinv %.3g over %d values" % (err, u.size))
    return [] if err <= 2e-6 else ["truncated_normal_in is %.3g from sqrt(2) erfinv (limit 2e-6)" % err]


def leaves(model, prefix=""):
    for k, v in model.items():
        if isinstance(v, dict):
            yield from leaves(v, prefix + k + ".")
        else:
            yield prefix + k, np.asarray(v, np.float64)


def weight_errors(name, w, sd):
    """The ways w is not TruncatedNormal(sd) (a list of strings)."""
    x = np.sort(w.ravel())
    n = x.size
    errs = []
    if np.abs(x).max() > 2 * sd * (1 + 1e-6):
        errs.append("%s: a value %.6g beyond 2 stddev (%.6g)" % (name, np.abs(x).max(), 2 * sd))
    z = np.clip(x / sd, -2.0, 2.0)
    cdf = (ERF(z / math.sqrt(2.0)).astype(np.float64) - A) / (-2 * A)
    ks = max((np.arange(1, n + 1) / n - cdf).max(), (cdf - np.arange(n) / n).max())
    if ks * math.sqrt(n) > 1.95:
        errs.append("%s: Kolmogorov-Smirnov distance %.4g to TruncatedNormal(%.6g), above %.4g" % (
            name, ks, sd, 1.95 / math.sqrt(n)))
    std = x.std()
    if abs(std - TRUNC_STD * sd) > 5 * TRUNC_STD * sd / math.sqrt(2 * n):
        errs.append("%s: standard deviation %.6g, TruncatedNormal(%.6g) has %.6g" % (name, std, sd, TRUNC_STD * sd))
    return errs


def model_errors(label, model, sds):
    errs = []
    for name, w in leaves(model):
        if name in sds:
            errs += weight_errors(label + " " + name, w, sds[name])
        elif name.endswith(".b"):  # an LSTM's bias: zero but the forget gate (the second quarter) 1
            h = w.size // 4
            want = np.concatenate([np.zeros(h), np.ones(h), np.zeros(2 * h)])
            if not np.array_equal(w, want):
                errs.append("%s %s: not zero with 1 for the forget gate" % (label, name))
        elif not np.all(w == 0):
            errs.append("%s %s: a bias that is not zero" % (label, name))
    missing = set(sds) - {n for n, _ in leaves(model)}
    return errs + ["%s: no weight %s" % (label, m) for m in sorted(missing)]


def main():
    errs = check_function(fedvm.load(os.path.join(ROOT, "programs", "lib", "init.json")))
    key = np.array([0, 2024], np.uint32)
    char_path = os.path.join(ROOT, "programs", "models", "char_lstm.json")
    models = [("char_lstm", fedvm.load(char_path).char_lstm_init(key), CHAR_LSTM),
              ("so_nwp", fedvm.load(os.path.join(ROOT, "programs", "models", "so_nwp.json")).so_nwp_init(key),
               SO_NWP)]
    for label, model, sds in models:
        found = model_errors(label, model, sds)
        errs += found
        print("%s: %d weights and their biases as Haiku initializes them%s" % (
            label, len(sds), "" if not found else " -- NOT: %d errors" % len(found)))

    # the check can fail: a standard deviation 8% off ...
    # (every weight of 8192 values or more; the embedding's 720 cannot tell 8%)
    off = {k: v * 1.08 for k, v in CHAR_LSTM.items()}
    large = {"char_lstm " + n for n, w in leaves(models[0][1]) if n in off and w.size >= 8192}
    failed = {e.split(":")[0] for e in model_errors("char_lstm", models[0][1], off)}
    print("checked against standard deviations 8%% off, %d of the %d large weights fail" % (
        len(failed & large), len(large)))
    if not large <= failed:
        errs.append("weights checked against stddev 8%% off: %s pass" % ", ".join(sorted(large - failed)))
    # ... and so does a Glorot-uniform initialization of the same shapes (char_lstm's before Haiku's)
    rng = np.random.default_rng(0)
    glorot = {}
    for n, w in leaves(models[0][1]):
        lim = math.sqrt(6.0 / (w.shape[0] + w.shape[-1]))
        glorot[n] = rng.uniform(-lim, lim, w.shape) if n in CHAR_LSTM else w
    failed = {e.split(":")[0] for n, w in glorot.items() if n in CHAR_LSTM
              for e in weight_errors("char_lstm (Glorot-uniform) " + n, w, CHAR_LSTM[n])}
    print("a Glorot-uniform char_lstm fails the check in %d of %d weights" % (len(failed), len(CHAR_LSTM)))
    if len(failed) < len(CHAR_LSTM):
        errs.append("a Glorot-uniform char_lstm: only %d of %d weights fail" % (len(failed), len(CHAR_LSTM)))
    for e in errs:
        print("FAIL: " + e)
    if errs:
        print("check_init: %d errors" % len(errs))
        return 1
    print("check_init: truncated_normal_in, char_lstm_init and so_nwp_init draw Haiku's initializers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
