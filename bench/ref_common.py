"""What the FedAvg reference implementations share: data, initial model, random streams, output.

Every random number comes from numpy's PCG64 generators seeded from
(--seed, purpose, ...), so the numpy and the torch implementations draw the
same initial model, the same clients each round and the same shuffles, in any
order and with any thread count:

  initial model           default_rng([seed, 0]): w1, w2, w3 in that order
  clients of round r      default_rng([seed, 1, r]).choice(num_clients, K, replace=False)
  shuffles of client c    default_rng([seed, 2, r, c]): one permutation per epoch
  in round r

Models are lists [w1, b1, w2, b2, w3, b3] of float32 arrays, weights [in, out].
"""

import json
import math
import statistics
import sys
import time

import numpy as np

import fedjax_sqlite

NAMES = ("w1", "b1", "w2", "b2", "w3", "b3")
LAYERS = ((784, 200), (200, 200), (200, 10))


def load_data(path):
    """(clients, test): clients a list of (x f32[n,784] in [0,1], y i64[n]) in file order; test one such pair."""
    def prepare(cols):
        pixels, labels = cols["pixels"], cols["label"]
        x = pixels.reshape(len(pixels), -1).astype(np.float32) / np.float32(255)
        return np.ascontiguousarray(x), labels.astype(np.int64)

    clients = [prepare(cols) for _, cols in fedjax_sqlite.read_clients(path, "default")]
    test = fedjax_sqlite.read_clients(path, "test")
    if len(test) != 1:
        raise SystemExit("%s: split 'test' has %d clients, expected 1" % (path, len(test)))
    return clients, prepare(test[0][1])


def init_model(seed):
    """Glorot-uniform weights (limit sqrt(6 / (fan_in + fan_out))), zero biases."""
    rng = np.random.default_rng([seed, 0])
    model = []
    for fan_in, fan_out in LAYERS:
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        model.append(rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32))
        model.append(np.zeros(fan_out, dtype=np.float32))
    return model


def initial_model(args):
    model = load_model(args.load_init) if args.load_init else init_model(args.seed)
    if args.save_init:
        np.savez(args.save_init, **dict(zip(NAMES, model)))
    return model


def load_model(path):
    with np.load(path) as f:
        model = [np.ascontiguousarray(f[n], dtype=np.float32) for n in NAMES]
    for (fan_in, fan_out), w, b in zip(LAYERS, model[0::2], model[1::2]):
        if w.shape != (fan_in, fan_out) or b.shape != (fan_out,):
            raise SystemExit("%s: shapes %r, expected the 2NN's [in, out] weights" % (path, [a.shape for a in model]))
    return model


def sample_clients(seed, rnd, num_clients, k):
    if k > num_clients:
        raise SystemExit("--clients-per-round %d exceeds the %d clients" % (k, num_clients))
    return [int(c) for c in np.random.default_rng([seed, 1, rnd]).choice(num_clients, k, replace=False)]


def client_rng(seed, rnd, client):
    return np.random.default_rng([seed, 2, rnd, client])


class Report:
    """One JSON line per round on stdout, and the summary line at the end."""

    def __init__(self, args, name, out=sys.stdout):
        self.args, self.out = args, out
        self.round_s, self.examples = [], 0
        self.test_acc = None
        print("# %s: %s" % (name, json.dumps({k: v for k, v in vars(args).items()})), file=sys.stderr)

    def round(self, rnd, train_loss, examples, seconds, cpu_s, test=None, eval_s=None):
        self.round_s.append(seconds)
        self.examples += examples
        line = {"round": rnd, "train_loss": round(train_loss, 6), "examples": examples}
        if test is not None:
            self.test_acc = test[0]
            line["test_acc"] = round(test[0], 4)
            line["test_loss"] = round(test[1], 6)
        line["seconds"] = round(seconds, 4)
        line["cpu_seconds"] = round(cpu_s, 4)
        if eval_s is not None:
            line["eval_seconds"] = round(eval_s, 4)
        print(json.dumps(line), file=self.out, flush=True)

    def finish(self):
        med = statistics.median(self.round_s)
        eps = self.examples / sum(self.round_s)
        acc = "" if self.test_acc is None else " test_acc=%.4f" % self.test_acc
        print("median_round_s=%.4f examples_per_s=%.0f%s" % (med, eps, acc), file=self.out)


def train(args, server, fedavg_round, evaluate, report=None):
    """args.rounds rounds of server, _, _ = fedavg_round(server, rnd), each timed (wall and CPU) and
    given to report with evaluate(server)'s (accuracy, loss) after the rounds evaluates() names
    (timed apart; None: no evaluation); returns the final server model."""
    for rnd in range(1, args.rounds + 1):
        t0, c0 = timer(), cpu_timer()
        server, train_loss, examples = fedavg_round(server, rnd)
        seconds, cpu_s = timer() - t0, cpu_timer() - c0
        if report is None:
            continue
        result, eval_s = None, None
        if evaluate is not None and evaluates(args, rnd):
            t1 = timer()
            result = evaluate(server)
            eval_s = timer() - t1
        report.round(rnd, train_loss, examples, seconds, cpu_s, result, eval_s)
    return server


def main(args, run, name):
    """Loads args.data, runs run(args, clients, test, report) with a Report named name, prints its summary."""
    clients, test = load_data(args.data)
    report = Report(args, name)
    run(args, clients, test, report)
    report.finish()
    return 0


def evaluates(args, rnd):
    return rnd == args.rounds or (args.eval_every > 0 and rnd % args.eval_every == 0)


def timer():
    return time.perf_counter()


def cpu_timer():
    """CPU time of the process, all threads: beside wall time, it shows when other load slowed a round."""
    return time.process_time()
