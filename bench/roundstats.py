"""What the benchmarks compute from per-round JSON lines, the same way for fedvm and the references.

A round's line holds round, examples (E times the sampled clients' examples),
seconds (the round's training wall time, evaluation excluded), cpu_seconds
and, after evaluating, test_acc and eval_seconds. Standard library only.

FLOPs of the 2NN (784-200-200-10), per training example: the forward pass
does 2*i*o for each layer of i inputs and o outputs (a [B,i] by [i,o]
product per batch of B); the backward pass the weights' gradients (the same
again: h^T.dz) and the gradients of the hidden layers' inputs (dz.w^T, for
the second and third layers only: the input images need none). Biases,
ReLU and the softmax (0.2% more) and the elementwise SGD update are left
out:

  forward  2*(784*200 + 200*200 + 200*10) = 397,600
  backward 397,600 + 2*(200*200 + 200*10)  = 481,600
  total                                      879,200 flops per example

bench.py checks this against the products a fedvm run hands to BLAS
(bench/flop_count.c).
"""

import statistics

LAYERS = ((784, 200), (200, 200), (200, 10))


def forward_flops(layers=LAYERS):
    """Flops of one example's forward pass."""
    return sum(2 * i * o for i, o in layers)


def train_flops(layers=LAYERS):
    """Flops of one example's forward and backward pass (no gradient for the input)."""
    return 2 * forward_flops(layers) + sum(2 * i * o for i, o in layers[1:])


def summarize(lines, warmup=1):
    """The figures of a run from its round lines, the first `warmup` rounds left out:
    median_round_s, median_cpu_s (rounds without evaluation only: fedvm's CPU time
    includes it), examples_per_s (examples over the seconds of the same rounds),
    gflops (training flops at that rate), test_acc (the last evaluation's), examples (a round's,
    the median), rounds."""
    timed = lines[warmup:] if len(lines) > warmup else lines
    cpu = [ln["cpu_seconds"] for ln in timed if "eval_seconds" not in ln] or [ln["cpu_seconds"] for ln in timed]
    seconds = sum(ln["seconds"] for ln in timed)
    eps = sum(ln["examples"] for ln in timed) / seconds if seconds > 0 else float("nan")
    acc = [ln["test_acc"] for ln in lines if "test_acc" in ln]
    return {
        "median_round_s": statistics.median(ln["seconds"] for ln in timed),
        "median_cpu_s": statistics.median(cpu),
        "examples_per_s": eps,
        "gflops": eps * train_flops() * 1e-9,
        "test_acc": acc[-1] if acc else float("nan"),
        "examples": statistics.median(ln["examples"] for ln in timed),
        "rounds": len(timed),
    }
