#!/usr/bin/python3
"""FedAvg (McMahan et al. 2017) with the 2NN on a FedJAX SQLite image dataset, in plain NumPy.

The 2NN is a 784-200-200-10 ReLU MLP on pixels scaled to [0, 1], trained with
the mean softmax cross-entropy of a minibatch; forward and backward are
written out with numpy matmuls, float32 throughout. Each round samples K
clients uniformly without replacement; each runs E epochs of minibatch SGD
(batch B, its examples shuffled each epoch, the last partial batch kept,
learning rate lr) from the server model; the new server model is the mean of
the client models weighted by their example counts.

Prints one JSON line per round: round, train_loss (the example-weighted mean
over the sampled clients of each client's mean minibatch loss), examples (E
times the sampled clients' examples), test_acc and
test_loss when evaluated, seconds (the round's sampling, client updates and
aggregation; not the evaluation, which is eval_seconds), cpu_seconds (the
process's CPU time in the round, all threads), then
'median_round_s=... examples_per_s=... test_acc=...', where examples_per_s is
the examples processed (E times the sampled clients' examples) over the
rounds' total seconds.

  /usr/bin/python3 bench/ref_fedavg_numpy.py --data fm.sqlite --threads 1
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_args  # noqa: E402  (pins threads before numpy loads)

if __name__ == "__main__":
    ARGS = ref_args.parse(__doc__.splitlines()[0])

import numpy as np  # noqa: E402

import ref_common  # noqa: E402


def forward(model, x):
    """Logits and the activations backward() needs."""
    w1, b1, w2, b2, w3, b3 = model
    h1 = x @ w1
    h1 += b1
    np.maximum(h1, 0, out=h1)
    h2 = h1 @ w2
    h2 += b2
    np.maximum(h2, 0, out=h2)
    logits = h2 @ w3
    logits += b3
    return logits, h1, h2


def softmax_xent(logits, y):
    """Mean cross-entropy of a batch and the softmax probabilities."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(s[:, 0]) - shifted[np.arange(len(y)), y]))
    return loss, e / s


def loss_and_grads(model, x, y):
    """Mean softmax cross-entropy of the batch (x, y) and its gradient, one array per parameter."""
    w1, _, w2, _, w3, _ = model
    logits, h1, h2 = forward(model, x)
    loss, p = softmax_xent(logits, y)
    dz3 = p
    dz3[np.arange(len(y)), y] -= 1
    dz3 *= np.float32(1.0 / len(y))
    dw3 = h2.T @ dz3
    db3 = dz3.sum(axis=0)
    dz2 = dz3 @ w3.T
    dz2 *= h2 > 0
    dw2 = h1.T @ dz2
    db2 = dz2.sum(axis=0)
    dz1 = dz2 @ w2.T
    dz1 *= h1 > 0
    dw1 = x.T @ dz1
    db1 = dz1.sum(axis=0)
    return loss, [dw1, db1, dw2, db2, dw3, db3]


def client_update(server, x, y, rng, epochs, batch, lr):
    """E epochs of minibatch SGD from the server model: (client model, mean minibatch loss)."""
    model = [p.copy() for p in server]
    lr = np.float32(lr)
    losses = []
    for _ in range(epochs):
        perm = rng.permutation(len(y))
        xs, ys = x[perm], y[perm]
        for i in range(0, len(ys), batch):
            loss, grads = loss_and_grads(model, xs[i:i + batch], ys[i:i + batch])
            for p, g in zip(model, grads):
                g *= lr
                p -= g
            losses.append(loss)
    return model, sum(losses) / len(losses)


def fedavg_round(server, clients, rnd, args):
    """One round: (new server model, example-weighted train loss, examples processed)."""
    chosen = ref_common.sample_clients(args.seed, rnd, len(clients), args.clients_per_round)
    total = sum(len(clients[c][1]) for c in chosen)
    new = [np.zeros_like(p) for p in server]
    train_loss = 0.0
    for c in chosen:
        x, y = clients[c]
        model, loss = client_update(server, x, y, ref_common.client_rng(args.seed, rnd, c),
                                    args.epochs, args.batch, args.lr)
        weight = len(y) / total
        train_loss += weight * loss
        for acc, p in zip(new, model):
            p *= np.float32(weight)
            acc += p
    return new, train_loss, total * args.epochs


def evaluate(model, x, y, chunk=2000):
    """(accuracy, mean cross-entropy) on (x, y)."""
    correct, loss = 0, 0.0
    for i in range(0, len(y), chunk):
        logits, _, _ = forward(model, x[i:i + chunk])
        batch_loss, _ = softmax_xent(logits, y[i:i + chunk])
        loss += batch_loss * len(logits)
        correct += int((logits.argmax(axis=1) == y[i:i + chunk]).sum())
    return correct / len(y), loss / len(y)


def run(args, clients, test, report=None):
    """FedAvg for args.rounds rounds; returns the final model ([in, out] weights)."""
    return ref_common.train(args, ref_common.initial_model(args), lambda s, rnd: fedavg_round(s, clients, rnd, args),
                            lambda s: evaluate(s, *test), report)


if __name__ == "__main__":
    sys.exit(ref_common.main(ARGS, run, "numpy %s" % np.__version__))
