#!/usr/bin/python3
"""FedAvg (McMahan et al. 2017) with the 2NN on a FedJAX SQLite image dataset, in plain PyTorch.

The same algorithm, options and output as ref_fedavg_numpy.py, written the
way a PyTorch user would: torch.nn layers, F.cross_entropy, autograd and
torch.optim.SGD, float32 on the CPU; --threads sets torch.set_num_threads
(and OpenBLAS's threads, which torch's matmuls use on Debian).

  /usr/bin/python3 bench/ref_fedavg_torch.py --data fm.sqlite --threads 1
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_args  # noqa: E402  (pins threads before torch loads)

if __name__ == "__main__":
    ARGS = ref_args.parse(__doc__.splitlines()[0])

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import ref_common  # noqa: E402
import ref_torch  # noqa: E402


def make_net():
    return nn.Sequential(nn.Linear(784, 200), nn.ReLU(), nn.Linear(200, 200), nn.ReLU(), nn.Linear(200, 10))


def to_torch(model):
    """[in, out] numpy model -> torch tensors in nn.Linear's layout (weight [out, in])."""
    return [torch.from_numpy(np.ascontiguousarray(p.T if p.ndim == 2 else p)) for p in model]


def to_numpy(params):
    """Torch tensors in nn.Linear's layout -> [in, out] numpy model."""
    return [np.ascontiguousarray(p.detach().numpy().T if p.ndim == 2 else p.detach().numpy()) for p in params]


def client_update(net, server, x, y, rng, epochs, batch, lr):
    """E epochs of minibatch SGD from the server model: (client parameters, mean minibatch loss)."""
    with torch.no_grad():
        for p, s in zip(net.parameters(), server):
            p.copy_(s)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        perm = torch.from_numpy(rng.permutation(len(y)))
        xs, ys = x[perm], y[perm]
        for i in range(0, len(ys), batch):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(xs[i:i + batch]), ys[i:i + batch])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return [p.detach() for p in net.parameters()], sum(losses) / len(losses)


def fedavg_round(net, server, clients, rnd, args):
    """One round: (new server parameters, example-weighted train loss, examples processed)."""
    chosen = ref_common.sample_clients(args.seed, rnd, len(clients), args.clients_per_round)
    return ref_torch.fedavg_round(server, clients, chosen, args.epochs,
                                  lambda start, c: client_update(net, start, *clients[c],
                                                                 ref_common.client_rng(args.seed, rnd, c),
                                                                 args.epochs, args.batch, args.lr))


@torch.no_grad()
def evaluate(net, server, x, y):
    """(accuracy, mean cross-entropy) on (x, y)."""
    for p, s in zip(net.parameters(), server):
        p.copy_(s)
    logits = net(x)
    loss = F.cross_entropy(logits, y).item()
    return (logits.argmax(dim=1) == y).sum().item() / len(y), loss


def run(args, clients, test, report=None):
    """FedAvg for args.rounds rounds; returns the final model as numpy arrays ([in, out] weights)."""
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    clients = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in clients]
    test = tuple(torch.from_numpy(a) for a in test)
    net = make_net()
    server = ref_common.train(args, to_torch(ref_common.initial_model(args)),
                              lambda s, rnd: fedavg_round(net, s, clients, rnd, args), lambda s: evaluate(net, s, *test),
                              report)
    return to_numpy(server)


if __name__ == "__main__":
    sys.exit(ref_common.main(ARGS, run, "torch %s" % torch.__version__))
