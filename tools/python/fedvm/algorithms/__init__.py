"""Federated algorithms written with the package (docs/PYTHON.md, "Algorithms").

Each builds a program whose runs are bit-identical to the JSON program of programs/ it mirrors
(tests/python/test_algorithms.py checks it); programs/*.json stay the hand-written reference.
"""

from .fedavg import fedavg_synthetic

__all__ = ["fedavg_synthetic"]
