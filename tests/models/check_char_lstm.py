#!/usr/bin/env python3
"""check_char_lstm.py - programs/models/char_lstm.json's loss and accuracy against FedJAX's, in NumPy.

Runs the model's functions in-process (the fedvm package over lib/libfedvm.so)
on batches with padding and EOS, and compares them with an independent float64
NumPy forward pass (embedding, the two LSTM layers as format/SPEC.md's
lstm_cell defines them, each layer's output through tanh as FedJAX's
hk.DeepRNN([LSTM(256), tanh, LSTM(256), tanh]) has it, the recurrent state
the LSTM's own; the dense layer) and FedJAX's definitions, written here
from fedjax/models/shakespeare.py, fedjax/core/metrics.py and models.py:

- train_loss zeroes the cross-entropy of PAD targets (0) and takes each
  sequence's mean over its 80 positions; model_grad differentiates the mean
  over the batch: (sum over non-PAD targets) / (80 * sequences);
- SequenceTokenAccuracy(masked_target_values=(PAD, EOS)): right argmax
  predictions over the targets that are neither, summed over the batch, divided
  by their number; MeanStat.result's safe_div gives 0 when there are none;
- the counts: non-PAD targets (num_tokens) and non-PAD, non-EOS targets.

Every value must agree within 1e-5 relative. The check is shown to be able to
fail: the references without the masks, and the forward pass without the
tanh, must disagree with fedvm, and copies of the model with its masks or its
tanh removed (text edits of its step) must fail the check.

Usage: check_char_lstm.py [ROOT]  (ROOT: the checkout, default the current directory)
"""
import os
import sys

import numpy as np

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
sys.dont_write_bytecode = True  # nothing written into the checkout
sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
import fedvm  # noqa: E402

PAD, BOS, EOS, OOV, V, T, H = 0, 1, 2, 89, 90, 80, 256
RTOL = 1e-5


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def logits_of(model, x, tanh=True):
    """[B, T, V] float64 logits of the model (dict of arrays) on x (i32[B, T]); tanh=False: without the tanh
    after each layer (the model before it matched FedJAX's)."""
    m = {k: ({kk: np.float64(vv) for kk, vv in v.items()} if isinstance(v, dict) else np.float64(v))
         for k, v in model.items()}
    b = x.shape[0]
    h1, c1, h2, c2 = (np.zeros([b, H]) for _ in range(4))
    out = np.zeros([b, T, V])

    def cell(inp, h, c, p):
        z = inp @ p["wx"] + h @ p["wh"] + p["b"]
        i, f, g, o = (z[:, k * H:(k + 1) * H] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        return sigmoid(o) * np.tanh(c), c

    for t in range(T):
        e = m["embed"][x[:, t]]
        act = np.tanh if tanh else (lambda v: v)
        h1, c1 = cell(e, h1, c1, m["lstm1"])
        h2, c2 = cell(act(h1), h2, c2, m["lstm2"])
        out[:, t] = act(h2) @ m["dense"] + m["dense_b"]
    return out


def reference(logits, y, masked=True):
    """FedJAX's loss, accuracy and counts; masked=False: every position counted (the old definitions)."""
    mx = logits.max(axis=-1, keepdims=True)
    lse = (mx + np.log(np.exp(logits - mx).sum(axis=-1, keepdims=True)))[..., 0]
    ce = lse - np.take_along_axis(logits, y[..., None], axis=-1)[..., 0]
    loss_w = (y != PAD) if masked else np.ones(y.shape, bool)
    acc_w = ((y != PAD) & (y != EOS)) if masked else np.ones(y.shape, bool)
    right = (logits.argmax(axis=-1) == y) & acc_w
    loss = np.mean(np.mean(ce * loss_w, axis=-1))  # train_loss per sequence, mean over the batch
    scored = acc_w.sum()
    accuracy = right.sum() / scored if scored > 0 else 0.0
    return {"loss": loss, "accuracy": accuracy, "tokens": float(loss_w.sum()), "scored": float(scored),
            "loss_sum": float((ce * loss_w).sum()), "right": float(right.sum())}


def near_ties(logits, y):
    """Positions whose top two logits are within 1e-4: float32 and float64 may pick differently there."""
    s = np.sort(logits, axis=-1)
    return int(((s[..., -1] - s[..., -2]) < 1e-4).sum())


def sequences(rng, lengths):
    """x, y as 'fedvm data preprocess shakespeare' makes them: BOS, characters, EOS, then PAD."""
    x = np.zeros([len(lengths), T], np.int32)
    y = np.zeros([len(lengths), T], np.int32)
    for r, n in enumerate(lengths):
        if n < 0:  # a row whose targets are all PAD
            continue
        toks = np.concatenate([[BOS], rng.integers(3, 89, n), [EOS]]).astype(np.int32)[:T + 1]
        x[r, :len(toks) - 1] = toks[:-1]
        y[r, :len(toks) - 1] = toks[1:]
    return x, y


def model_of(rng):
    """Random weights, f32; the dense layer scaled up so that predictions are confident and some right."""
    def u(shape, lim):
        return rng.uniform(-lim, lim, shape).astype(np.float32)
    lstm = lambda i: {"wx": u([i, 4 * H], 0.15), "wh": u([H, 4 * H], 0.07), "b": u([4 * H], 0.5)}
    dense_b = u([V], 1.0)
    dense_b[EOS] += 2.0  # EOS predicted often: masking it changes the accuracy's numerator too
    return {"embed": u([V, 8], 1.0), "lstm1": lstm(8), "lstm2": lstm(H), "dense": u([H, V], 0.6), "dense_b": dense_b}


def compare_logits(prog, model, x, y):
    """True when fedvm's loss on (x, y) differs from the reference without the tanh (the check can fail)."""
    got = float(prog.char_lstm_loss(model, {"x": x, "y": y}))
    return not close(got, reference(logits_of(model, x, tanh=False), y)["loss"])


def close(a, b):
    return abs(a - b) <= RTOL * abs(b) + 1e-30


def compare(prog, model, batches, label):
    """Errors (a list of strings) of prog's loss, accuracy and counts against the reference."""
    errs = []
    for k, (x, y) in enumerate(batches):
        lg = logits_of(model, x)
        want = reference(lg, y)
        batch = {"x": x, "y": y}
        got_unroll = prog.char_lstm_unroll(model, batch)
        counts = prog.char_lstm_counts(batch)
        got = {"loss": float(prog.char_lstm_loss(model, batch)),
               "accuracy": float(prog.char_lstm_accuracy(model, batch)),
               "tokens": float(counts["tokens"]), "scored": float(counts["scored"]),
               "loss_sum": float(got_unroll["loss"]), "right": float(got_unroll["right"])}
        ties = near_ties(lg, y)
        for name in ("loss", "loss_sum", "tokens", "scored"):
            if not close(got[name], want[name]):
                errs.append("%s batch %d: %s %.9g, NumPy %.9g" % (label, k, name, got[name], want[name]))
        # argmax may differ at near ties between float32 and float64: allow one hit per such position
        slack = ties / max(want["scored"], 1.0)
        if abs(got["right"] - want["right"]) > ties or abs(got["accuracy"] - want["accuracy"]) > RTOL * abs(
                want["accuracy"]) + slack + 1e-30:
            errs.append("%s batch %d: accuracy %.9g (%g right), NumPy %.9g (%g right), %d near ties" % (
                label, k, got["accuracy"], got["right"], want["accuracy"], want["right"], ties))
        if label == "model":
            print("batch %d: B=%d tokens %d scored %d loss %.7f (NumPy %.7f) accuracy %.6f (NumPy %.6f)%s" % (
                k, x.shape[0], want["tokens"], want["scored"], got["loss"], want["loss"], got["accuracy"],
                want["accuracy"], ", %d near ties" % ties if ties else ""))
    return errs


def main():
    rng = np.random.default_rng(17)
    model = model_of(rng)
    batches = [
        sequences(rng, [78, 40, 5, 100]),  # a full row (no EOS in it), EOS at 41 and 6 then PAD, one longer than 80
        sequences(rng, [-1, 12, 79]),  # a row of PAD only, EOS at the last position
        sequences(rng, [-1, -1]),  # no target: loss 0, accuracy 0
        sequences(rng, [0]),  # one target, EOS: loss > 0, no scored target, accuracy 0
    ]
    # some character targets set to the model's prediction, so that the accuracy counts right answers
    # (the forward pass depends on x alone; y's only role is the targets)
    for x, y in batches:
        pred = logits_of(model, x).argmax(axis=-1)
        pick = (y >= 3) & (y < OOV) & (pred >= 3) & (pred < OOV) & (rng.random(y.shape) < 0.4)
        y[pick] = pred[pick]
    path = os.path.join(ROOT, "programs", "models", "char_lstm.json")
    prog = fedvm.load(path)
    errs = compare(prog, model, batches, "model")

    # the check can fail: references without the masks disagree with fedvm ...
    x, y = batches[0]
    lg = logits_of(model, x)
    masked, unmasked = reference(lg, y), reference(lg, y, masked=False)
    got_loss = float(prog.char_lstm_loss(model, {"x": x, "y": y}))
    got_acc = float(prog.char_lstm_accuracy(model, {"x": x, "y": y}))
    if close(got_loss, unmasked["loss"]) or close(got_acc, unmasked["accuracy"]) or masked["right"] == 0:
        errs.append("the unmasked reference agrees with fedvm (or nothing is right): the check could not fail")
    # ... and so does the forward pass without the tanh after each layer
    if not compare_logits(prog, model, x, y):
        errs.append("the reference without tanh agrees with fedvm: the check could not fail")
    # ... and so does a model whose step lost its masks, or its tanh
    text = open(path).read()
    for old, new in (('["out1", "tanh", "h1n"]', '["out1", "mul", "h1n", 1.0]'),
                     ('["out2", "tanh", "h2n"]', '["out2", "mul", "h2n", 1.0]')):
        if text.count(old) != 1:
            errs.append("char_lstm.json: %s is not there to remove" % old)
    no_tanh = text.replace('["out1", "tanh", "h1n"]', '["out1", "mul", "h1n", 1.0]').replace(
        '["out2", "tanh", "h2n"]', '["out2", "mul", "h2n", 1.0]')
    broken = compare(fedvm.loads(no_tanh, path), model, batches, "model without tanh")
    if not broken:
        errs.append("the model without tanh passed the check")
    else:
        print("the model without tanh fails the check: %d errors, e.g. %s" % (len(broken), broken[0]))
    edits = [('["real", "ne", "yt", "pad"]', '["real", "eq", "yt", "yt"]'),
             ('["scored", "and", "real", "not_eos"]', '["scored", "eq", "yt", "yt"]')]
    for old, new in edits:
        if text.count(old) != 1:
            errs.append("char_lstm.json: the step's mask %s is not there to remove" % old)
        text = text.replace(old, new)
    broken = compare(fedvm.loads(text, path), model, batches, "unmasked model")
    if len(broken) < 4:
        errs.append("the model without masks passed the check (%d errors)" % len(broken))
    else:
        print("the model without masks fails the check: %d errors, e.g. %s" % (len(broken), broken[0]))
    if errs:
        for e in errs:
            print("FAIL: " + e)
        print("check_char_lstm: %d errors" % len(errs))
        return 1
    print("check_char_lstm: loss, accuracy and counts agree with FedJAX's definitions in NumPy (rtol %g)" % RTOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
