#!/usr/bin/python3
"""The CNN workload of make bench: FedAvg with McMahan et al.'s CNN on Fashion-MNIST, fedvm against PyTorch.

100 IID clients, 10 a round, E = 1, B = 10, lr 0.05, from the same seed:
bench/fedavg_cnn.json run by 'fedvm run' (threads backend, 1 and every
thread) and bench/ref_cnn_torch.py (oneDNN, channels-last; 1 and every
thread), one at a time (bench/workload.py). fedvm's program takes its round
metrics from the training pass (grad with has_aux), so both do the same
work; GFLOP/s count training flops.

  /usr/bin/python3 bench/bench_cnn.py --rounds 3          # prints the Markdown section
bench.py calls section() for make bench's report.
"""

import os
import sys

import workload

FASHION = os.path.join(workload.ROOT, "build", "bench", "fashion_mnist.sqlite")

# flops per training example: forward 2*(784*25*32 + 196*800*64 + 3136*512 + 512*10); the weights'
# gradients the same again; the inputs' gradients for every layer but the first (the images need none)
FORWARD = 2 * (784 * 25 * 32 + 196 * 800 * 64 + 3136 * 512 + 512 * 10)
TRAIN = 2 * FORWARD + 2 * (196 * 800 * 64 + 3136 * 512 + 512 * 10)

CNN = workload.Workload("FedAvg, McMahan's CNN, Fashion-MNIST: 100 IID clients, 10 a round, E=1, B=10, lr 0.05",
                        os.path.join(workload.HERE, "fedavg_cnn.json"), "ref_cnn_torch.py",
                        "PyTorch, oneDNN, channels-last", TRAIN)


def measure(rounds, data=FASHION, say=None, clients=10):
    return workload.measure(CNN, rounds, data, clients=clients, **({"say": say} if say else {}))


def section(rounds, rows):
    return workload.section(CNN, rounds, rows)


if __name__ == "__main__":
    sys.exit(workload.main(__doc__, FASHION, "Fashion-MNIST as 'fedvm data import fashion-mnist --clients 100 "
                           "--partition iid --seed 0' writes it (default build/bench/fashion_mnist.sqlite)",
                           measure, section))
