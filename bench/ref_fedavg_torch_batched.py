#!/usr/bin/python3
"""FedAvg (McMahan et al. 2017) with the 2NN on a FedJAX SQLite image dataset, in PyTorch as an expert writes it.

The same algorithm, options and output as ref_fedavg_numpy.py, tuned for
speed: all clients of a round train at once, each client one slice of
batched weights ([K, in, out]); the forward products are baddbmm with the
bias as the added term; the backward pass is written out (no autograd); the
SGD step is folded into each weight-gradient product (w.baddbmm_(h^T, dz,
alpha=-lr), no gradient tensor, no separate update pass); the client epoch is
compiled with TorchScript; float32 on the CPU. Clients of different sizes
are padded to the longest one: padded examples carry a mask of zero, a
client's steps after its last batch change nothing, so every client runs
exactly its own minibatch SGD. --threads sets torch.set_num_threads (and
OpenBLAS's threads, which torch's matmuls use on Debian).

  /usr/bin/python3 bench/ref_fedavg_torch_batched.py --data fm.sqlite --threads 1
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_args  # noqa: E402  (pins threads before torch loads)

if __name__ == "__main__":
    ARGS = ref_args.parse(__doc__.splitlines()[0])
    # --threads N runs N groups of clients side by side, each product on its group's thread: OpenBLAS's
    # own threads would only compete with them
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

from typing import List  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import ref_common  # noqa: E402


@torch.jit.script
def train_clients(params: List[torch.Tensor], xs: torch.Tensor, ys: torch.Tensor, scale: torch.Tensor,
                  lr: float, batch: int) -> torch.Tensor:
    """Minibatch SGD of K clients at once, in place on params = [w1, b1, w2, b2, w3, b3] ([K, in, out] and
    [K, 1, out]) over xs [K, S*batch, 784], ys [K, S*batch] (int64), scale [K, S*batch]: 1/(examples of the
    example's batch), 0 for padding. Returns each step's mean batch loss, [K, S] (0 for a padded step)."""
    w1, b1, w2, b2, w3, b3 = params[0], params[1], params[2], params[3], params[4], params[5]
    k, n = ys.shape[0], ys.shape[1]
    steps = n // batch
    losses = torch.zeros(k, steps, dtype=torch.float32)
    for s in range(steps):
        lo, hi = s * batch, (s + 1) * batch
        x, y, m = xs[:, lo:hi], ys[:, lo:hi], scale[:, lo:hi]
        z1 = torch.baddbmm(b1, x, w1)
        h1 = torch.relu(z1)
        z2 = torch.baddbmm(b2, h1, w2)
        h2 = torch.relu(z2)
        z3 = torch.baddbmm(b3, h2, w3)
        logp = torch.log_softmax(z3, dim=2)
        picked = logp.gather(2, y.unsqueeze(2)).squeeze(2)
        losses[:, s] = -(picked * m).sum(dim=1)
        dz3 = torch.exp(logp)
        dz3.scatter_add_(2, y.unsqueeze(2), torch.full_like(picked, -1.0).unsqueeze(2))
        dz3.mul_(m.unsqueeze(2))
        dz2 = torch.bmm(dz3, w3.transpose(1, 2)).mul_(z2 > 0)
        dz1 = torch.bmm(dz2, w2.transpose(1, 2)).mul_(z1 > 0)
        w3.baddbmm_(h2.transpose(1, 2), dz3, alpha=-lr)
        b3.sub_(dz3.sum(dim=1, keepdim=True), alpha=lr)
        w2.baddbmm_(h1.transpose(1, 2), dz2, alpha=-lr)
        b2.sub_(dz2.sum(dim=1, keepdim=True), alpha=lr)
        w1.baddbmm_(x.transpose(1, 2), dz1, alpha=-lr)
        b1.sub_(dz1.sum(dim=1, keepdim=True), alpha=lr)
    return losses


@torch.jit.script
def train_groups(groups: List[List[torch.Tensor]], xs: List[torch.Tensor], ys: List[torch.Tensor],
                 scale: List[torch.Tensor], lr: float, batch: int) -> List[torch.Tensor]:
    """train_clients on each group of clients, the groups in parallel on TorchScript's inter-op threads."""
    futures = [torch.jit.fork(train_clients, groups[i], xs[i], ys[i], scale[i], lr, batch) for i in range(len(groups))]
    return [torch.jit.wait(f) for f in futures]


def epoch_batches(clients, chosen, rngs, batch):
    """One epoch's shuffled data of the chosen clients, padded to the longest: (xs, ys, scale, steps), steps the
    number of batches of each client."""
    counts = [len(clients[c][1]) for c in chosen]
    steps = [(n + batch - 1) // batch for n in counts]
    width = max(steps) * batch
    xs = torch.zeros(len(chosen), width, 784)
    ys = torch.zeros(len(chosen), width, dtype=torch.int64)
    scale = torch.zeros(len(chosen), width)
    for i, (c, rng, n) in enumerate(zip(chosen, rngs, counts)):
        x, y = clients[c]
        perm = torch.from_numpy(rng.permutation(n))
        torch.index_select(x, 0, perm, out=xs[i, :n])
        ys[i, :n] = y[perm]
        sizes = np.minimum(batch, n - np.arange(0, n, batch))
        scale[i, :n] = torch.from_numpy(np.repeat((1.0 / sizes).astype(np.float32), sizes))
    return xs, ys, scale, steps


def client_params(server, k):
    """The server's model as each client's starting point: [K, in, out] weights, [K, 1, out] biases."""
    return [(p if p.dim() == 2 else p.unsqueeze(0)).expand(k, -1, -1).contiguous() for p in server]


def fedavg_round(server, clients, rnd, args):
    """One round: (new server parameters, example-weighted train loss, examples processed)."""
    chosen = ref_common.sample_clients(args.seed, rnd, len(clients), args.clients_per_round)
    counts = torch.tensor([float(len(clients[c][1])) for c in chosen])
    total = float(counts.sum())
    rngs = [ref_common.client_rng(args.seed, rnd, c) for c in chosen]
    params = client_params(server, len(chosen))
    parts = min(args.threads or torch.get_num_threads(), len(chosen))
    loss_sum, step_count = torch.zeros(len(chosen), dtype=torch.float64), None
    for _ in range(args.epochs):
        xs, ys, scale, steps = epoch_batches(clients, chosen, rngs, args.batch)
        if parts == 1:
            losses = train_clients(params, xs, ys, scale, args.lr, args.batch)
        else:
            # one group of clients per thread, each group's BLAS calls on one thread
            groups = [list(g) for g in zip(*[p.chunk(parts) for p in params])]
            losses = torch.cat(train_groups(groups, list(xs.chunk(parts)), list(ys.chunk(parts)),
                                            list(scale.chunk(parts)), args.lr, args.batch))
        loss_sum += losses.sum(dim=1, dtype=torch.float64)
        step_count = torch.tensor(steps, dtype=torch.float64) * args.epochs
    weight = counts / total
    client_loss = loss_sum / step_count
    train_loss = float((weight.double() * client_loss).sum())
    new = [(p * weight.view(-1, 1, 1)).sum(dim=0).view(s.shape) for p, s in zip(params, server)]
    return new, train_loss, int(total) * args.epochs


def to_torch(model):
    """[in, out] numpy model -> torch tensors of the same layout."""
    return [torch.from_numpy(np.ascontiguousarray(p)) for p in model]


@torch.no_grad()
def evaluate(server, x, y):
    """(accuracy, mean cross-entropy) on (x, y)."""
    w1, b1, w2, b2, w3, b3 = server
    h = torch.relu(torch.addmm(b1, x, w1))
    h = torch.relu(torch.addmm(b2, h, w2))
    logits = torch.addmm(b3, h, w3)
    loss = torch.nn.functional.cross_entropy(logits, y).item()
    return (logits.argmax(dim=1) == y).sum().item() / len(y), loss


@torch.no_grad()
def run(args, clients, test, report=None):
    """FedAvg for args.rounds rounds; returns the final model as numpy arrays ([in, out] weights)."""
    if args.threads is not None:
        # the groups of clients run on the inter-op threads, each product on its group's thread
        torch.set_num_threads(1)
        if torch.get_num_interop_threads() < args.threads:
            torch.set_num_interop_threads(args.threads)
    clients = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in clients]
    test = tuple(torch.from_numpy(a) for a in test)
    server = ref_common.train(args, to_torch(ref_common.initial_model(args)),
                              lambda s, rnd: fedavg_round(s, clients, rnd, args), lambda s: evaluate(s, *test), report)
    return [p.numpy() for p in server]


if __name__ == "__main__":
    sys.exit(ref_common.main(ARGS, run, "torch %s" % torch.__version__))
