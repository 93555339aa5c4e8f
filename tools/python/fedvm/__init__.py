"""fedvm for Python: write federated computations in Python (traced into fedvm IR), load, check,
write and run fedvm programs in-process (docs/PYTHON.md).

    import fedvm as fv
    prog = fv.load("programs/fedavg_2nn.json")
    prog.check()                       # raises fv.CheckError listing every error
    state = prog.initialize(key)       # NumPy arrays in and out
    prog.save("algo.json")

The C library (libfedvm.so, loaded with ctypes) is the one source of truth for types and
semantics: this package parses nothing of the IR itself.
"""

from ._lib import LibraryNotFound, library_path
from .ops import attr_table, op_table
from .program import CheckError, Diagnostic, FedvmError, Function, Program, RunError, load, loads
from .types import (
    ClientsAll,
    Clients,
    DType,
    FedType,
    FnType,
    Seq,
    SeqType,
    Server,
    Struct,
    StructType,
    TensorType,
    Type,
)
from .types import parse as type
from .lax import *  # noqa: F401,F403  the ops, control flow, derivatives, federated intrinsics
from .lax import __all__ as _lax_all
from .train import Metrics, train
from .data import Dataset, dataset_splits, open_dataset, write_dataset
from .tracer import HParam, TracedFunction, TraceError, Var, function, hparam, tracing

bool_ = DType("bool")
u8 = DType("u8")
i32 = DType("i32")
i64 = DType("i64")
u32 = DType("u32")
f32 = DType("f32")
f64 = DType("f64")

__all__ = [
    "LibraryNotFound",
    "library_path",
    "op_table",
    "attr_table",
    "CheckError",
    "Diagnostic",
    "FedvmError",
    "Function",
    "Program",
    "RunError",
    "load",
    "loads",
    "type",
    "Type",
    "DType",
    "TensorType",
    "StructType",
    "SeqType",
    "FedType",
    "FnType",
    "Struct",
    "Seq",
    "Clients",
    "ClientsAll",
    "Server",
    "bool_",
    "u8",
    "i32",
    "i64",
    "u32",
    "f32",
    "f64",
    "function",
    "hparam",
    "HParam",
    "TracedFunction",
    "TraceError",
    "Var",
    "tracing",
    "train",
    "Metrics",
    "write_dataset",
    "open_dataset",
    "dataset_splits",
    "Dataset",
] + list(_lax_all)
