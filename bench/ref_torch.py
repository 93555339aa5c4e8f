"""What the PyTorch reference implementations share: FedAvg's round and, for the tuned ones, local SGD.

Imported after ref_args has pinned the thread count (it loads torch).
"""

import torch


def fedavg_round(server, clients, chosen, epochs, update):
    """One FedAvg round over the chosen clients: (the example-weighted mean of update(server, c)'s
    parameters, the example-weighted mean of its losses, examples processed). update returns a client's
    (parameters, mean minibatch loss); clients[c] is an (x, y) pair."""
    total = sum(len(clients[c][1]) for c in chosen)
    new = [torch.zeros_like(p) for p in server]
    train_loss = 0.0
    for c in chosen:
        params, loss = update(server, c)
        weight = len(clients[c][1]) / total
        train_loss += weight * loss
        with torch.no_grad():
            for acc, p in zip(new, params):
                acc.add_(p, alpha=weight)
    return new, train_loss, total * epochs


def local_sgd(params, opt, server, x, y, rng, epochs, batch, loss_fn):
    """E epochs of minibatch SGD on params (a module's trained parameters, stepped by opt) from the server
    model over (x, y) shuffled by rng each epoch: (copies of the client's parameters, mean minibatch loss).
    The losses are summed as tensors (no synchronizing .item() a step); gradients are set to None."""
    with torch.no_grad():
        for p, s in zip(params, server):
            p.copy_(s)
    total, steps = torch.zeros(()), 0
    for _ in range(epochs):
        perm = torch.from_numpy(rng.permutation(len(y)))
        xs, ys = x[perm], y[perm]
        for i in range(0, len(ys), batch):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(xs[i:i + batch], ys[i:i + batch])
            loss.backward()
            opt.step()
            total += loss.detach()
            steps += 1
    return [p.detach().clone() for p in params], total.item() / max(steps, 1)
