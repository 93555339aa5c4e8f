#!/usr/bin/env python3
"""reference.py - Mime, Mime-Lite, Agnostic FedAvg, HypCluster, Ditto and FedNova written apart from fedvm, in
NumPy (float64), for tests/run_algos.sh.

  reference.py data OUT.json [--clients N --seed S --min-examples A --max-examples B]
      writes clients of <x=f32[60],y=i32[],domain_id=i32[]> examples in two domains (for
      Agnostic FedAvg; the other algorithms ignore domain_id);
  reference.py check ALGO DATA.json METRICS.jsonl CHECKPOINT --epochs E --lr LR [options]
      replays a run of programs/ALGO.json on DATA.json (clients as fedvm's JSON form of
      {<x=f32[60],y=i32[]>*}@CLIENTS, written by tests/client_state/reference.py data) from
      its metrics file (which clients each round sampled), with full-batch local steps
      (batch_size >= every client's examples, so the shuffle changes a step only in the order
      of a mean), and compares the final server state in CHECKPOINT with the reference's to a
      relative 1e-4 (and each round's training loss to 1e-4).

The algorithms follow the papers and FedJAX's definitions (fedjax/algorithms/mime.py,
mime_lite.py, agnostic_fed_avg.py, hyp_cluster.py; Ditto from Li et al. 2021, Algorithm 1; FedNova from Wang et al. 2020 with SGD), not
fedvm's programs. For Ditto every client's personalized model in the SQLite store of client states
is compared too."""
import argparse, json, os, sqlite3, sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reflib import close_rel as close, parse_safetensors  # noqa: E402


def softmax(w, b, x):
    z = x @ w + b
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def losses(w, b, x, y):
    return -np.log(softmax(w, b, x)[np.arange(len(y)), y])


def grad(w, b, x, y, weights=None):
    """Gradient of sum_j weights_j loss_j / len(y) (the mean cross-entropy without weights)."""
    p = softmax(w, b, x)
    p[np.arange(len(y)), y] -= 1.0
    if weights is not None:
        p *= weights[:, None]
    return x.T @ p / len(y), p.sum(axis=0) / len(y)


def mime(args, xs, ys, rounds, lite):
    w, b = np.zeros((60, 10)), np.zeros(10)
    vw, vb = np.zeros((60, 10)), np.zeros(10)
    lr, beta, E = args.lr, args.momentum, args.epochs
    train_loss = []
    for r in rounds:
        picked = r["sampled"]
        n = np.array([len(ys[c]) for c in picked], dtype=np.float64)
        train_loss.append(sum(losses(w, b, xs[c], ys[c]).sum() for c in picked) / n.sum())
        full = [grad(w, b, xs[c], ys[c]) for c in picked]
        cw = sum(k * g[0] for k, g in zip(n, full)) / n.sum()
        cb = sum(k * g[1] for k, g in zip(n, full)) / n.sum()
        dw, db = np.zeros_like(w), np.zeros_like(b)
        for k, c, (fw, fb) in zip(n, picked, full):
            tw, tb = w.copy(), b.copy()
            for _ in range(E):
                gw, gb = grad(tw, tb, xs[c], ys[c])
                if not lite:
                    gw, gb = gw - fw + cw, gb - fb + cb  # full batch: g_i(x; b) is the client's full gradient
                tw, tb = tw - lr * (beta * vw + gw), tb - lr * (beta * vb + gb)
            dw += k * (w - tw)
            db += k * (b - tb)
        w, b = w - args.server_lr * dw / n.sum(), b - args.server_lr * db / n.sum()
        vw, vb = beta * vw + cw, beta * vb + cb
    return {"model.w": w, "model.b": b, "opt.velocity": np.concatenate([vw.ravel(), vb])}, train_loss


def agnostic(args, xs, ys, ds, rounds):
    D = args.num_domains
    w, b = np.zeros((60, 10)), np.zeros(10)
    lam, window = np.full(D, 1.0 / D), np.ones(D)
    train_loss = []
    for r in rounds:
        picked = r["sampled"]
        alpha = lam / np.maximum(window, 1.0)
        L, N = np.zeros(D), np.zeros(D)
        dw, db, betas = np.zeros_like(w), np.zeros_like(b), []
        for c in picked:
            l = losses(w, b, xs[c], ys[c])
            Li = np.bincount(ds[c], weights=l, minlength=D)
            Ni = np.bincount(ds[c], minlength=D).astype(np.float64)
            L, N = L + Li, N + Ni
            beta = float(np.sum(alpha * Ni))
            tw, tb = w.copy(), b.copy()
            for _ in range(args.epochs):  # full batch: the scaled loss of all the client's examples
                gw, gb = grad(tw, tb, xs[c], ys[c], alpha[ds[c]] * len(ys[c]) / beta)
                tw, tb = tw - args.lr * gw, tb - args.lr * gb
            dw += beta * (w - tw)
            db += beta * (b - tb)
            betas.append(beta)
        train_loss.append(L.sum() / N.sum())
        w, b = w - args.server_lr * dw / sum(betas), b - args.server_lr * db / sum(betas)
        mean = np.where(N > 0, L / np.maximum(N, 1.0), 0.0)
        lam = np.maximum(lam * np.exp(args.domain_lr * mean), 0.0)
        lam /= lam.sum()
        window = N
    return {"model.w": w, "model.b": b, "domain_weights": lam, "domain_window": window}, train_loss


def hypcluster(args, xs, ys, rounds):
    """Replays the rounds after the checkpoint --start (the K models are random: the reference starts
    from fedvm's models of that round rather than drawing its own)."""
    start = parse_safetensors(open(args.start, "rb").read())[0]
    W, B = start["w"].copy(), start["b"].copy()
    K = len(W)
    train_loss = []
    for r in rounds:
        picked = r["sampled"]
        dw, db, nk = np.zeros_like(W), np.zeros_like(B), np.zeros(K)
        total, count = 0.0, 0
        for c in picked:
            mean_losses = [losses(W[k], B[k], xs[c], ys[c]).mean() for k in range(K)]
            k = int(np.argmin(mean_losses))  # the first of equal ones
            total += mean_losses[k] * len(ys[c])
            count += len(ys[c])
            tw, tb = W[k].copy(), B[k].copy()
            for _ in range(args.epochs):
                gw, gb = grad(tw, tb, xs[c], ys[c])
                tw, tb = tw - args.lr * gw, tb - args.lr * gb
            dw[k] += len(ys[c]) * (W[k] - tw)
            db[k] += len(ys[c]) * (B[k] - tb)
            nk[k] += len(ys[c])
        train_loss.append(total / count)
        for k in range(K):
            if nk[k] > 0:  # a cluster no client picked keeps its model
                W[k] -= args.server_lr * dw[k] / nk[k]
                B[k] -= args.server_lr * db[k] / nk[k]
    return {"w": W, "b": B}, train_loss


def ditto(args, xs, ys, rounds):
    w, b = np.zeros((60, 10)), np.zeros(10)
    personal = {}
    train_loss, personal_loss = [], []
    for r in rounds:
        picked = r["sampled"]
        n = np.array([len(ys[c]) for c in picked], dtype=np.float64)
        train_loss.append(sum(losses(w, b, xs[c], ys[c]).sum() for c in picked) / n.sum())
        dw, db, ploss = np.zeros_like(w), np.zeros_like(b), 0.0
        for k, c in zip(n, picked):
            tw, tb = w.copy(), b.copy()
            for _ in range(args.epochs):  # FedAvg's local training of the global model
                gw, gb = grad(tw, tb, xs[c], ys[c])
                tw, tb = tw - args.lr * gw, tb - args.lr * gb
            dw += k * (w - tw)
            db += k * (b - tb)
            vw, vb = personal.get(c, (np.zeros((60, 10)), np.zeros(10)))
            for _ in range(args.personal_epochs):  # the personal objective F_k(v) + lambda/2 |v - w|^2
                gw, gb = grad(vw, vb, xs[c], ys[c])
                vw, vb = vw - args.lr * (gw + args.lam * (vw - w)), vb - args.lr * (gb + args.lam * (vb - b))
            personal[c] = (vw, vb)
            ploss += losses(vw, vb, xs[c], ys[c]).sum()
        personal_loss.append(ploss / n.sum())
        w, b = w - args.server_lr * dw / n.sum(), b - args.server_lr * db / n.sum()
    return {"w": w, "b": b}, train_loss, personal_loss, personal


def fednova(args, xs, ys, rounds):
    w, b = np.zeros((60, 10)), np.zeros(10)
    train_loss = []
    for r in rounds:
        picked = r["sampled"]
        n = np.array([len(ys[c]) for c in picked], dtype=np.float64)
        p = n / n.sum()
        train_loss.append(sum(losses(w, b, xs[c], ys[c]).sum() for c in picked) / n.sum())
        dw, db, aw, ab, tau_eff = np.zeros_like(w), np.zeros_like(b), np.zeros_like(w), np.zeros_like(b), 0.0
        for pi, c in zip(p, picked):
            e = args.min_epochs + c % (args.epochs - args.min_epochs + 1)
            tw, tb = w.copy(), b.copy()
            for _ in range(e):
                gw, gb = grad(tw, tb, xs[c], ys[c])
                tw, tb = tw - args.lr * gw, tb - args.lr * gb
            tau = e * -(-len(ys[c]) // args.batch_size)
            dw += pi * (w - tw) / tau
            db += pi * (b - tb) / tau
            aw += pi * (w - tw)
            ab += pi * (b - tb)
            tau_eff += pi * tau
        if args.plain:
            w, b = w - args.server_lr * aw, b - args.server_lr * ab
        else:
            w, b = w - args.server_lr * tau_eff * dw, b - args.server_lr * tau_eff * db
    return {"w": w, "b": b}, train_loss


def check_store(store, personal, fails):
    db_ = sqlite3.connect(store)
    latest = {}
    for c, _, blob in db_.execute("SELECT client, round, state FROM client_state ORDER BY client, round"):
        latest[c] = parse_safetensors(blob)[0]
    if sorted(latest) != sorted(personal):
        fails.append("the store holds clients %s, the reference %s" % (sorted(latest), sorted(personal)))
    for c in personal:
        if c in latest:
            close("client %d w" % c, latest[c]["w"], personal[c][0], fails)
            close("client %d b" % c, latest[c]["b"], personal[c][1], fails)


def check(args):
    data = json.load(open(args.data))
    xs = [np.array([e["x"] for e in c], dtype=np.float64) for c in data]
    ys = [np.array([e["y"] for e in c], dtype=np.int64) for c in data]
    ds = [np.array([e.get("domain_id", 0) for e in c], dtype=np.int64) for c in data]
    rounds = [json.loads(l) for l in open(args.metrics) if '"round"' in l]
    for r in rounds:
        r.setdefault("sampled", list(range(len(data))))
    if args.algo in ("mime", "mime_lite"):
        want, train_loss = mime(args, xs, ys, rounds, args.algo == "mime_lite")
    elif args.algo == "hypcluster":
        if not args.start:
            sys.exit("hypcluster needs --start CHECKPOINT")
        rounds = [r for r in rounds if r["round"] > args.start_round]
        want, train_loss = hypcluster(args, xs, ys, rounds)
    elif args.algo == "ditto":
        want, train_loss, personal_loss, personal = ditto(args, xs, ys, rounds)
    elif args.algo == "fednova":
        want, train_loss = fednova(args, xs, ys, rounds)
    elif args.algo == "agnostic_fedavg":
        want, train_loss = agnostic(args, xs, ys, ds, rounds)
    else:
        sys.exit("unknown algorithm " + args.algo)
    fails = []
    ck = parse_safetensors(open(args.checkpoint, "rb").read())[0]
    for k, v in want.items():
        if k not in ck:
            fails.append("the checkpoint has no %s (it has %s)" % (k, sorted(ck)))
        else:
            close(k, ck[k], v, fails)
    for r, want_loss in zip(rounds, train_loss):
        close("round %d training loss" % r["round"], r["train"]["loss"], want_loss, fails)
    if args.algo == "ditto":
        for r, want_loss in zip(rounds, personal_loss):
            close("round %d personal loss" % r["round"], r["train"]["personal_loss"], want_loss, fails)
        if not args.store:
            sys.exit("ditto needs --store client_states.sqlite")
        check_store(args.store, personal, fails)
    for f in fails:
        print("FAIL:", f)
    print("%s reference: %d rounds, %d checks failed" % (args.algo, len(rounds), len(fails)))
    return 1 if fails else 0


def make_data(args):
    """Clients of <x=f32[60],y=i32[],domain_id=i32[]> examples in two domains, each labelled by its
    own linear model; domain 1 is a minority (about a fifth of the examples), and some clients hold
    only one domain. Values are multiples of 1/64, exactly representable in f32."""
    rng = np.random.default_rng(args.seed)
    teachers = [rng.normal(0, 1, (60, 10)) for _ in range(2)]
    clients = []
    for c in range(args.clients):
        n = int(rng.integers(args.min_examples, args.max_examples + 1))
        kind = c % 5
        d = np.zeros(n, dtype=np.int64) if kind < 3 else (np.ones(n, dtype=np.int64) if kind == 3 else rng.integers(0, 2, n))
        x = np.round(rng.normal(0, 1, (n, 60)) * 64) / 64
        y = np.array([int(np.argmax(row @ teachers[k])) for row, k in zip(x, d)])
        if kind == 3 and n > 2:  # a minority client: few examples
            x, y, d = x[:n // 3], y[:n // 3], d[:n // 3]
        clients.append([{"x": [float(v) for v in row], "y": int(t), "domain_id": int(k)} for row, t, k in zip(x, y, d)])
    json.dump(clients, open(args.out, "w"))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("out")
    d.add_argument("--clients", type=int, default=10)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--min-examples", type=int, default=3)
    d.add_argument("--max-examples", type=int, default=12)
    c = sub.add_parser("check")
    for a in ("algo", "data", "metrics", "checkpoint"):
        c.add_argument(a)
    c.add_argument("--epochs", type=int, required=True)
    c.add_argument("--lr", type=float, required=True)
    c.add_argument("--momentum", type=float, default=0.9)
    c.add_argument("--server-lr", type=float, default=1.0)
    c.add_argument("--num-domains", type=int, default=2)
    c.add_argument("--lambda", dest="lam", type=float, default=0.1)
    c.add_argument("--personal-epochs", type=int, default=20)
    c.add_argument("--min-epochs", type=int, default=20)
    c.add_argument("--batch-size", type=int, default=100)
    c.add_argument("--plain", action="store_true", help="fednova: FedAvg's average (normalize false)")
    c.add_argument("--store", help="ditto: the clients' states (client_states.sqlite)")
    c.add_argument("--start", help="hypcluster: the checkpoint the replay starts from")
    c.add_argument("--start-round", type=int, default=0, help="hypcluster: the round of --start")
    c.add_argument("--domain-lr", type=float, default=0.1)
    args = ap.parse_args()
    if args.cmd == "data":
        make_data(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
