#!/usr/bin/env python3
"""reference.py - SCAFFOLD and FedDyn written apart from fedvm, in NumPy (float64), for the
client-state tests (tests/run_client_state.sh).

  reference.py data OUT.json --clients N --seed S
      writes N clients of <x=f32[60],y=i32[]> examples as fedvm's JSON form of {T*}@CLIENTS
      (between 3 and 12 examples each, values exactly representable in f32);
  reference.py check ALGO DATA.json METRICS.jsonl CHECKPOINT STORE --epochs E --lr LR [--alpha A]
      replays the run from its metrics file (which clients each round sampled) with full-batch
      local steps (batch_size >= every client's examples, so the shuffle does not change a step
      but for the order of a mean), then compares the final server state with the checkpoint and
      every client's latest state in the SQLite store with the reference, to a relative 1e-4.

The algorithms follow the papers, not fedvm's programs: SCAFFOLD (Karimireddy et al. 2020)
Algorithm 1 with option II; FedDyn (Acar et al. 2021) Algorithm 1."""
import argparse, json, os, sqlite3, sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reflib import close_rel as close, parse_safetensors  # noqa: E402


def softmax_grad(w, b, x, y):
    z = x @ w + b
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    return x.T @ p / len(y), p.mean(axis=0)


def make_data(args):
    rng = np.random.default_rng(args.seed)
    clients = []
    for c in range(args.clients):
        n = int(rng.integers(3, 13))
        shift = rng.normal(0, 1, 60)
        x = np.round((rng.normal(0, 1, (n, 60)) + shift) * 64) / 64
        y = rng.integers(0, 10, n) if c % 2 else rng.integers(0, 3, n)
        clients.append([{"x": [float(v) for v in row], "y": int(t)} for row, t in zip(x, y)])
    json.dump(clients, open(args.out, "w"))


def check(args):
    data = json.load(open(args.data))
    xs = [np.array([e["x"] for e in c], dtype=np.float64) for c in data]
    ys = [np.array([e["y"] for e in c], dtype=np.int64) for c in data]
    n_all = len(data)
    rounds = [json.loads(l) for l in open(args.metrics) if '"round"' in l]
    w, b = np.zeros((60, 10)), np.zeros(10)
    s_w, s_b = np.zeros((60, 10)), np.zeros(10)  # SCAFFOLD's c, FedDyn's h
    states = {}
    lr, E = args.lr, args.epochs
    for r in rounds:
        picked = r.get("sampled", list(range(n_all)))
        dw, db, sw, sb = [], [], [], []
        for c in picked:
            cw, cb = states.get(c, (np.zeros((60, 10)), np.zeros(10)))
            tw, tb = w.copy(), b.copy()
            for _ in range(E):
                gw, gb = softmax_grad(tw, tb, xs[c], ys[c])
                if args.algo == "scaffold":
                    gw, gb = gw - cw + s_w, gb - cb + s_b
                else:
                    gw, gb = gw - cw + args.alpha * (tw - w), gb - cb + args.alpha * (tb - b)
                tw, tb = tw - lr * gw, tb - lr * gb
            if args.algo == "scaffold":
                K = E  # full batch: one step per epoch
                nw, nb = cw - s_w + (w - tw) / (K * lr), cb - s_b + (b - tb) / (K * lr)
                dw.append(w - tw), db.append(b - tb), sw.append(nw - cw), sb.append(nb - cb)
            else:
                nw, nb = cw - args.alpha * (tw - w), cb - args.alpha * (tb - b)
                dw.append(tw - w), db.append(tb - b)
            states[c] = (nw, nb)
        if args.algo == "scaffold":
            w, b = w - np.mean(dw, axis=0), b - np.mean(db, axis=0)
            s_w, s_b = s_w + np.sum(sw, axis=0) / n_all, s_b + np.sum(sb, axis=0) / n_all
        else:
            s_w = s_w - args.alpha * np.sum(dw, axis=0) / n_all
            s_b = s_b - args.alpha * np.sum(db, axis=0) / n_all
            w = w + np.mean(dw, axis=0) - s_w / args.alpha
            b = b + np.mean(db, axis=0) - s_b / args.alpha
    fails = []
    ck = parse_safetensors(open(args.checkpoint, "rb").read())[0]
    other = "c" if args.algo == "scaffold" else "h"
    close("model.w", ck["model.w"], w, fails)
    close("model.b", ck["model.b"], b, fails)
    close(other + ".w", ck[other + ".w"], s_w, fails)
    close(other + ".b", ck[other + ".b"], s_b, fails)
    db_ = sqlite3.connect(args.store)
    rows = db_.execute("SELECT client, round, state FROM client_state ORDER BY client, round").fetchall()
    latest = {}
    for c, rnd, blob in rows:
        latest[c] = parse_safetensors(blob)[0]
    if sorted(latest) != sorted(states):
        fails.append("the store holds clients %s, the reference %s" % (sorted(latest), sorted(states)))
    for c in states:
        if c in latest:
            close("client %d w" % c, latest[c]["w"], states[c][0], fails)
            close("client %d b" % c, latest[c]["b"], states[c][1], fails)
    for f in fails:
        print("FAIL:", f)
    print("%s reference: %d rounds, %d clients with state, %d checks failed" % (args.algo, len(rounds), len(states), len(fails)))
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("out")
    d.add_argument("--clients", type=int, default=6)
    d.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("check")
    for a in ("algo", "data", "metrics", "checkpoint", "store"):
        c.add_argument(a)
    c.add_argument("--epochs", type=int, required=True)
    c.add_argument("--lr", type=float, required=True)
    c.add_argument("--alpha", type=float, default=0.01)
    args = ap.parse_args()
    if args.cmd == "data":
        make_data(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
