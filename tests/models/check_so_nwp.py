#!/usr/bin/env python3
"""check_so_nwp.py [ROOT] - programs/models/so_nwp.json's loss, accuracies and gradient against FedJAX's, in NumPy.

Runs the model's functions in-process (the fedvm package over lib/libfedvm.so)
and compares them with an independent float64 NumPy forward pass and FedJAX's
definitions, written here from fedjax/models/stackoverflow.py and
fedjax/core/metrics.py:

- the forward pass: embedding, hk.DeepRNN([LSTM, tanh, Linear(embed)]) (the
  recurrent state the LSTM's own, tanh on its output only), Linear(vocab);
  the LSTM cell as format/SPEC.md's lstm_cell (gates i, f, g, o);
- train_loss (expected_length None): each sentence's cross-entropy summed
  over its non-PAD targets; model_grad differentiates its mean over the
  batch, so loss = (sum over non-PAD targets) / sentences; train_loss that
  times 1 / 13.3 (the STACKOVERFLOW_WORD task's expected_length, in
  fedjax/training/tasks.py); token_loss the same sum / non-PAD targets (0
  with none);
- accuracy_in_vocab: SequenceTokenAccuracy(masked_target_values=(PAD, EOS),
  logits_mask -inf at PAD, BOS, EOS, OOV), accuracy_no_eos the same without
  the logits mask; right argmax predictions over the targets that are neither
  PAD nor EOS, summed over the batch, 0 when there are none;
- the gradient of the loss with respect to the output layer (dense, dense_b),
  from the softmax's derivative: sum over non-PAD targets of
  (softmax - onehot) (times the layer's input for dense), / sentences.

The shipped model has FedJAX's shape (10004 labels, 96, 670); the check runs a
copy of it with smaller dimensions (vocabulary 50 + 4, embedding 6, LSTM 10;
the same 20 positions), made by replacing those numbers in its text. Every
value must agree within 1e-5 relative (the gradient 1e-4 absolute on its
largest entry's scale). The check is shown to be able to fail: a reference
without the tanh disagrees with fedvm, and copies of the model without its
tanh or its logits mask fail the check.

Usage: check_so_nwp.py [ROOT]  (ROOT: the checkout, default the current directory)
"""
import json
import os
import re
import sys

import numpy as np

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
import fedvm  # noqa: E402

PAD, BOS, EOS, T = 0, 1, 2, 20
WORDS, E, H = 50, 6, 10
V = WORDS + 4
OOV = V - 1
SHRINK = {"10004": V, "10000": WORDS, "96": E, "670": H, "2680": 4 * H, "1340": 2 * H}
RTOL = 1e-5


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def forward(model, x, tanh=True):
    """[B, T, V] float64 logits and [B, T, E] projections of the model on x (i32[B, T])."""
    m = {k: ({kk: np.float64(vv) for kk, vv in v.items()} if isinstance(v, dict) else np.float64(v))
         for k, v in model.items()}
    b = x.shape[0]
    h, c = np.zeros([b, H]), np.zeros([b, H])
    logits, proj = np.zeros([b, T, V]), np.zeros([b, T, E])
    p = m["lstm"]
    for t in range(T):
        z = m["embed"][x[:, t]] @ p["wx"] + h @ p["wh"] + p["b"]
        i, f, g, o = (z[:, k * H:(k + 1) * H] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        out = np.tanh(h) if tanh else h
        proj[:, t] = out @ m["proj"] + m["proj_b"]
        logits[:, t] = proj[:, t] @ m["dense"] + m["dense_b"]
    return logits, proj


def reference(logits, proj, y):
    mx = logits.max(axis=-1, keepdims=True)
    ex = np.exp(logits - mx)
    soft = ex / ex.sum(axis=-1, keepdims=True)
    lse = (mx + np.log(ex.sum(axis=-1, keepdims=True)))[..., 0]
    ce = lse - np.take_along_axis(logits, y[..., None], axis=-1)[..., 0]
    real = y != PAD
    scored = real & (y != EOS)
    mask = np.zeros(V)
    mask[[PAD, BOS, EOS, OOV]] = -np.inf
    right_iv = ((logits + mask).argmax(axis=-1) == y) & scored
    right_all = (logits.argmax(axis=-1) == y) & scored
    n = scored.sum()
    b = y.shape[0]
    d = (soft - np.eye(V)[y]) * real[..., None] / b  # d loss / d logits
    return {"loss": float((ce * real).sum() / b), "train_loss": float((ce * real).sum(axis=1).mean() / 13.3),
            "token_loss": float((ce * real).sum() / max(real.sum(), 1)),
            "accuracy": right_iv.sum() / n if n else 0.0,
            "accuracy_no_eos": right_all.sum() / n if n else 0.0, "tokens": float(real.sum()), "scored": float(n),
            "right": float(right_iv.sum()), "right_no_eos": float(right_all.sum()),
            "dense_b": d.sum(axis=(0, 1)), "dense": np.einsum("bte,btv->ev", proj, d)}


def near_ties(logits):
    s = np.sort(logits, axis=-1)
    return int(((s[..., -1] - s[..., -2]) < 1e-4).sum())


def sequences(rng, lengths):
    """x, y as 'fedvm data preprocess stackoverflow' makes them: BOS, words (some OOV), EOS, then PAD; truncated to 20."""
    x = np.zeros([len(lengths), T], np.int32)
    y = np.zeros([len(lengths), T], np.int32)
    for r, n in enumerate(lengths):
        if n < 0:
            continue
        ids = np.concatenate([[BOS], rng.integers(3, V, n), [EOS]]).astype(np.int32)  # 3..OOV
        k = min(len(ids) - 1, T)
        x[r, :k] = ids[:-1][:k]
        y[r, :k] = ids[1:][:k]
    return x, y


def model_of(rng):
    def u(shape, lim):
        return rng.uniform(-lim, lim, shape).astype(np.float32)
    dense_b = u([V], 0.5)
    dense_b[[EOS, OOV, BOS]] += 0.7  # special labels predicted often: the logits mask changes the accuracy
    return {"embed": u([V, E], 1.0), "lstm": {"wx": u([E, 4 * H], 0.6), "wh": u([H, 4 * H], 0.4), "b": u([4 * H], 0.5)},
            "proj": u([H, E], 1.0), "proj_b": u([E], 0.3), "dense": u([E, V], 1.0), "dense_b": dense_b}


def shrunk(text):
    return re.sub(r"(?<![\d.e-])(%s)(?![\d.])" % "|".join(SHRINK), lambda m: str(SHRINK[m.group(1)]), text)


def with_grad(text):
    doc = json.loads(text)
    doc["functions"]["so_nwp_grad"] = {
        "params": {"model": "SoNwp", "batch": "SoBatch"},
        "body": [["g", "grad", {"fn": "so_nwp_loss", "wrt": "model"}, "model", "batch"]], "result": "g"}
    return json.dumps(doc)


def close(a, b):
    return abs(a - b) <= RTOL * abs(b) + 1e-30


def compare(prog, model, batches, label, tanh=True):
    errs = []
    for k, (x, y) in enumerate(batches):
        lg, pj = forward(model, x, tanh)
        want = reference(lg, pj, y)
        batch = {"x": x, "y": y}
        un = prog.so_nwp_unroll(model, batch)
        counts = prog.so_nwp_counts(batch)
        got = {"loss": float(prog.so_nwp_loss(model, batch)), "train_loss": float(prog.so_nwp_train_loss(model, batch)),
               "token_loss": float(prog.so_nwp_token_loss(model, batch)),
               "accuracy": float(prog.so_nwp_accuracy(model, batch)),
               "accuracy_no_eos": float(prog.so_nwp_accuracy_no_eos(model, batch)),
               "tokens": float(counts["tokens"]), "scored": float(counts["scored"]),
               "right": float(un["right"]), "right_no_eos": float(un["right_no_eos"])}
        for name in ("loss", "train_loss", "token_loss", "tokens", "scored"):
            if not close(got[name], want[name]):
                errs.append("%s batch %d: %s %.9g, NumPy %.9g" % (label, k, name, got[name], want[name]))
        ties = near_ties(lg)
        slack = ties / max(want["scored"], 1.0)
        for name, r in (("accuracy", "right"), ("accuracy_no_eos", "right_no_eos")):
            if abs(got[r] - want[r]) > ties or abs(got[name] - want[name]) > RTOL * abs(want[name]) + slack + 1e-30:
                errs.append("%s batch %d: %s %.9g, NumPy %.9g (%d near ties)" % (label, k, name, got[name], want[name],
                                                                                  ties))
        g = prog.so_nwp_grad(model, batch)
        for name in ("dense_b", "dense"):
            gg, ww = np.asarray(g[name], np.float64), want[name]
            scale = max(np.abs(ww).max(), 1e-6)
            if np.abs(gg - ww).max() > 1e-4 * scale:
                errs.append("%s batch %d: d loss / d %s off by %.3g (scale %.3g)" % (
                    label, k, name, np.abs(gg - ww).max(), scale))
        if label == "model":
            print("batch %d: B=%d tokens %d scored %d loss %.6f (NumPy %.6f) accuracy_in_vocab %.4f (%.4f) "
                  "accuracy_no_eos %.4f (%.4f) |d dense - NumPy| %.2g" % (
                      k, x.shape[0], want["tokens"], want["scored"], got["loss"], want["loss"], got["accuracy"],
                      want["accuracy"], got["accuracy_no_eos"], want["accuracy_no_eos"],
                      np.abs(np.asarray(g["dense"]) - want["dense"]).max()))
    return errs


def main():
    rng = np.random.default_rng(23)
    model = model_of(rng)
    batches = [sequences(rng, [5, 18, 19, 30, 0]),  # EOS at 6, 19, 20; one truncated; one of EOS alone
               sequences(rng, [-1, 12, 3]),  # a row of PAD only
               sequences(rng, [-1, -1])]  # no target: loss 0, accuracies 0
    for x, y in batches:  # some word targets set to the in-vocabulary prediction, so that some are right
        lg, _ = forward(model, x)
        lg[..., [PAD, BOS, EOS, OOV]] = -np.inf
        pred = lg.argmax(axis=-1)
        pick = (y >= 3) & (y < OOV) & (rng.random(y.shape) < 0.5)
        y[pick] = pred[pick]
    path = os.path.join(ROOT, "programs", "models", "so_nwp.json")
    text = shrunk(open(path).read())
    prog = fedvm.loads(with_grad(text), path)
    errs = compare(prog, model, batches, "model")
    x, y = batches[0]
    lg, pj = forward(model, x)
    w = reference(lg, pj, y)
    if w["right"] == 0 or w["right"] == w["right_no_eos"]:
        errs.append("the accuracies do not tell the logits mask apart (right %g, %g)" % (w["right"], w["right_no_eos"]))
    if not compare(prog, model, batches[:1], "reference without tanh", tanh=False):
        errs.append("a reference without the tanh agrees with fedvm: the check could not fail")
    for old, new, what in (('["out", "tanh", "hn"]', '["out", "mul", "hn", 1.0]', "tanh"),
                           ('["masked", "add", "logits", "mask"]', '["masked", "add", "logits", 0.0]', "logits mask")):
        if text.count(old) != 1:
            errs.append("so_nwp.json: %s is not there to remove" % old)
            continue
        broken = compare(fedvm.loads(with_grad(text.replace(old, new)), path), model, batches, "model without " + what)
        if not broken:
            errs.append("the model without its %s passed the check" % what)
        else:
            print("the model without its %s fails the check: %d errors, e.g. %s" % (what, len(broken), broken[0]))
    if errs:
        for e in errs:
            print("FAIL: " + e)
        print("check_so_nwp: %d errors" % len(errs))
        return 1
    print("check_so_nwp: loss, accuracies, counts and the output layer's gradient agree with FedJAX's definitions "
          "in NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
