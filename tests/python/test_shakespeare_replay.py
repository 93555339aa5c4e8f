"""fedavg_shakespeare's client training replayed in NumPy from the model's documented definition.

programs/fedavg_shakespeare.json runs E epochs of SGD over a client's sequences (shuffled with
random_fold_in(key, epoch), batches of 4, client learning rate 1) on the character LSTM of
programs/models/char_lstm.json, and takes its metrics from the training pass: each step's batch
under the model the step starts from. Here one client's update runs in-process (p.client_update)
and is compared with a NumPy replay written from the documents alone (the model's doc and
format/SPEC.md's lstm_cell): embedding in 8 dimensions; two LSTM layers of 256, z = x wx + h wh + b
with the gates i, f, g, o in that column-block order, c' = sigmoid(f) c + sigmoid(i) tanh(g),
h' = sigmoid(o) tanh(c'), each layer's output through tanh; a dense layer to 90 symbols; the loss
the cross-entropy summed over the non-PAD targets over 80 * sequences; right predictions (argmax)
counted over the targets that are neither PAD nor EOS. Its gradient is a backward pass through
time written by hand, in float64.
"""

import os

import numpy as np

import conftest  # the package from this checkout; epoch_orders
import fedvm as fv

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
H = 256
PAD, BOS, EOS = 0, 1, 2


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _params(model):
    m = {k: np.asarray(model[k], np.float64).copy() for k in ("embed", "dense", "dense_b")}
    for k in ("lstm1", "lstm2"):
        m[k] = {f: np.asarray(model[k][f], np.float64).copy() for f in ("wx", "wh", "b")}
    return m


def _gates(z, order):
    """The pre-activations' four blocks of H columns as (i, f, g, o); order names the block each sits in."""
    blocks = {name: z[..., j * H:(j + 1) * H] for j, name in enumerate(order)}
    return blocks["i"], blocks["f"], blocks["g"], blocks["o"]


def _layer_forward(inputs, p, order):
    """One LSTM layer over the positions (inputs [80, n, I]) from zero states: its outputs
    tanh(h) [80, n, H] and what its backward pass needs (with the last position's h and c)."""
    steps, n, _ = inputs.shape
    zx = inputs @ p["wx"]  # every position's input product at once: it does not depend on the state
    h, c = np.zeros((n, H)), np.zeros((n, H))
    tape = {k: np.zeros((steps, n, H)) for k in ("h_prev", "c_prev", "i", "f", "g", "o", "tc", "out")}
    for t in range(steps):
        zi, zf, zg, zo = _gates((zx[t] + h @ p["wh"]) + p["b"], order)
        i, f, g, o = _sigmoid(zi), _sigmoid(zf), np.tanh(zg), _sigmoid(zo)
        tape["h_prev"][t], tape["c_prev"][t] = h, c
        c = f * c + i * g
        tc = np.tanh(c)
        h = o * tc
        for k, v in (("i", i), ("f", f), ("g", g), ("o", o), ("tc", tc), ("out", np.tanh(h))):
            tape[k][t] = v
    tape["h"], tape["c"] = h, c
    return tape["out"], tape


def _layer_backward(dout, inputs, p, tape, order):
    """The layer's backward pass through time from the gradient of its outputs [80, n, H]: the
    gradients of wx, wh and b and that of its inputs."""
    steps, n, _ = dout.shape
    dz = np.zeros((steps, n, 4 * H))
    dh, dc = np.zeros((n, H)), np.zeros((n, H))
    for t in reversed(range(steps)):
        i, f, g, o, tc, out = (tape[k][t] for k in ("i", "f", "g", "o", "tc", "out"))
        dh = dout[t] * (1.0 - out * out) + dh
        dc = dc + dh * o * (1.0 - tc * tc)
        parts = {"i": dc * g * i * (1.0 - i), "f": dc * tape["c_prev"][t] * f * (1.0 - f),
                 "g": dc * i * (1.0 - g * g), "o": dh * tc * o * (1.0 - o)}
        dz[t] = np.concatenate([parts[name] for name in order], axis=1)
        dh = dz[t] @ p["wh"].T
        dc = dc * f
    flat = dz.reshape(-1, 4 * H)
    grads = {"wx": inputs.reshape(-1, inputs.shape[2]).T @ flat, "wh": tape["h_prev"].reshape(-1, H).T @ flat,
             "b": flat.sum(axis=0)}
    return grads, dz @ p["wx"].T


def _grad_and_totals(m, x, y, order):
    """One batch: the loss's gradient (a backward pass through the 80 positions) and the batch's
    masked sums (cross-entropy over the non-PAD targets, right predictions over the non-PAD,
    non-EOS targets), all under the model m; and the closest call among the scored positions'
    predictions: the smallest |logit[target] - largest other logit|."""
    n, steps = x.shape
    xt, yt = x.T, y.T  # [80, n]: position first
    real = (yt != PAD).astype(np.float64)
    scored = (yt != PAD) & (yt != EOS)
    inputs = m["embed"][xt]
    out1, tape1 = _layer_forward(inputs, m["lstm1"], order)
    out2, tape2 = _layer_forward(out1, m["lstm2"], order)
    logits = out2 @ m["dense"] + m["dense_b"]
    s = logits - logits.max(axis=2, keepdims=True)
    e = np.exp(s)
    target = np.take_along_axis(s, yt[..., None], axis=2)[..., 0]
    ce = np.log(e.sum(axis=2)) - target
    loss_sum = float((ce * real).sum())
    right = int(((logits.argmax(axis=2) == yt) & scored).sum())
    others = logits.copy()
    np.put_along_axis(others, yt[..., None], -np.inf, axis=2)
    margin = np.abs(np.take_along_axis(logits, yt[..., None], axis=2)[..., 0] - others.max(axis=2))
    closest = float(np.min(margin, initial=np.inf, where=scored))

    dl = e / e.sum(axis=2, keepdims=True)
    np.put_along_axis(dl, yt[..., None], np.take_along_axis(dl, yt[..., None], axis=2) - 1.0, axis=2)
    dl *= (real / (steps * n))[..., None]
    g = {"dense": out2.reshape(-1, H).T @ dl.reshape(-1, 90), "dense_b": dl.sum(axis=(0, 1))}
    g["lstm2"], dout1 = _layer_backward(dl @ m["dense"].T, out1, m["lstm2"], tape2, order)
    g["lstm1"], dinputs = _layer_backward(dout1, inputs, m["lstm1"], tape1, order)
    g["embed"] = np.zeros_like(m["embed"])
    np.add.at(g["embed"], xt.reshape(-1), dinputs.reshape(-1, 8))
    return g, loss_sum, right, closest


def _replay(model, xs, ys, orders, batch, lr, order="ifgo"):
    """E epochs of SGD (epoch e's batches taken in orders[e]) with the totals of each step's batch
    under the model the step starts from: the trained model, the summed cross-entropy, the right
    predictions, the two counts and the closest call among the predictions."""
    m = _params(model)
    loss_sum, right, tokens, scored, closest = 0.0, 0, 0, 0, np.inf
    for idx_all in orders:
        for s in range(0, len(idx_all), batch):
            idx = idx_all[s:s + batch]
            x, y = xs[idx], ys[idx]
            g, l, r, c = _grad_and_totals(m, x, y, order)
            closest = min(closest, c)
            loss_sum += l
            right += r
            tokens += int((y != PAD).sum())
            scored += int(((y != PAD) & (y != EOS)).sum())
            for k in ("embed", "dense", "dense_b"):
                m[k] -= lr * g[k]
            for k in ("lstm1", "lstm2"):
                for f in ("wx", "wh", "b"):
                    m[k][f] -= lr * g[k][f]
    return m, loss_sum, right, tokens, scored, closest


def _client_data(rng, n):
    """n sequences shaped as the preprocessing's: a text's characters (3 to 88) after BOS, EOS
    after the text, PAD (0) after that, x the first 80 symbols and y the 80 after the first; texts
    of varied lengths (some end well before 80, one with its EOS at the last target, some run
    past 80 so that no EOS appears), and one sequence wholly PAD."""
    xs = np.zeros((n, 80), np.int32)
    ys = np.zeros((n, 80), np.int32)
    lengths = [5, 30, 79, 120, 50, 12, 200, 64, 0, 78][:n]
    for j, length in enumerate(lengths):
        if length == 0:
            continue  # all PAD
        text = rng.integers(3, 89, size=length)
        full = np.concatenate([[BOS], text, [EOS]])
        span = full[:81]
        xs[j, :len(span) - 1] = span[:-1]
        ys[j, :len(span) - 1] = span[1:]
    return xs, ys


def _arrays(model):
    """The model's arrays by name (lstm1.wx, ...), in float64."""
    out = {k: np.asarray(model[k], np.float64) for k in ("embed", "dense", "dense_b")}
    for k in ("lstm1", "lstm2"):
        for f in ("wx", "wh", "b"):
            out[k + "." + f] = np.asarray(model[k][f], np.float64)
    return out


def _differences(model, out, trained):
    """fedvm's client_update out against a replay's trained model: the largest absolute difference
    of the trained weights (x_t - pseudo_grad against the replay's), and the largest over the
    arrays of the pseudo-gradient's relative difference (in the Frobenius norm) from the
    replay's x_t - x_k."""
    x_t, pg, ref = _arrays(model), _arrays(out["pseudo_grad"]), _arrays(trained)
    weights = max(np.abs((x_t[k] - pg[k]) - ref[k]).max() for k in x_t)
    grads = max(np.linalg.norm(pg[k] - (x_t[k] - ref[k])) / np.linalg.norm(x_t[k] - ref[k]) for k in x_t)
    return weights, grads


def _unroll_differences(p, model, x, y):
    """The forward pass alone: fedvm's char_lstm_unroll on a batch against the replay's, the
    largest absolute difference of the last position's states h1, c1, h2, c2, and the relative
    difference of the summed cross-entropy; with the right predictions, fedvm's and the replay's."""
    s = p.char_lstm_unroll(model, {"x": x, "y": y})
    m = _params(model)
    out1, tape1 = _layer_forward(m["embed"][x.T], m["lstm1"], "ifgo")
    _, tape2 = _layer_forward(out1, m["lstm2"], "ifgo")
    _, loss_sum, right, _ = _grad_and_totals(m, x, y, "ifgo")
    ref = {"h1": tape1["h"], "c1": tape1["c"], "h2": tape2["h"], "c2": tape2["c"]}
    states = max(np.abs(np.asarray(s[k], np.float64) - v).max() for k, v in ref.items())
    return states, abs(float(s["loss"]) - loss_sum) / loss_sum, (float(s["right"]), right)


def _directional_check(m, x, y, rng):
    """The hand-written backward pass against a central difference of the forward one along a
    random direction (float64, step 1e-5): their relative difference."""
    g = _arrays(_grad_and_totals(m, x, y, "ifgo")[0])
    v = {k: rng.standard_normal(a.shape) * np.abs(a).max() for k, a in _arrays(m).items()}

    def moved(sign):
        d = {k: m[k] + sign * 1e-5 * v[k] for k in ("embed", "dense", "dense_b")}
        for k in ("lstm1", "lstm2"):
            d[k] = {f: m[k][f] + sign * 1e-5 * v[k + "." + f] for f in ("wx", "wh", "b")}
        return _grad_and_totals(d, x, y, "ifgo")[1] / (80 * len(x))

    fd = (moved(1) - moved(-1)) / 2e-5
    exact = sum(float((g[k] * v[k]).sum()) for k in g)
    return abs(fd - exact) / abs(exact)


def test_fedavg_shakespeare_client_update_replayed_in_numpy():
    """One client's update of fedavg_shakespeare (two epochs, B = 4, the program's client lr 1)
    against the NumPy replay, from the model initialize draws and fedvm's shuffle of each epoch (a
    traced sequence_shuffle of the indices with random_fold_in(key, epoch), as the program's epoch
    does): 10 sequences, so batches of 4, 4, 2 per epoch; short texts (many PAD targets), texts
    past 80 positions (no EOS), one sequence wholly PAD.

    Compared, first the forward pass alone on the first batch (fedvm's char_lstm_unroll): the
    last position's states h1, c1, h2, c2 to an absolute 2e-6 (measured 1.7e-7: f32 through 80
    positions of 256-wide products, states of size 1 or less), the summed cross-entropy to a
    relative 1e-5 (measured 1.3e-7) and the right predictions exactly. Then the client update:
    - the weight (10 sequences), the non-PAD targets, the non-PAD non-EOS targets and the right
      predictions: exactly. The right predictions may be exact because the replay's closest
      call, the smallest |logit[target] - largest other logit| over the scored positions, is
      asserted above 2e-5 (measured 2.1e-4), while fedvm's f32 logits (from states within 2e-7
      of the replay's as above, and weights within 2.5e-7) are off by 1e-6 or less.
    - the summed cross-entropy (about 4358 over 970 targets): relative 1e-5. fedvm adds about 480
      f32 terms into the running sum (one per position and batch), whose rounding is about
      sqrt(480) * 6e-8 = 1.3e-6 relative as a random walk, 3e-5 at worst; measured 2e-8.
    - the trained model x_t - pseudo_grad: absolute 2e-6 on every weight. fedvm stores the
      weights in f32; the embedding's reach 2 in size, where an f32 ulp is 2.4e-7, and each of
      the 6 steps rounds the stored weights once, the final x_t - x_k once more: up to 7 half-ulps,
      8.4e-7. The gradients' own f32 errors (relative 1e-6 or so of steps of 0.06 at most) are
      smaller. Measured 2.5e-7 (the embedding; the LSTM biases, near 1, 2e-7; the rest 2e-8).
    - the pseudo-gradient array by array, relative in the Frobenius norm: 2e-3. The same storage
      rounding of weights near 2 against the embedding's pseudo-gradient of 1e-3 or less gives
      2e-4 there (measured); the other arrays' are 2e-5 or less.

    The replay's backward pass is checked against a central difference of its forward pass (on
    the first batch, float64: relative 1e-6, measured 3e-10), so the reference is checked
    too; and the comparison can fail: the replay with the input and forget gates' column
    blocks swapped (f, i, g, o), and the replay with the learning rate 10% off, each fail the
    loss and the trained-model comparisons (measured: 6.7e-4 and 1.7e-4 relative on the loss,
    1.1e-2 and 5.8e-3 absolute on the weights)."""
    p = fv.load(os.path.join(ROOT, "programs", "fedavg_shakespeare.json")).set(epochs=2)
    model = p.initialize(np.array([7, 11], np.uint32))
    n, batch, lr = 10, 4, 1.0
    xs, ys = _client_data(np.random.default_rng(5), n)
    key = np.array([3, 5], np.uint32)

    orders = conftest.epoch_orders(n, key, 2)
    assert sorted(orders[0]) == list(range(n)) and list(orders[0]) != list(orders[1])
    first = orders[0][:batch]
    assert _directional_check(_params(model), xs[first], ys[first], np.random.default_rng(1)) <= 1e-6
    states, loss_error, (fedvm_right, replay_right) = _unroll_differences(p, model, xs[first], ys[first])
    assert states <= 2e-6 and loss_error <= 1e-5 and fedvm_right == replay_right

    out = p.client_update(model, {"x": xs, "y": ys}, key)
    t = out["totals"]
    trained, loss_sum, right, tokens, scored, closest = _replay(model, xs, ys, orders, batch, lr)
    assert float(out["weight"]) == n
    assert float(t["tokens"]) == tokens == 2 * int((ys != PAD).sum())
    assert float(t["scored"]) == scored == 2 * int(((ys != PAD) & (ys != EOS)).sum())
    assert closest > 2e-5 and float(t["correct"]) == right
    assert abs(float(t["loss"]) - loss_sum) <= 1e-5 * loss_sum
    weights, grads = _differences(model, out, trained)
    assert weights <= 2e-6 and grads <= 2e-3

    # the same comparisons fail for a replay with a wrong detail
    for wrong in (_replay(model, xs, ys, orders, batch, lr, order="figo"),
                  _replay(model, xs, ys, orders, batch, 1.1 * lr)):
        assert abs(float(t["loss"]) - wrong[1]) > 1e-5 * loss_sum
        assert _differences(model, out, wrong[0])[0] > 100 * 2e-6
