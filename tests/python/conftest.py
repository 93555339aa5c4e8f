"""pytest setup: the package from this checkout (tools/python), with the library it finds beside it (lib/);
the commands from FEDVM_BIN (default bin/)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
FEDVM_BIN = os.path.abspath(os.environ.get("FEDVM_BIN") or os.path.join(ROOT, "bin"))
FEDVM = os.path.join(FEDVM_BIN, "fedvm")


@pytest.fixture(scope="module")
def syn(tmp_path_factory):
    """Synthetic(1,1)-style data of 10 clients (fedvm data synthetic --kind fedprox, seed 1)."""
    d = tmp_path_factory.mktemp("syn")
    path = str(d / "syn.sqlite")
    subprocess.run([FEDVM, "data", "synthetic", "--kind", "fedprox", "--clients", "10", "--seed", "1", "-o", path],
                   check=True, capture_output=True)
    return path


def round_lines(path):
    """A metrics file's round lines without their timings."""
    out = []
    for line in open(path):
        d = json.loads(line)
        if "round" in d:
            for k in ("seconds", "eval_seconds", "cpu_seconds"):
                d.pop(k, None)
            out.append(d)
    return out


def epoch_orders(n, key, epochs):
    """fedvm's order of n examples in each epoch of a client's SGD (sequence_shuffle with
    random_fold_in(key, epoch), as the programs' epoch functions shuffle), computed by fedvm
    in-process: a list of index arrays, one per epoch."""
    import numpy as np
    import fedvm as fv

    @fv.function
    def order(idx: fv.Seq[fv.i32], key: fv.u32[2], i: fv.i32):
        return fv.sequence_shuffle(idx, fv.random_fold_in(key, i))

    return [np.array(order(np.arange(n, dtype=np.int32), key, np.int32(e))) for e in range(epochs)]
