#!/usr/bin/env python3
"""accountant.py - an independent privacy accountant for the Poisson-subsampled Gaussian mechanism.

Written from the definitions, not from fedvm's code: Renyi DP at order
alpha of the sampled Gaussian mechanism with sampling probability q and
noise multiplier z is log(A_alpha) / (alpha - 1), where (Mironov, Talwar &
Zhang 2019, "Renyi Differential Privacy of the Sampled Gaussian Mechanism",
section 3, the definition of A_alpha)

    A_alpha = E_{x ~ N(0, z^2)} [ ((1 - q) + q exp((2x - 1) / (2 z^2)))^alpha ].

This file computes that expectation by numerical quadrature (the trapezoidal
rule on a fine grid, which converges geometrically for such smooth, rapidly
decaying integrands), for integer and fractional orders alike, where fedvm
sums the paper's binomial formula and its erfc series. A_alpha - 1 is
integrated directly (expm1/log1p), so a small RDP keeps its relative
precision. For integer orders the binomial sum is evaluated too, exactly in
rational arithmetic with math.exp of each exponent, as a check of the
quadrature itself.

(epsilon, delta): epsilon = min over orders of
rdp + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha - 1)
(Balle et al. 2020, Theorem 21; Canonne, Kamath & Steinke 2020), with 0 for
an order whose RDP r has delta^2 + expm1(-r) >= 0, orders <= 1.01 skipped,
and a negative minimum read as 0.

usage: accountant.py --check LIBFEDVM.so   compare fedvm's accountant (through ctypes)
                                           over a grid of (q, z, rounds, delta)
       accountant.py --lines Q Z DELTA FILE
                                           check the "epsilon" and "delta" of every JSON
                                           line of FILE that has "round" or "rounds" (a
                                           metrics file, 'fedvm privacy' output) to 1e-6
       accountant.py Q Z ROUNDS DELTA      print epsilon and its order
"""
import ctypes
import math
import sys

import numpy as np

ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)) + [128, 256, 512]


def log_a_quad(q, z, alpha):
    """log(A_alpha) by the trapezoidal rule over x ~ N(0, z^2)."""
    # The integrand is the N(0, z^2) density times a factor that for large x
    # grows like exp(alpha x / z^2): their product peaks between 0 and about
    # alpha, with width z; the grid covers both with margins of 40 z.
    lo, hi = -40.0 * z - 1.0, alpha + 40.0 * z + 1.0
    h = z / 20.0
    x = np.arange(lo, hi + h, h)
    u = (2.0 * x - 1.0) / (2.0 * z * z)
    logdens = -x * x / (2.0 * z * z) - math.log(z * math.sqrt(2.0 * math.pi)) + math.log(h)
    # g = alpha * log((1 - q) + q e^u) = alpha * log1p(q expm1(u)), stably for large u
    with np.errstate(over="ignore"):
        g = np.where(u < 30.0, alpha * np.log1p(q * np.expm1(np.minimum(u, 30.0))),
                     alpha * (u + np.log(q) + np.log1p((1.0 - q) * np.exp(-np.maximum(u, 30.0)) / q)))
    big = np.max(logdens + g)
    if big > -1.0:
        # A_alpha is not close to 1: a log-sum-exp of the whole integrand
        t = logdens + g
        m = np.max(t)
        return float(m + math.log(np.sum(np.exp(t - m))))
    # A_alpha - 1 = E[expm1(g)]: positive and negative parts in log space
    with np.errstate(divide="ignore"):
        mag = np.where(g > 0, g + np.log(-np.expm1(-np.abs(g))), np.log(-np.expm1(-np.abs(g))))
    t = logdens + mag
    pos, neg = t[g > 0], t[g < 0]
    sp = np.sum(np.exp(pos)) if pos.size else 0.0
    sn = np.sum(np.exp(neg)) if neg.size else 0.0
    return math.log1p(sp - sn)


def log_a_binomial(q, z, alpha):
    """log(A_alpha) for an integer alpha by the binomial formula (exact rationals but for exp)."""
    from fractions import Fraction
    n = int(alpha)
    qf = Fraction(q)
    total = Fraction(0)
    for k in range(n + 1):
        c = Fraction(math.comb(n, k)) * (1 - qf) ** (n - k) * qf ** k
        total += c * Fraction(math.exp((k * k - k) / (2.0 * z * z)))
    return math.log(total)


def rdp(q, z, alpha):
    if q == 0:
        return 0.0
    if z == 0:
        return math.inf
    if q == 1:
        return alpha / (2.0 * z * z)
    return log_a_quad(q, z, alpha) / (alpha - 1.0)


def epsilon(orders, rdps, delta):
    best, best_order = math.inf, 0.0
    for a, r in zip(orders, rdps):
        if delta * delta + math.expm1(-r) >= 0:
            e = 0.0
        elif a > 1.01 and math.isfinite(r):
            e = r + math.log((a - 1.0) / a) - (math.log(delta) + math.log(a)) / (a - 1.0)
        else:
            e = math.inf
        if e < best:
            best, best_order = e, a
    return max(best, 0.0), best_order


def check(lib_path):
    lib = ctypes.CDLL(lib_path)
    lib.fvm_privacy_rdp.restype = ctypes.c_double
    lib.fvm_privacy_rdp.argtypes = [ctypes.c_double] * 3
    lib.fvm_privacy_epsilon.restype = ctypes.c_int
    lib.fvm_privacy_epsilon.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.c_int64, ctypes.c_double,
                                        ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double),
                                        ctypes.c_void_p]
    bad = 0
    worst = worst_eps = 0.0
    # The quadrature against the binomial sum at integer orders.
    for q, z, a in [(0.01, 1.0, 2), (0.1, 0.8, 5), (0.001, 2.0, 32), (0.3, 3.0, 63), (0.05, 1.5, 20)]:
        quad, binom = log_a_quad(q, z, a), log_a_binomial(q, z, a)
        if abs(quad - binom) > 1e-9 * abs(binom):
            print("quadrature %r and binomial sum %r differ at q=%g z=%g alpha=%g" % (quad, binom, q, z, a))
            bad += 1
    n = 0
    for q in [0.001, 0.01, 0.1, 0.5, 1.0]:
        for z in [0.7, 1.0, 1.5, 4.0]:
            rdps = [rdp(q, z, a) for a in ORDERS]
            for a, r in zip(ORDERS, rdps):
                c = lib.fvm_privacy_rdp(q, z, a)
                rel = abs(c - r) / r
                worst = max(worst, rel)
                if rel > 1e-7:
                    print("rdp q=%g z=%g alpha=%g: fedvm %r, reference %r (rel %.2e)" % (q, z, a, c, r, rel))
                    bad += 1
            for rounds in [1, 100, 10000]:
                for delta in [1e-5, 1e-8]:
                    e, o = epsilon(ORDERS, [r * rounds for r in rdps], delta)
                    ce, co = ctypes.c_double(), ctypes.c_double()
                    st = lib.fvm_privacy_epsilon(q, z, rounds, delta, ctypes.byref(ce), ctypes.byref(co), None)
                    n += 1
                    rel = abs(ce.value - e) / e if e > 0 else abs(ce.value)
                    worst_eps = max(worst_eps, rel)
                    if st != 0 or rel > 1e-6:
                        print("epsilon q=%g z=%g rounds=%d delta=%g: fedvm %r (order %g), reference %r (order %g)"
                              % (q, z, rounds, delta, ce.value, co.value, e, o))
                        bad += 1
    print("accountant: %d epsilons and %d RDPs against the quadrature, worst relative difference %.2e (RDP), "
          "%.2e (epsilon): %s" % (n, 20 * len(ORDERS), worst, worst_eps, "ok" if not bad else "%d FAILED" % bad))
    return 1 if bad else 0


def check_lines(q, z, delta, path):
    import json
    rdps = [rdp(q, z, a) for a in ORDERS]
    n = bad = 0
    for line in open(path):
        doc = json.loads(line)
        r = doc.get("round", doc.get("rounds"))
        if r is None:
            continue
        n += 1
        want, _ = epsilon(ORDERS, [x * r for x in rdps], delta)
        got = doc.get("epsilon")
        got = math.inf if got == "inf" else got
        ok = got is not None and doc.get("delta") == delta and (
            got == want if want == 0 or math.isinf(want) else abs(got - want) <= 1e-6 * want)
        if not ok:
            print("round %s: epsilon %r delta %r, reference epsilon %r delta %r" % (r, got, doc.get("delta"), want, delta))
            bad += 1
    if n == 0:
        print("%s: no line with a round" % path)
        return 1
    print("accountant: %d lines of %s agree with the reference" % (n, path) if not bad else
          "accountant: %d of %d lines of %s differ" % (bad, n, path))
    return 1 if bad else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        return check(argv[2])
    if len(argv) == 6 and argv[1] == "--lines":
        return check_lines(float(argv[2]), float(argv[3]), float(argv[4]), argv[5])
    if len(argv) == 5:
        q, z, rounds, delta = float(argv[1]), float(argv[2]), int(argv[3]), float(argv[4])
        e, o = epsilon(ORDERS, [rdp(q, z, a) * rounds for a in ORDERS], delta)
        print("epsilon %.10g at order %g" % (e, o))
        return 0
    print(__doc__.split("usage: ")[1].split("\n\n")[0] if "usage: " in __doc__ else __doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
