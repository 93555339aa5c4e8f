#!/usr/bin/python3
"""FedAvg with FedJAX's Shakespeare character LSTM, in PyTorch with its fused nn.LSTM, tuned for the CPU.

The model of programs/models/char_lstm.json as FedJAX defines it
(fedjax/models/shakespeare.py): characters embedded in 8 dimensions, two
LSTM layers of 256 units each followed by tanh (hk.DeepRNN([LSTM, tanh,
LSTM, tanh])), a dense layer to the 90-symbol vocabulary; FedJAX's training
loss (the cross-entropy of the non-PAD targets summed, over 80 * sequences).
Glorot-uniform weights, zero biases but the forget gates' (1), float32.
FedAvg as programs/fedavg_shakespeare.json: each sampled client runs E
epochs of minibatch SGD (B = 4, lr 1 by default here: pass --batch and
--lr) over its shuffled sequences, the server takes the example-weighted
mean. Written for speed as an expert would on a CPU: each LSTM layer is one
nn.LSTM call over the whole sequence (PyTorch's fused CPU kernel, time-major
layout), one module reused with its parameters copied in place from the
server model, SGD in place (torch.optim.SGD with foreach), gradients set to
None rather than zeroed, the clients' sequences converted to tensors before
the first round. --sampled FILE (a JSON list of each round's client
indices, as fedvm's metrics file gives them) trains the clients fedvm
sampled, so that rounds over clients of different sizes compare.

  /usr/bin/python3 bench/ref_lstm_torch.py --data shakespeare.sqlite --batch 4 --lr 1 --threads 1 --rounds 3
"""

import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_args  # noqa: E402  (pins threads before torch loads)


def parse(argv=None):
    ap = ref_args.parser(__doc__.splitlines()[0])
    ap.add_argument("--sampled", metavar="FILE", help="each round's clients (a JSON list of lists of indices)")
    args = ap.parse_args(argv)
    ref_args.pin_threads(args.threads)
    return args


if __name__ == "__main__":
    ARGS = parse()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import fedjax_sqlite  # noqa: E402
import ref_common  # noqa: E402
import ref_torch  # noqa: E402

VOCAB, EMBED, HIDDEN, LENGTH, PAD = 90, 8, 256, 80, 0


class CharLstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.lstm1 = nn.LSTM(EMBED, HIDDEN)
        self.lstm2 = nn.LSTM(HIDDEN, HIDDEN)
        self.dense = nn.Linear(HIDDEN, VOCAB)
        with torch.no_grad():
            for lstm in (self.lstm1, self.lstm2):  # one bias, as the model's: b_hh stays 0
                lstm.bias_hh_l0.zero_()
                lstm.bias_hh_l0.requires_grad_(False)

    def forward(self, x):
        """x i64[80, B] (time-major) to logits f32[80, B, 90]."""
        h, _ = self.lstm1(self.embed(x))
        h, _ = self.lstm2(torch.tanh(h))
        return self.dense(torch.tanh(h))


def trained(net):
    return [p for p in net.parameters() if p.requires_grad]


def init_model(seed):
    """Glorot-uniform weights in torch's layouts ([out, in]; the LSTMs' [4H, in] in gate order i, f, g, o, as
    the model's), biases zero but the forget gates' (1)."""
    rng = np.random.default_rng([seed, 0])

    def glorot(fan_in, fan_out, shape):
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, size=shape).astype(np.float32)

    bias = np.zeros(4 * HIDDEN, np.float32)
    bias[HIDDEN:2 * HIDDEN] = 1.0
    model = [glorot(VOCAB, EMBED, (VOCAB, EMBED)),
             glorot(EMBED, 4 * HIDDEN, (4 * HIDDEN, EMBED)), glorot(HIDDEN, 4 * HIDDEN, (4 * HIDDEN, HIDDEN)), bias,
             glorot(HIDDEN, 4 * HIDDEN, (4 * HIDDEN, HIDDEN)), glorot(HIDDEN, 4 * HIDDEN, (4 * HIDDEN, HIDDEN)),
             bias.copy(), glorot(HIDDEN, VOCAB, (VOCAB, HIDDEN)), np.zeros(VOCAB, np.float32)]
    return [torch.from_numpy(p) for p in model]


def load_data(path):
    """The training clients in file order: (x i64[n, 80], y i64[n, 80]) pairs of preprocessed sequences."""
    return [(torch.from_numpy(c["x"].astype(np.int64)), torch.from_numpy(c["y"].astype(np.int64)))
            for _, c in fedjax_sqlite.read_clients(path, "default")]


def loss_fn(net, x, y):
    """FedJAX's training loss: the non-PAD targets' cross-entropy summed, over 80 * sequences."""
    logits = net(x.t())
    ce = F.cross_entropy(logits.reshape(-1, VOCAB), y.t().reshape(-1), reduction="none")
    return (ce * (y.t().reshape(-1) != PAD)).sum() / (LENGTH * len(y))


def fedavg_round(net, opt, server, clients, rnd, args, sampled):
    chosen = sampled[rnd - 1] if sampled else ref_common.sample_clients(args.seed, rnd, len(clients),
                                                                        args.clients_per_round)

    def update(start, c):
        x, y = clients[c]
        return ref_torch.local_sgd(trained(net), opt, start, x, y, ref_common.client_rng(args.seed, rnd, c),
                                   args.epochs, args.batch, lambda xb, yb: loss_fn(net, xb, yb))
    return ref_torch.fedavg_round(server, clients, chosen, args.epochs, update)


def main():
    args = ARGS
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    sampled = json.load(open(args.sampled)) if args.sampled else None
    if sampled is not None and len(sampled) < args.rounds:
        raise SystemExit("%s: %d rounds of clients, --rounds %d" % (args.sampled, len(sampled), args.rounds))
    clients = load_data(args.data)
    net = CharLstm()
    opt = torch.optim.SGD(trained(net), lr=args.lr, foreach=True)
    server = init_model(args.seed)
    report = ref_common.Report(args, "torch %s" % torch.__version__)
    ref_common.train(args, server, lambda s, rnd: fedavg_round(net, opt, s, clients, rnd, args, sampled),
                     None, report)
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
