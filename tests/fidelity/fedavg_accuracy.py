#!/usr/bin/env python3
"""The demo's test accuracy against the independent NumPy FedAvg (bench/ref_fedavg_numpy.py).

usage: fedavg_accuracy.py --fedvm M0.jsonl M1.jsonl ... --numpy N0.out N1.out ...

The M files are 'fedvm run programs/fedavg_2nn.json ... --eval-every 1
--metrics M.jsonl' of the demo, M0 with the demo's own seed (0), the others
with further seeds; the N files are the reference's output (one JSON line per
round with test_acc) for as many seeds, on the same partition. Both run
McMahan et al.'s FedAvg with the 2NN from Glorot-uniform weights and zero
biases, sampling clients uniformly without replacement, one epoch of SGD
(batch 10, the last partial batch kept, learning rate 0.05) over examples
shuffled each epoch, and the example-weighted mean of the client models. Their
random streams differ (fedvm draws with Threefry, the reference with numpy's
PCG64), so one seed of each is one draw from each implementation's spread of
runs, and a seed of one is not the same run as that seed of the other.

Measured on 100 IID clients (partition seed 0), 20 rounds, seeds 0-9 of each
(the reference on one thread: its last bits change with OpenBLAS's thread
count):

                       final accuracy (round 20)        mean of rounds 16-20
                       mean    sd      min     max      mean    sd      min     max
  fedvm                0.8298  0.0019  0.8260  0.8320   0.8255  0.0010  0.8234  0.8270
  NumPy reference      0.8277  0.0030  0.8243  0.8337   0.8253  0.0022  0.8222  0.8280

The curves of test accuracy, averaged over the ten seeds, agree within 0.007
in every round. Final accuracies of single seeds span 0.8243 to 0.8337, so
comparing one seed's final accuracy with another's sits at the tolerance.
The checks, each within one point (0.01 absolute):

  1. the implementations: the mean over the seeds of each run's mean test
     accuracy in the last five rounds (sd of a 3-seed mean about 0.001 for
     either, so 0.01 is several standard deviations of their difference;
     over seeds 0-2, 1-3, ..., 7-9 the difference stays within 0.0024);
  2. the demo's number: fedvm's final accuracy with seed 0, the one 'make
     demo' prints, against the reference's mean final accuracy over the
     seeds (sd of that difference about 0.003).
"""
import json
import statistics
import sys

TOLERANCE = 0.01
LAST = 5


def curve(lines, key):
    """Accuracy by round, in round order (a round given twice: its last line)."""
    by_round = {}
    for line in lines:
        r = json.loads(line)
        if "round" in r:  # not a run's header
            by_round[r["round"]] = key(r)
    return [by_round[k] for k in sorted(by_round)]


def fedvm_curve(path):
    return curve([l for l in open(path) if l.strip()], lambda r: r["eval"]["accuracy"])


def numpy_curve(path):
    return curve([l for l in open(path) if l.startswith("{")], lambda r: r["test_acc"])


def main(argv):
    if "--fedvm" not in argv or "--numpy" not in argv:
        print(__doc__.splitlines()[2])
        return 2
    i, j = argv.index("--fedvm"), argv.index("--numpy")
    fedvm = [fedvm_curve(p) for p in argv[i + 1:j]]
    ref = [numpy_curve(p) for p in argv[j + 1:]]
    lengths = {len(c) for c in fedvm + ref}
    if not fedvm or not ref or len(lengths) != 1 or min(lengths) < LAST:
        print("fidelity: curves of %s rounds; expected the same number (at least %d) for every run"
              % (sorted(lengths), LAST))
        return 1
    rounds = lengths.pop()
    for name, curves in (("fedvm", fedvm), ("numpy", ref)):
        print("fidelity: %s final accuracy %s, mean of rounds %d-%d %s" % (
            name, " ".join("%.4f" % c[-1] for c in curves), rounds - LAST + 1, rounds,
            " ".join("%.4f" % statistics.mean(c[-LAST:]) for c in curves)))
    bad = 0
    late_f = statistics.mean(statistics.mean(c[-LAST:]) for c in fedvm)
    late_n = statistics.mean(statistics.mean(c[-LAST:]) for c in ref)
    ok = abs(late_f - late_n) <= TOLERANCE
    bad += not ok
    print("fidelity: last %d rounds over %d seeds: fedvm %.4f, numpy %.4f, difference %+.4f (at most %.2f): %s"
          % (LAST, len(fedvm), late_f, late_n, late_f - late_n, TOLERANCE, "ok" if ok else "FAIL"))
    demo = fedvm[0][-1]
    final_n = statistics.mean(c[-1] for c in ref)
    ok = abs(demo - final_n) <= TOLERANCE
    bad += not ok
    print("fidelity: the demo's final accuracy %.4f, numpy's mean final %.4f, difference %+.4f (at most %.2f): %s"
          % (demo, final_n, demo - final_n, TOLERANCE, "ok" if ok else "FAIL"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
