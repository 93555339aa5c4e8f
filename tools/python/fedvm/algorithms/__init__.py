"""Federated algorithms written with the package (docs/PYTHON.md, "Algorithms").

Each builds a program whose runs are bit-identical to the JSON program of programs/ it mirrors
(tests/python/test_algorithms.py checks it); programs/*.json stay the hand-written reference.
"""

from .synthetic import (
    fedadagrad_synthetic,
    fedadam_synthetic,
    fedavg_synthetic,
    fedprox_synthetic,
    fedsgd_synthetic,
    fedyogi_synthetic,
)
from .scaffold import scaffold_synthetic

__all__ = ["fedavg_synthetic", "fedprox_synthetic", "fedadam_synthetic", "fedyogi_synthetic", "fedadagrad_synthetic",
           "fedsgd_synthetic", "scaffold_synthetic"]
