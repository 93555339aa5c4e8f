#!/usr/bin/python3
"""Check that the numpy, the torch and the batched torch FedAvg reference implementations agree.

1. One minibatch: the hand-written gradient of ref_fedavg_numpy against
   torch autograd, from the same model and batch.
2. One FedAvg round from the same seed (same initial model, clients and
   shuffles), with the default options and again with --epochs 2 --batch 7
   (a last partial batch): the resulting models and train losses. When a
   round differs, each sampled client's update is compared; a client whose
   two paths parted right after a ReLU pre-activation within rounding of
   zero fell on different sides in the two libraries is reported as a note,
   and every other client must agree. The batched torch implementation
   (ref_fedavg_torch_batched, all clients at once) is compared with numpy
   the same way, also with its clients split over 2 threads.
3. --save-init from numpy then --load-init into torch gives the same round.

Agreement is max|a - b| / max|a| per parameter (and relative difference of
the losses) at most --tol (default 1e-4). Uses --data FILE (as 'fedvm data
import fashion-mnist' writes it) or, without it, a small synthetic dataset.
Exits 1 on disagreement.

  /usr/bin/python3 bench/check_refs.py --data fm.sqlite
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_args  # noqa: E402

ref_args.pin_threads(1)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import ref_common  # noqa: E402
import ref_fedavg_numpy as refnp  # noqa: E402
import ref_fedavg_torch as refpt  # noqa: E402
import ref_fedavg_torch_batched as refbt  # noqa: E402


def synthetic(seed=1, num_clients=20):
    """Clients of 40..130 examples whose labels a random linear map of the pixels decides."""
    rng = np.random.default_rng(seed)
    proj = rng.normal(size=(784, 10)).astype(np.float32)

    def make(n):
        x = rng.integers(0, 256, size=(n, 784)).astype(np.float32) / np.float32(255)
        return x, (x @ proj).argmax(axis=1).astype(np.int64)

    return [make(int(n)) for n in rng.integers(40, 131, size=num_clients)], make(500)


def rel(a, b):
    scale = float(np.max(np.abs(a))) or 1.0
    return float(np.max(np.abs(a - b))) / scale


class Checker:
    def __init__(self, tol):
        self.tol, self.failed, self.explained = tol, 0, 0

    def models(self, what, a, b):
        for name, pa, pb in zip(ref_common.NAMES, a, b):
            if pa.dtype != np.float32 or pb.dtype != np.float32:
                self.fail("%s: %s is %s / %s, not float32" % (what, name, pa.dtype, pb.dtype))
        worst = max(rel(pa, pb) for pa, pb in zip(a, b))
        self.report(what, worst, "%s: model max rel diff %.2e" % (what, worst))

    def value(self, what, a, b):
        d = abs(a - b) / max(abs(a), 1e-12)
        self.report(what, d, "%s: %.6f vs %.6f, rel diff %.2e" % (what, a, b, d))

    def report(self, what, d, text):
        ok = d <= self.tol
        print("%s %s" % ("ok  " if ok else "FAIL", text))
        if not ok:
            self.failed += 1

    def fail(self, text):
        print("FAIL " + text)
        self.failed += 1


def check_gradient(chk, clients, seed):
    model = ref_common.init_model(seed)
    x, y = clients[0][0][:32], clients[0][1][:32]
    loss, grads = refnp.loss_and_grads(model, x, y)
    params = [p.requires_grad_() for p in refpt.to_torch(model)]
    w1, b1, w2, b2, w3, b3 = params
    h = F.relu(F.linear(torch.from_numpy(x), w1, b1))
    h = F.relu(F.linear(h, w2, b2))
    tloss = F.cross_entropy(F.linear(h, w3, b3), torch.from_numpy(y))
    tloss.backward()
    chk.value("gradient check, loss", tloss.item(), loss)
    chk.models("gradient check", refpt.to_numpy([p.grad for p in params]), grads)


def kink(server, x, y, rng, epochs, batch, lr, tol):
    """Replay a client's SGD step by step in both libraries. If the models part by more than tol after the
    two forward passes put some ReLU pre-activation on different sides of zero (a value within rounding of
    zero, which sends SGD down another path: no disagreement of the implementations), returns (step of the
    flip, that pre-activation, step where they parted); otherwise None."""
    a = [p.copy() for p in server]
    t = [p.clone().requires_grad_() for p in refpt.to_torch(server)]
    flip, step = None, 0
    for _ in range(epochs):
        perm = rng.permutation(len(y))
        xs, ys = x[perm], y[perm]
        for i in range(0, len(ys), batch):
            xb, yb = xs[i:i + batch], ys[i:i + batch]
            step += 1
            z1 = xb @ a[0] + a[1]
            z2 = np.maximum(z1, 0) @ a[2] + a[3]
            tz1 = F.linear(torch.from_numpy(xb), t[0], t[1])
            tz2 = F.linear(F.relu(tz1), t[2], t[3])
            for z, tz in ((z1, tz1), (z2, tz2)):
                differ = (z > 0) != (tz.detach().numpy() > 0)
                if flip is None and differ.any():
                    flip = (step, float(np.max(np.abs(z[differ]))))
            _, grads = refnp.loss_and_grads(a, xb, yb)
            for p, g in zip(a, grads):
                p -= np.float32(lr) * g
            F.cross_entropy(F.linear(F.relu(tz2), t[4], t[5]), torch.from_numpy(yb)).backward()
            with torch.no_grad():
                for p in t:
                    p.add_(p.grad, alpha=-lr)
                    p.grad = None
            if max(rel(pa, pb) for pa, pb in zip(a, refpt.to_numpy(t))) > tol:
                return None if flip is None else (flip[0], flip[1], step)
    return None


def explain(chk, what, clients, seed, args):
    """After a round disagreed: every sampled client's update must agree, or have parted at a ReLU kink."""
    server = ref_common.init_model(seed)
    net = refpt.make_net()
    kinks, unexplained = [], []
    for c in ref_common.sample_clients(seed, 1, len(clients), args.clients_per_round):
        x, y = clients[c]
        a, _ = refnp.client_update(server, x, y, ref_common.client_rng(seed, 1, c), args.epochs, args.batch, args.lr)
        b, _ = refpt.client_update(net, refpt.to_torch(server), torch.from_numpy(x), torch.from_numpy(y),
                                   ref_common.client_rng(seed, 1, c), args.epochs, args.batch, args.lr)
        d = max(rel(pa, pb) for pa, pb in zip(a, refpt.to_numpy(b)))
        if d <= chk.tol:
            continue
        k = kink(server, x, y, ref_common.client_rng(seed, 1, c), args.epochs, args.batch, args.lr, chk.tol)
        (unexplained if k is None else kinks).append((c, d, k))
    if unexplained or not kinks:
        return False
    for c, d, (flip, z, part) in kinks:
        print("note %s: client %d's models differ by %.2e: at step %d a ReLU pre-activation of %.1e fell on "
              "different sides of zero in the two (rounding), and the paths parted by step %d; not counted"
              % (what, c, d, flip, z, part))
    print("ok   %s: the other %d clients agree" % (what, args.clients_per_round - len(kinks)))
    chk.explained += 1
    return True


class KeepLoss:
    """A report that keeps the train losses."""

    def __init__(self):
        self.losses = []

    def round(self, rnd, train_loss, *rest):
        self.losses.append(train_loss)


def check_round(chk, clients, test, data, seed, extra, impl=refpt, threads=1):
    """One round of impl against numpy's; a disagreement of the plain torch implementation may be explained
    by a ReLU kink (explain)."""
    argv = ["--data", data or "-", "--rounds", "1", "--seed", str(seed), "--threads", str(threads)] + extra
    what = "one round" + (" " + " ".join(extra) if extra else "")
    if impl is refbt:
        what += ", batched torch on %d thread%s" % (threads, "s" if threads > 1 else "")
    results = []
    for ref in (refnp, impl):
        args = ref_args.parser("check").parse_args(argv)
        keep = KeepLoss()
        model = ref.run(args, clients, test, keep)
        results.append((model, keep.losses[0]))
    loss_d = abs(results[0][1] - results[1][1]) / abs(results[0][1])
    model_d = max(rel(a, b) for a, b in zip(results[0][0], results[1][0]))
    if max(loss_d, model_d) > chk.tol and impl is refpt and explain(chk, what, clients, seed, args):
        return
    chk.value(what + ", train loss", results[0][1], results[1][1])
    chk.models(what, results[0][0], results[1][0])
    start = ref_common.init_model(seed)
    moved = max(rel(a, b) for a, b in zip(start, results[0][0]))
    if moved < 10 * chk.tol:
        chk.fail("%s: the model barely moved from its start (%.2e), the check proves nothing" % (what, moved))


def check_init_files(chk, clients, test, seed):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "init.npz")
        base = ["--data", "-", "--rounds", "1", "--threads", "1"]
        a = refnp.run(ref_args.parser("check").parse_args(base + ["--seed", str(seed + 1), "--save-init", path]),
                      clients, test)
        loaded = ref_common.load_model(path)
        chk.models("--save-init file", ref_common.init_model(seed + 1), loaded)
        b = refpt.run(ref_args.parser("check").parse_args(base + ["--seed", str(seed + 1), "--load-init", path]),
                      clients, test)
        chk.models("numpy --save-init, torch --load-init", a, b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", metavar="FILE", help="FedJAX SQLite file (default: a small synthetic dataset)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.data:
        clients, test = ref_common.load_data(args.data)
    else:
        clients, test = synthetic()
    chk = Checker(args.tol)
    check_gradient(chk, clients, args.seed)
    check_round(chk, clients, test, args.data, args.seed, [])
    check_round(chk, clients, test, args.data, args.seed, ["--epochs", "2", "--batch", "7"])
    check_round(chk, clients, test, args.data, args.seed, [], refbt)
    check_round(chk, clients, test, args.data, args.seed, ["--epochs", "2", "--batch", "7"], refbt, threads=2)
    check_init_files(chk, clients, test, args.seed)
    if chk.failed:
        print("check_refs: %d disagreements" % chk.failed)
    else:
        print("check_refs: the numpy, torch and batched torch references agree%s" % (
            " (%d round(s) parted at a ReLU kink, see the notes)" % chk.explained if chk.explained else ""))
    return 1 if chk.failed else 0


if __name__ == "__main__":
    sys.exit(main())
