"""NumPy arrays and Python containers <-> the library's runtime values (fvm_value), by a fedvm type.

To a value (to_value), by the parameter's type:
  tensor        anything np.asarray takes, cast to the dtype (exactly: a cast
                that changes a value is an error), of a compatible shape
  struct        a dict by field name, or a tuple/list by position
  sequence      a list of elements, or the elements by columns: a tensor, or
                a dict/tuple of them, each with the sequence's length first
  {T}@CLIENTS   a list with one member per client
  T@SERVER, T@CLIENTS   the member itself
From a value (from_value): tensors as NumPy arrays, named structs as dicts,
positional ones as tuples, sequences and client lists as lists.
"""

import ctypes

import numpy as np

from . import _lib
from ._lib import lib
from .types import DTYPE_CODES, DTYPES, FedType, FnType, SeqType, StructType, TensorType

P = ctypes.POINTER


def _fail(where, msg):
    raise TypeError("fedvm: %s: %s" % (where, msg))


def _tensor(x, t, where):
    want = DTYPES[t.dtype.name]
    a = np.asarray(x)
    if a.dtype != want:
        if a.dtype == object:
            _fail(where, "expected %s, found a %s" % (t, type(x).__name__))
        b = a.astype(want)
        if a.dtype.kind in "fc" and want.kind in "iub" and not np.array_equal(b, a):
            _fail(where, "expected %s, found %s values that %s cannot hold" % (t, a.dtype, t.dtype.name))
        if a.dtype.kind in "iu" and want.kind in "iub" and not np.array_equal(b.astype(a.dtype), a):
            _fail(where, "expected %s, found %s values out of its range" % (t, a.dtype))
        a = b
    if len(a.shape) != len(t.shape) or any(s is not None and s != n for s, n in zip(t.shape, a.shape)):
        _fail(where, "expected %s, found shape [%s]" % (t, ",".join(map(str, a.shape))))
    if not a.flags.c_contiguous:
        a = np.array(a, order="C")  # (np.ascontiguousarray makes a scalar 1-d)
    tn = _lib.Tensor()
    dims = _lib.Dims()
    dims.rank = a.ndim
    for i, n in enumerate(a.shape):
        dims.d[i] = n
    d = _lib.Diag()
    if lib.fvm_tensor_alloc(ctypes.byref(tn), DTYPE_CODES.index(t.dtype.name), ctypes.byref(dims), ctypes.byref(d)):
        from .program import diagnostics

        msgs = diagnostics(d)
        _fail(where, "; ".join(m.message for m in msgs) or "cannot allocate")
    if a.nbytes:
        ctypes.memmove(lib.fvm_tensor_ptr(ctypes.byref(tn)), a.ctypes.data, a.nbytes)
    v = lib.fvm_value_tensor_take(ctypes.byref(tn))
    if not v:
        lib.fvm_tensor_release(ctypes.byref(tn))
        raise MemoryError("fedvm: out of memory")
    return v


def _list(kind, items, where):
    v = lib.fvm_value_list(kind, len(items))
    if not v:
        raise MemoryError("fedvm: out of memory")
    try:
        for i, make in enumerate(items):
            v.contents.items[i] = make()
    except BaseException:
        lib.fvm_value_release(v)
        raise
    return v


def _fields_of(x, t, where):
    """The values of struct type t's fields in x (dict by name, tuple/list by position)."""
    names = t.names
    if isinstance(x, dict):
        if not all(names):
            _fail(where, "expected %s (positional: a tuple), found a dict" % t)
        missing = [n for n in names if n not in x]
        extra = [k for k in x if k not in names]
        if missing or extra:
            _fail(where, "expected the fields %s, %s" % (
                ", ".join(names),
                ("missing " + ", ".join(missing)) if missing else ("unknown " + ", ".join(map(str, extra)))))
        return [x[n] for n in names]
    if isinstance(x, (tuple, list)):
        if len(x) != len(names):
            _fail(where, "expected %d fields for %s, found %d" % (len(names), t, len(x)))
        return list(x)
    _fail(where, "expected %s (a dict or a tuple), found %s" % (t, type(x).__name__))


def _field_where(where, name, i):
    return "%s.%s" % (where, name) if name else "%s[%d]" % (where, i)


def _cols_len(x, t, where):
    """The common leading length of the columns x of element type t."""
    if isinstance(t, StructType):
        lens = {_cols_len(f, ft, _field_where(where, n, i)) for i, (f, (n, ft)) in enumerate(zip(_fields_of(x, t, where), t.fields))}
        if len(lens) != 1:
            _fail(where, "the columns of a sequence have different lengths %s" % sorted(lens))
        return lens.pop()
    if isinstance(t, TensorType):
        a = np.asarray(x)
        if a.ndim == 0:
            _fail(where, "a column of a sequence needs a leading length")
        return a.shape[0]
    _fail(where, "a sequence of %s is given as a list of elements" % t)


def _cols(x, t, where):
    """Columns x of element type t as a tensor tree with a leading dimension."""
    if isinstance(t, StructType):
        vals = _fields_of(x, t, where)
        return _list(
            _lib.V_STRUCT,
            [lambda f=f, ft=ft, w=_field_where(where, n, i): _cols(f, ft, w) for i, (f, (n, ft)) in enumerate(zip(vals, t.fields))],
            where,
        )
    return _tensor(x, TensorType(t.dtype, (None,) + t.shape), where)


def to_value(x, t, where="argument"):
    """A new fvm_value (the caller releases it) of type t from Python data x."""
    if isinstance(t, TensorType):
        return _tensor(x, t, where)
    if isinstance(t, StructType):
        vals = _fields_of(x, t, where)
        return _list(
            _lib.V_STRUCT,
            [lambda f=f, ft=ft, w=_field_where(where, n, i): to_value(f, ft, w) for i, (f, (n, ft)) in enumerate(zip(vals, t.fields))],
            where,
        )
    if isinstance(t, SeqType):
        if isinstance(x, list):
            return _list(_lib.V_SEQ, [lambda e=e, i=i: to_value(e, t.elem, "%s[%d]" % (where, i)) for i, e in enumerate(x)], where)
        n = _cols_len(x, t.elem, where)
        cols = _cols(x, t.elem, where)
        v = lib.fvm_value_seq_cols_take(n, cols)
        if not v:
            lib.fvm_value_release(cols)
            raise MemoryError("fedvm: out of memory")
        return v
    if isinstance(t, FedType):
        if t.all_equal:
            return to_value(x, t.member, where)
        if not isinstance(x, (list, tuple)):
            _fail(where, "expected %s: a list with one member per client, found %s" % (t, type(x).__name__))
        return _list(_lib.V_CLIENTS, [lambda e=e, i=i: to_value(e, t.member, "%s[client %d]" % (where, i)) for i, e in enumerate(x)], where)
    _fail(where, "a value of type %s cannot be passed" % t)


def nclients(x, t):
    """The number of clients in Python data x of type t ({T}@CLIENTS somewhere in it), or None."""
    if isinstance(t, FedType) and not t.all_equal:
        return len(x) if isinstance(x, (list, tuple)) else None
    if isinstance(t, StructType) and isinstance(x, (dict, tuple, list)):
        try:
            vals = _fields_of(x, t, "argument")
        except TypeError:
            return None
        for f, (_, ft) in zip(vals, t.fields):
            n = nclients(f, ft)
            if n is not None:
                return n
    return None


def _tensor_out(v):
    tn = v.contents.t
    dt = DTYPES[DTYPE_CODES[tn.dtype]]
    shape = tuple(tn.shape.d[i] for i in range(tn.shape.rank))
    a = np.empty(shape, dt)
    if a.nbytes:
        ctypes.memmove(a.ctypes.data, lib.fvm_tensor_ptr(ctypes.byref(tn)), a.nbytes)
    return a


def _get(fn, v, i):
    from .program import RunError, diagnostics

    out = P(_lib.Value)()
    d = _lib.Diag()
    if fn(v, i, ctypes.byref(out), ctypes.byref(d)):
        raise RunError(diagnostics(d))
    lib.fvm_diag_clear(ctypes.byref(d))
    return out


def from_value(v, t):
    """Python data from fvm_value v (borrowed) of type t."""
    k = v.contents.kind
    if isinstance(t, FedType):
        if k == _lib.V_CLIENTS:
            out = []
            for i in range(v.contents.n):
                m = _get(lib.fvm_clients_get, v, i)
                try:
                    out.append(from_value(m, t.member))
                finally:
                    lib.fvm_value_release(m)
            return out
        return from_value(v, t.member)
    if k == _lib.V_TENSOR:
        return _tensor_out(v)
    if k == _lib.V_STRUCT:
        if not isinstance(t, StructType):
            raise TypeError("fedvm: a struct value of type %s" % t)
        vals = [from_value(v.contents.items[i], ft) for i, (_, ft) in enumerate(t.fields)]
        if all(t.names):
            return dict(zip(t.names, vals))
        return tuple(vals)
    if k == _lib.V_SEQ:
        out = []
        for i in range(v.contents.n):
            e = _get(lib.fvm_seq_get, v, i)
            try:
                out.append(from_value(e, t.elem))
            finally:
                lib.fvm_value_release(e)
        return out
    raise TypeError("fedvm: a value of kind %d" % k)
