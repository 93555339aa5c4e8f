#!/usr/bin/python3
"""FedAvg (McMahan et al. 2017) with their CNN on a FedJAX SQLite image dataset, in PyTorch tuned for the CPU.

The CNN of programs/models/cnn_mnist.json: conv 5x5x32 (SAME, ReLU), max-pool
2x2, conv 5x5x64 (SAME, ReLU), max-pool 2x2, dense 512 (ReLU), dense 10;
Glorot-uniform weights, zero biases, mean softmax cross-entropy, float32.
The same algorithm, options and output as ref_fedavg_torch.py (E epochs of
minibatch SGD per client, the example-weighted mean), written for speed as
an expert would on a CPU: convolutions through oneDNN (PyTorch's mkldnn
backend) with activations and filters in its best memory format for them,
channels-last (NHWC, `--memory-format`); the images of every client decoded
and converted to float before the first round; one nn.Module reused, its
parameters copied in place from the server model; SGD's update in place
(torch.optim.SGD with foreach); gradients set to None rather than zeroed.
--threads sets torch.set_num_threads (oneDNN's and OpenMP's threads).

  /usr/bin/python3 bench/ref_cnn_torch.py --data fm.sqlite --threads 1 --rounds 3
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_args  # noqa: E402  (pins threads before torch loads)


def parse(argv=None):
    ap = ref_args.parser(__doc__.splitlines()[0])
    ap.add_argument("--memory-format", choices=("channels_last", "contiguous"), default="channels_last",
                    help="the layout of images and filters (default channels_last: oneDNN's fastest here)")
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

# (KH, KW, C, O) of the convolutions and (in, out) of the dense layers, as cnn_mnist.json
CONVS = ((5, 5, 1, 32), (5, 5, 32, 64))
DENSE = ((3136, 512), (512, 10))


def make_net():
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, 10))


def init_model(seed):
    """Glorot-uniform (fan_in = KH*KW*C, fan_out = KH*KW*O for filters), zero biases, in torch's layouts."""
    rng = np.random.default_rng([seed, 0])
    model = []
    for kh, kw, c, o in CONVS:
        limit = math.sqrt(6.0 / (kh * kw * c + kh * kw * o))
        model += [rng.uniform(-limit, limit, size=(o, c, kh, kw)).astype(np.float32), np.zeros(o, np.float32)]
    for i, o in DENSE:
        limit = math.sqrt(6.0 / (i + o))
        model += [rng.uniform(-limit, limit, size=(o, i)).astype(np.float32), np.zeros(o, np.float32)]
    return [torch.from_numpy(p) for p in model]


def load_data(path, fmt):
    """(clients, test): (x f32[n,1,28,28] in [0,1] in the memory format, y i64[n]) pairs."""
    def prepare(cols):
        x = torch.from_numpy(cols["pixels"].astype(np.float32) / np.float32(255)).reshape(-1, 1, 28, 28)
        return x.contiguous(memory_format=fmt), torch.from_numpy(cols["label"].astype(np.int64))

    clients = [prepare(cols) for _, cols in fedjax_sqlite.read_clients(path, "default")]
    test = fedjax_sqlite.read_clients(path, "test")
    if len(test) != 1:
        raise SystemExit("%s: split 'test' has %d clients, expected 1" % (path, len(test)))
    return clients, prepare(test[0][1])


def fedavg_round(net, opt, server, clients, rnd, args):
    chosen = ref_common.sample_clients(args.seed, rnd, len(clients), args.clients_per_round)

    def update(start, c):
        x, y = clients[c]
        return ref_torch.local_sgd(list(net.parameters()), opt, start, x, y, ref_common.client_rng(args.seed, rnd, c),
                                   args.epochs, args.batch, lambda xb, yb: F.cross_entropy(net(xb), yb))
    return ref_torch.fedavg_round(server, clients, chosen, args.epochs, update)


@torch.no_grad()
def evaluate(net, server, x, y, batch=500):
    for p, s in zip(net.parameters(), server):
        p.copy_(s)
    right, loss = 0, 0.0
    for i in range(0, len(y), batch):
        logits = net(x[i:i + batch])
        loss += F.cross_entropy(logits, y[i:i + batch], reduction="sum").item()
        right += (logits.argmax(dim=1) == y[i:i + batch]).sum().item()
    return right / len(y), loss / len(y)


def main():
    args = ARGS
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    fmt = torch.channels_last if args.memory_format == "channels_last" else torch.contiguous_format
    clients, test = load_data(args.data, fmt)
    net = make_net().to(memory_format=fmt)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, foreach=True)
    server = [p.contiguous(memory_format=fmt) if p.dim() == 4 else p for p in init_model(args.seed)]
    report = ref_common.Report(args, "torch %s (mkldnn %s, %s)" % (
        torch.__version__, torch.backends.mkldnn.is_available(), args.memory_format))
    ref_common.train(args, server, lambda s, rnd: fedavg_round(net, opt, s, clients, rnd, args),
                     lambda s: evaluate(net, s, *test), report)
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
