"""Federated datasets from Python, through the library's readers and writer (format/dataset.h):
write_dataset writes NumPy arrays keyed by client id as a FedJAX SQLite file (what fedvm run
--data, fv.train and FedJAX read), open_dataset reads FedJAX and TFF SQLite files one client at a
time."""

import ctypes

import numpy as np

from . import _lib
from ._lib import lib
from ._values import from_value
from .types import DTYPE_CODES, DTYPES, SeqType, StructType, TensorType

__all__ = ["write_dataset", "open_dataset", "Dataset", "dataset_splits"]

P = ctypes.POINTER


class _Column(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("shape", _lib.Dims)]


_FUNCS = {
    "fvm_dataset_create": (ctypes.c_int, [ctypes.c_char_p, P(ctypes.c_void_p), P(_lib.Diag)]),
    "fvm_dataset_add": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
                                       P(ctypes.c_char_p), P(_lib.Tensor), P(_lib.Diag)]),
    "fvm_dataset_finish": (ctypes.c_int, [ctypes.c_void_p, P(_lib.Diag)]),
    "fvm_dataset_abort": (None, [ctypes.c_void_p]),
    "fvm_dataset_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, P(ctypes.c_void_p), P(_lib.Diag)]),
    "fvm_dataset_close": (None, [ctypes.c_void_p]),
    "fvm_dataset_format": (ctypes.c_char_p, [ctypes.c_void_p]),
    "fvm_dataset_splits": (ctypes.c_int, [ctypes.c_char_p, P(P(ctypes.c_char_p)), P(ctypes.c_int), P(_lib.Diag)]),
    "fvm_dataset_free_splits": (None, [P(ctypes.c_char_p), ctypes.c_int]),
    "fvm_dataset_clients": (ctypes.c_int64, [ctypes.c_void_p]),
    "fvm_dataset_columns": (ctypes.c_int, [ctypes.c_void_p, P(P(_Column))]),
    "fvm_dataset_client": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, P(ctypes.c_void_p), P(ctypes.c_size_t),
                                          P(ctypes.c_int64), P(_lib.Diag)]),
    "fvm_dataset_find": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]),
    "fvm_dataset_read": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, P(P(_lib.Value)), P(_lib.Diag)]),
}
for _name, (_res, _args) in _FUNCS.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args


def _check(status, d, what=None):
    if status:
        from .program import FedvmError, diagnostics

        raise FedvmError(diagnostics(d), what)
    lib.fvm_diag_clear(ctypes.byref(d))


def _id_bytes(cid):
    if isinstance(cid, bytes):
        return cid
    if isinstance(cid, str):
        return cid.encode("utf-8")
    if isinstance(cid, (int, np.integer)):
        return str(int(cid)).encode("ascii")
    raise TypeError("fedvm: a client id is bytes, a str or an int, not %s" % type(cid).__name__)


def _as_column(name, a, cid):
    a = np.asarray(a)
    name_ = {np.dtype(v): k for k, v in DTYPES.items()}.get(a.dtype)
    if name_ is None:
        raise TypeError("fedvm: client %r, column '%s': dtype %s is none of %s" % (cid, name, a.dtype, ", ".join(DTYPES)))
    if a.ndim < 1:
        raise TypeError("fedvm: client %r, column '%s': an array of the client's examples (the first axis), "
                        "not a scalar" % (cid, name))
    if a.ndim > _lib.MAX_RANK:
        raise TypeError("fedvm: client %r, column '%s': rank %d is more than %d" % (cid, name, a.ndim, _lib.MAX_RANK))
    return np.ascontiguousarray(a), DTYPE_CODES.index(name_)


def write_dataset(path, clients=None, *, split=None, splits=None):
    """Writes a federated dataset as a FedJAX SQLite file (format/DATASETS.md), for fedvm run --data,
    fv.train and FedJAX.

    clients maps each client id (bytes, str or int) to its examples by column: a dict from column name
    to an array whose first axis is the client's examples (the same length in every column), e.g.
    {"f0000_14": {"x": x_array, "y": y_array}, ...}. Every client has the same columns, dtypes (bool,
    uint8, int32, int64, uint32, float32, float64) and per-example shapes. split names the split
    (default: the default one, fedvm's FILE; another is FILE:SPLIT); splits={"default": clients,
    "test": test_clients} writes several into one file. The file is
    written under a temporary name and renamed into place, so a refused write leaves none; errors
    (mismatched columns, a client id twice) raise fv.FedvmError naming the client and the column.
    """
    if (clients is None) == (splits is None):
        raise TypeError("fedvm: write_dataset takes the clients or splits={split: clients}")
    if splits is None:
        splits = {split: clients}
    w = ctypes.c_void_p()
    d = _lib.Diag()
    _check(lib.fvm_dataset_create(str(path).encode("utf-8"), ctypes.byref(w), ctypes.byref(d)), d)
    try:
        for sp, cl in splits.items():
            for cid, cols in cl.items():
                if not isinstance(cols, dict) or not cols:
                    raise TypeError("fedvm: client %r: a dict from column name to array" % (cid,))
                arrays = [_as_column(n, a, cid) for n, a in cols.items()]
                names = (ctypes.c_char_p * len(cols))(*[str(n).encode("utf-8") for n in cols])
                tens = (_lib.Tensor * len(cols))()
                keep = []
                try:
                    for k, (a, code) in enumerate(arrays):
                        dims = _lib.Dims()
                        dims.rank = a.ndim
                        for i, n in enumerate(a.shape):
                            dims.d[i] = n
                        _check(lib.fvm_tensor_alloc(ctypes.byref(tens[k]), code, ctypes.byref(dims), ctypes.byref(d)), d)
                        keep.append(k)
                        if a.nbytes:
                            ctypes.memmove(lib.fvm_tensor_ptr(ctypes.byref(tens[k])), a.ctypes.data, a.nbytes)
                    idb = _id_bytes(cid)
                    _check(lib.fvm_dataset_add(w, sp.encode("utf-8") if sp else None, idb, len(idb), len(cols), names,
                                               tens, ctypes.byref(d)), d, "fedvm: %s: client %r refused" % (path, cid))
                finally:
                    for k in keep:
                        lib.fvm_tensor_release(ctypes.byref(tens[k]))
    except BaseException:
        lib.fvm_dataset_abort(w)
        raise
    _check(lib.fvm_dataset_finish(w, ctypes.byref(d)), d)


def dataset_splits(path):
    """The splits of a dataset file: for FedJAX files "default" first, then fedvm's other splits; for
    TFF files the split names."""
    out, n, d = P(ctypes.c_char_p)(), ctypes.c_int(), _lib.Diag()
    _check(lib.fvm_dataset_splits(str(path).encode("utf-8"), ctypes.byref(out), ctypes.byref(n), ctypes.byref(d)), d)
    try:
        return [out[i].decode("utf-8") for i in range(n.value)]
    finally:
        lib.fvm_dataset_free_splits(out, n)


class Dataset:
    """A split of a FedJAX or TFF SQLite file, open without reading any client (open_dataset).

    len(ds) is its number of clients, ds.ids their ids (bytes) in the file's order, ds.columns the
    schema ({name: fedvm type of one example's value}), ds[i] or ds[client_id] one client's examples as
    {column: array with the examples first} (a column whose shape varies between examples: a list of
    arrays), ds.examples(i) its number of examples. Use it as a context manager or call close().
    """

    def __init__(self, path, split=None):
        self.path, self.split = str(path), split
        self._h = ctypes.c_void_p()
        d = _lib.Diag()
        _check(lib.fvm_dataset_open(self.path.encode("utf-8"), split.encode("utf-8") if split else None,
                                    ctypes.byref(self._h), ctypes.byref(d)), d)
        self.format = lib.fvm_dataset_format(self._h).decode("ascii")
        cols = P(_Column)()
        n = lib.fvm_dataset_columns(self._h, ctypes.byref(cols))
        self.columns = {}
        for i in range(n):
            c = cols[i]
            self.columns[c.name.decode("utf-8")] = TensorType(DTYPE_CODES[c.dtype], [c.shape.d[k] for k in range(c.shape.rank)])
        self._type = StructType(list(self.columns.items()))

    def close(self):
        """Closes the file (also when the object goes)."""
        if getattr(self, "_h", None):
            lib.fvm_dataset_close(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return lib.fvm_dataset_clients(self._h)

    def _client(self, i):
        idp, idn, ex, d = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_int64(), _lib.Diag()
        _check(lib.fvm_dataset_client(self._h, i, ctypes.byref(idp), ctypes.byref(idn), ctypes.byref(ex), ctypes.byref(d)), d)
        return ctypes.string_at(idp, idn.value), ex.value

    @property
    def ids(self):
        """The clients' ids (bytes), in the file's order."""
        return [self._client(i)[0] for i in range(len(self))]

    def examples(self, i):
        """Client i's number of examples (from the index, without reading its data)."""
        return self._client(self._index(i))[1]

    def _index(self, key):
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not 0 <= key < len(self):
                raise IndexError("fedvm: client %d of %d" % (key, len(self)))
            return int(key)
        idb = _id_bytes(key)
        i = lib.fvm_dataset_find(self._h, idb, len(idb))
        if i < 0:
            raise KeyError(key)
        return i

    def __getitem__(self, key):
        i = self._index(key)
        v, d = P(_lib.Value)(), _lib.Diag()
        _check(lib.fvm_dataset_read(self._h, i, ctypes.byref(v), ctypes.byref(d)), d)
        try:
            if v.contents.cols:  # stored by columns: one array per column, the examples first
                cols = StructType([(n, TensorType(t.dtype, (None,) + t.shape)) for n, t in self.columns.items()])
                return from_value(v.contents.cols, cols)
            rows = from_value(v, SeqType(self._type))
            return {n: [r[n] for r in rows] for n in self.columns}
        finally:
            lib.fvm_value_release(v)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __repr__(self):
        return "<fedvm dataset %s%s: %s, %d clients, columns %s>" % (
            self.path, ":" + self.split if self.split else "", self.format, len(self),
            ", ".join("%s=%s" % kv for kv in self.columns.items()))


def open_dataset(path, split=None):
    """Opens a split of a FedJAX or TFF SQLite file (default: the default split) as a Dataset."""
    return Dataset(path, split)
