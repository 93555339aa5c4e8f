#!/usr/bin/python3
"""The char LSTM workload of make bench: FedAvg with FedJAX's Shakespeare model, fedvm against PyTorch's nn.LSTM.

FedAvg as programs/fedavg_shakespeare.json (Reddi et al.'s Shakespeare
settings: E = 1, B = 4, client lr 1) on the Shakespeare stand-in ('fedvm
data synthetic --kind shakespeare --clients 100 --seed 0', preprocessed
with 'fedvm data preprocess shakespeare'), 10 clients a round, run by
'fedvm run' (threads backend, 1 and every thread) and by
bench/ref_lstm_torch.py (nn.LSTM; 1 and every thread), one at a time
(bench/workload.py). The clients differ in size, so the peer trains the
clients fedvm sampled each round. fedvm's program also computes FedJAX's
eval metrics of the received model on each client's sequences before
training (a forward pass), which the peer does not: GFLOP/s count training
flops only.

  /usr/bin/python3 bench/bench_lstm.py --rounds 3          # prints the Markdown section
bench.py calls section() for make bench's report.
"""

import os
import subprocess
import sys

import workload

DATA = os.path.join(workload.ROOT, "build", "bench", "shakespeare.sqlite")

# flops per sequence of 80 characters, per position: the two LSTM layers' products
# (2 * (8 + 256) * 1024 and 2 * (256 + 256) * 1024) and the dense layer's (2 * 256 * 90);
# training adds the weights' gradients and the inputs' gradients, each as many again
FORWARD = 80 * 2 * ((8 + 256) * 1024 + (256 + 256) * 1024 + 256 * 90)
TRAIN = 3 * FORWARD

LSTM = workload.Workload(
    "FedAvg, the Shakespeare char LSTM (FedJAX's): stand-in of 100 clients, 10 a round, E=1, B=4, lr 1",
    os.path.join(workload.ROOT, "programs", "fedavg_shakespeare.json"), "ref_lstm_torch.py", "PyTorch, nn.LSTM",
    TRAIN, test=False, extra_peer=["--batch", "4", "--lr", "1"], replay=True,
    note="Both train the same clients each round (the peer replays fedvm's sample); "
         "an example is a sequence of 80 characters.")


def make_data(path=DATA, fedvm=workload.FEDVM):
    """The preprocessed stand-in at path, made if it is missing."""
    if os.path.exists(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    raw = path + ".raw"
    for cmd in ([fedvm, "data", "synthetic", "--kind", "shakespeare", "--clients", "100", "--seed", "0", "-o", raw],
                [fedvm, "data", "preprocess", "shakespeare", raw, "-o", path]):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    os.remove(raw)
    return path


def measure(rounds, data=DATA, say=None, clients=10):
    return workload.measure(LSTM, rounds, make_data(data), clients=clients, **({"say": say} if say else {}))


def section(rounds, rows):
    return workload.section(LSTM, rounds, rows)


if __name__ == "__main__":
    sys.exit(workload.main(__doc__, DATA, "the preprocessed Shakespeare file (default build/bench/shakespeare.sqlite, "
                           "made from the stand-in when missing)", measure, section))
