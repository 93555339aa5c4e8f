"""Tracing: Python functions with type annotations become fedvm IR functions.

A function decorated with fv.function runs once on traced values (Var), and
every operation on them appends an instruction to the IR function being
built: operators and NumPy-like functions, the ops of the library's op
table (wrappers made from it at import, fedvm.lax), loops and conditionals
taking Python functions (traced into functions of their own), derivatives
and the federated intrinsics. Types are never inferred here: when tracing
needs one (the parameters of a loop body, a struct's fields, a shape), the
library checks the function traced so far and says it (Var.type), so the C
checker stays the one source of truth, and a mistake is reported as soon as
the traced line that makes it.
"""

import inspect
import json
import math
import os
import sys

import numpy as np

from .ops import op_table
from .types import DType, FedType, SeqType, StructType, TensorType, Type, as_type

__all__ = ["Var", "function", "TracedFunction", "HParam", "hparam", "emit", "tracing"]

OPS = op_table()
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_stack = []  # the _Fn being traced, innermost last
_roots = []  # the TracedFunction being traced, innermost last


def tracing():
    """True inside a function being traced."""
    return bool(_stack)


def _py_loc():
    """file:line of the innermost frame outside this package (the user's traced line)."""
    f = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == _PKG_DIR:
        f = f.f_back
    if f is None:
        return None
    return "%s:%d" % (f.f_code.co_filename, f.f_lineno)


class TraceError(TypeError):
    """A mistake in a traced function, found while tracing it (the message says the Python line)."""


def _fail(msg):
    loc = _py_loc()
    raise TraceError("%s%s" % ((loc + ": ") if loc else "", msg))


class _Fn:
    """An IR function under construction."""

    def __init__(self, name, params, doc=None):
        self.name, self.params, self.doc = name, list(params), doc
        self.body, self.locs = [], []
        self.names = {p for p, _ in self.params}
        self.hparam_vars = {}
        self.hparams = {}  # name -> HParam used
        self.result = None
        self.types = {p: as_type(t) for p, t in self.params}
        self.nsub = 0
        self.outer = None  # the function a Python function given to an op was traced in
        self.captures = None  # for those: [(the enclosing function's Var, the parameter it became)]

    def fresh(self, hint):
        hint = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
        if hint[0].isdigit():
            hint = "v" + hint
        if hint not in self.names:
            self.names.add(hint)
            return hint
        k = 1
        while "%s%d" % (hint, k) in self.names:
            k += 1
        name = "%s%d" % (hint, k)
        self.names.add(name)
        return name

    def doc_tree(self, name=None, result=None, locations=True):
        d = {}
        if self.doc:
            d["doc"] = self.doc
        d["params"] = {p: str(t) for p, t in self.params}
        d["body"] = [_with_loc(i, loc) for i, loc in zip(self.body, self.locs)] if locations else [list(i) for i in self.body]
        d["result"] = result or self.result
        return d


def _with_loc(instr, loc):
    """The instruction with its Python file:line as the member "loc" of its attributes
    (format/SPEC.md, "Source locations")."""
    i = list(instr)
    if not loc:
        return i
    if len(i) > 2 and isinstance(i[2], dict):
        i[2] = dict(i[2], loc=loc)
    else:
        i.insert(2, {"loc": loc})
    return i


class HParam:
    """A hyperparameter (format/SPEC.md, "Hyperparameters"): fv.hparam(name, type, default, doc).
    Used as a value in a traced function it is the op hparam; as an integer or real attribute
    (fv.fori's n, a batch size) it is {"hparam": name}."""

    _made = 0  # programs declare their hyperparameters in the order they were made

    def __init__(self, name, type, default, doc=None):
        self.name, self.type, self.default, self.doc = name, as_type(type), default, doc
        HParam._made += 1
        self.order = HParam._made
        if not isinstance(self.type, TensorType):
            raise TypeError("fedvm: hyperparameter '%s' must have a tensor type, not %s" % (name, self.type))

    def decl(self):
        """Its declaration in a program's hparams: {"doc": ..., "type": ..., "default": ...}."""
        d = {}
        if self.doc:
            d["doc"] = self.doc
        d["type"] = str(self.type)
        d["default"] = _jsonable(self.default)
        return d

    def var(self):
        """Its value in the function being traced (the op hparam, emitted once per function)."""
        fn = _cur()
        if self.name not in fn.hparam_vars:
            fn.hparams[self.name] = self
            fn.hparam_vars[self.name] = _append(fn, fn.fresh(self.name), "hparam", [], {"name": self.name})
        return fn.hparam_vars[self.name]

    def __repr__(self):
        return "fv.hparam(%r, %s, %r)" % (self.name, self.type, self.default)


def _hparam_op(dunder):
    def op(self, *args):
        return getattr(self.var(), dunder)(*args)

    op.__name__ = dunder
    op.__doc__ = "%s on the hyperparameter's value (the op hparam) in the function being traced." % dunder
    return op


# In a traced function a hyperparameter computes as its value does (the op hparam).
for _d in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
           "__pow__", "__rpow__", "__neg__", "__lt__", "__le__", "__gt__", "__ge__", "astype"):
    setattr(HParam, _d, _hparam_op(_d))


def hparam(name, type, default, doc=None):
    """Declares the hyperparameter name of type (a tensor type with a static shape) and default value."""
    return HParam(name, type, default, doc)


def _jsonable(v):
    if isinstance(v, np.ndarray) or isinstance(v, np.generic):
        v = v.tolist()
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _cur():
    if not _stack:
        _fail("this operation builds IR: use it inside a function decorated with fv.function")
    return _stack[-1]


def _append(fn, name, op, args, attrs, hint=None):
    instr = [name, op] + ([attrs] if attrs else []) + list(args)
    fn.body.append(instr)
    fn.locs.append(_py_loc())
    return Var(fn, name)


_PY_DTYPE = {bool: "bool", int: "i32", float: "f32"}


def const(value, dtype=None, shape=None):
    """A constant: a Python number or nested list, or a NumPy array (its dtype unless dtype is given;
    a Python float is f32 and an int i32, as a weakly typed JAX scalar becomes)."""
    fn = _cur()
    a = np.asarray(value)
    if dtype is None:
        if isinstance(value, (bool, int, float)) or a.dtype == object:
            dt = _PY_DTYPE.get(type(value), "f32")
        else:
            names = {np.dtype(np.bool_): "bool", np.dtype(np.uint8): "u8", np.dtype(np.int32): "i32",
                     np.dtype(np.int64): "i64" if not isinstance(value, list) else "i32",
                     np.dtype(np.uint32): "u32", np.dtype(np.float32): "f32",
                     np.dtype(np.float64): "f64" if isinstance(value, np.ndarray) else "f32"}
            dt = names.get(a.dtype)
            if dt is None:
                _fail("a constant of NumPy dtype %s has no fedvm dtype" % a.dtype)
    else:
        dt = as_type(dtype).dtype.name if not isinstance(dtype, str) else dtype
    attrs = {"value": _jsonable(a.tolist())}
    attrs["dtype"] = dt
    if shape is not None:
        attrs["shape"] = list(shape)
    elif a.size == 0:
        attrs["shape"] = list(a.shape)
    return _append(fn, fn.fresh("c"), "const", [], attrs)


def _arg(fn, a, literals):
    """An instruction argument: a Var's name, a literal, or the name of a const made for a value."""
    if isinstance(a, Var):
        if a._fn is not fn:
            return _capture(fn, a)._name
        return a._name
    if isinstance(a, HParam):
        return a.var()._name
    if literals and isinstance(a, (bool, int, float)) and not isinstance(a, np.generic):
        if isinstance(a, float) and not math.isfinite(a):
            return const(a)._name
        return a
    if isinstance(a, (dict, tuple)):
        return struct(a)._name
    return const(a)._name


def emit(op, *args, **attrs):
    """Appends the instruction op(args) with attributes to the function being traced; its Var.
    Arguments are Vars, Python scalars (literals where the op takes them, else constants), NumPy
    arrays (constants), dicts and tuples (structs); attributes are converted by their kind."""
    fn = _cur()
    info = OPS.get(op)
    if info is None:
        _fail("unknown op '%s'" % op)
    n = len(args)
    if n < info.min_args or (info.max_args is not None and n > info.max_args):
        want = str(info.min_args) if info.max_args == info.min_args else (
            "%d or more" % info.min_args if info.max_args is None else "%d to %d" % (info.min_args, info.max_args))
        _fail("%s takes %s arguments, %d given" % (op, want, n))
    for k in attrs:
        if k not in info.attrs:
            _fail("%s has no attribute '%s' (it takes %s)" % (op, k, ", ".join(info.attrs) or "none"))
    for k in info.required:
        if k not in attrs:
            _fail("%s needs the attribute '%s'" % (op, k))
    jargs = [_arg(fn, a, "literals" in info.flags) for a in args]
    nsubs = len(_roots[-1]._subs) if _roots else 0
    jattrs = {k: _attr(op, k, v, args) for k, v in attrs.items() if v is not None}
    if _roots and len(_roots[-1]._subs) > nsubs:
        jargs = _captured_args(op, fn, _roots[-1]._subs[nsubs:], jargs)
    return _append(fn, fn.fresh(op), op, jargs, jattrs)


# ---- closures: values of the enclosing function ---------------------------------------

# The ops whose functions take the op's trailing arguments as their trailing parameters (vjp and jvp:
# all but the last), so a value a Python function given to them captures is passed as one more.
_CAPTURING = {"call", "grad", "value_and_grad", "vjp", "jvp", "fori", "scan", "while", "cond", "sequence_map",
              "sequence_filter", "sequence_reduce", "sequence_scan"}


def _capture(fn, a):
    """The parameter of fn standing for a, a value of a function fn is traced in (a closure): IR
    functions have no free variables, so a Python function given to an op gets one more parameter
    for each value of an enclosing function it uses, and the op one more argument (_captured_args)."""
    outer = fn.outer
    while outer is not None and outer is not a._fn:
        outer = outer.outer
    if fn.captures is None or outer is None:
        _fail(
            "'%s' is a value of function '%s', used in function '%s': IR functions have no free "
            "variables, pass it as an argument" % (a._name, a._fn.name, fn.name)
        )
    for v, p in fn.captures:
        if v._fn is a._fn and v._name == a._name:
            return p
    t = a.type
    p = Var(fn, fn.fresh(a._name))
    fn.params.append((p._name, t))
    fn.types[p._name] = t
    fn.captures.append((a, p))
    return p


def _captured_args(op, fn, subs, jargs, names=True):
    """The arguments of op in fn with the values its functions (subs, traced for it) captured: the
    same list of extra parameters for each (while's cond and body, cond's branches take the same),
    and each value as one more argument (its name in fn, or with names=False the value)."""
    subs = [s for s in subs if s.outer is fn]
    union = []
    for s in subs:
        for v, _ in s.captures:
            if not any(v is u or (v._fn is u._fn and v._name == u._name) for u in union):
                union.append(v)
    if not union:
        return jargs
    if op not in _CAPTURING:
        _fail("the function given to %s uses %s of '%s': %s passes its function no other values; pass them "
              "as arguments (placed as the others: federated_broadcast a server value)"
              % (op, ", ".join("'%s'" % v._name for v in union), fn.name, op))
    for s in subs:
        base = s.params[: len(s.params) - len(s.captures)]
        have = {(v._fn, v._name): p for v, p in s.captures}
        caps = []
        for v in union:
            p = have.get((v._fn, v._name))
            if p is None:
                p = Var(s, s.fresh(v._name))
                s.types[p._name] = v.type
            caps.append((v, p))
        s.captures = caps
        s.params = base + [(p._name, s.types[p._name]) for _, p in caps]
    extra = [_arg(fn, v, False) for v in union] if names else union
    if op in ("vjp", "jvp"):
        return jargs[:-1] + extra + jargs[-1:]
    return jargs + extra


from .ops import attr_table  # noqa: E402

_ATTR_KIND = attr_table()


def _attr(op, name, v, args):
    kind = _ATTR_KIND[name]
    if isinstance(v, HParam):
        if kind not in ("int", "real"):
            _fail("%s's attribute %s cannot be a hyperparameter" % (op, name))
        _cur().hparams[v.name] = v
        return {"hparam": v.name}
    if kind == "func":
        return _func_attr(op, name, v, args)
    if kind == "dtype":
        return v.name if isinstance(v, DType) else as_type(v).dtype.name if isinstance(v, Type) else str(v)
    if kind == "ints":
        return [int(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
    if kind == "strings":
        return [str(x) for x in v]
    if kind == "placement":
        return str(v).upper()
    if kind == "value":
        return _jsonable(v)
    if kind == "int":
        return int(v)
    if kind == "real":
        return float(v)
    return v


# ---- functions given to ops -------------------------------------------------


def _member(t):
    return t.member if isinstance(t, FedType) else t


def _elem(t):
    if not isinstance(t, SeqType):
        _fail("expected a sequence, found %s" % t)
    return t.elem


def _fn_params(op, attr, args):
    """The parameter types of the function an op's FUNC attribute names, from its arguments' types."""
    ts = lambda: [a.type if isinstance(a, (Var, HParam)) else None for a in args]  # noqa: E731
    if op in ("call", "grad", "value_and_grad"):
        return ts()
    if op in ("vjp", "jvp"):
        return ts()[:-1]
    if op in ("federated_map", "federated_map_all_equal", "federated_apply"):
        return [_member(t) for t in ts()]
    if op == "federated_eval":
        return []
    if op in ("sequence_map", "sequence_filter"):
        t = ts()
        return [_elem(t[0])] + t[1:]
    if op in ("sequence_reduce", "sequence_scan"):
        t = ts()
        return [t[1], _elem(t[0])] + t[2:]
    if op in ("fori", "scan"):
        return [TensorType("i32", ())] + ts()
    if op == "while":
        return ts()
    if op == "cond":
        return ts()[1:]
    if op == "federated_aggregate":
        t = ts()
        zero = t[1]
        return {"accumulate": [zero, _member(t[0])], "merge": [zero, zero], "report": [zero]}[attr]
    _fail("give %s's %s a function decorated with fv.function, or its name" % (op, attr))


def _func_attr(op, attr, v, args):
    if isinstance(v, str):
        return v
    if isinstance(v, TracedFunction):
        v._ensure_traced()
        _roots[-1]._deps.append(v) if _roots else None
        return v.name
    if callable(v):
        types = _fn_params(op, attr, args)
        if any(t is None for t in types):
            _fail("%s: the arguments of a traced function given to %s must be traced values" % (op, attr))
        return _subfunction(v, types, "%s_%s" % (op, attr) if attr != "fn" else op)
    _fail("%s's attribute %s takes a function, found %r" % (op, attr, v))


def _subfunction(py, types, kind):
    """Traces Python callable py on parameters of the given types into a new function of the root
    being traced; its name."""
    outer = _cur()
    root = _roots[-1]
    root._nsub += 1
    name = "%s_%s%d" % (root.name, kind, root._nsub)
    try:
        sig = inspect.signature(py)
        pnames = [p for p in sig.parameters][: len(types)]
    except (TypeError, ValueError):
        pnames = []
    if len(pnames) < len(types):
        pnames = pnames + ["x%d" % i for i in range(len(pnames), len(types))]
    fn = _Fn(name, list(zip(pnames, types)), getattr(py, "__doc__", None) if inspect.isfunction(py) else None)
    fn.outer, fn.captures = outer, []
    _trace_into(fn, py)
    outer.hparams.update(fn.hparams)
    root._subs.append(fn)
    return name


def _trace_into(fn, py):
    _stack.append(fn)
    try:
        out = py(*[Var(fn, p) for p, _ in fn.params])
        fn.result = _result(fn, out)
    finally:
        _stack.pop()


def _result(fn, out):
    if isinstance(out, Var) and out._fn is fn:
        return out._name
    if out is None:
        _fail("function '%s' returns nothing: a traced function returns a value" % fn.name)
    return _arg(fn, out, False)


def struct(*fields, **named):
    """A struct of traced values: fv.struct(w=a, b=b) (named), fv.struct(a, b) (positional), or from
    a dict or a tuple."""
    if len(fields) == 1 and not named and isinstance(fields[0], dict):
        named = fields[0]
        fields = ()
    elif len(fields) == 1 and not named and isinstance(fields[0], tuple):
        fields = fields[0]
    fn = _cur()
    if named and fields:
        _fail("a struct's fields are all named or all positional")
    if named:
        args = [_arg(fn, v, False) for v in named.values()]
        return _append(fn, fn.fresh("s"), "struct", args, {"names": list(named)})
    return _append(fn, fn.fresh("s"), "struct", [_arg(fn, v, False) for v in fields], None)


# ---- traced values -----------------------------------------------------------


class Var:
    """A traced value: a name bound in the IR function being built. Operators and methods append
    instructions; .type asks the library (the checker) for its type."""

    __slots__ = ("_fn", "_name")
    __hash__ = object.__hash__
    __array_priority__ = 1000  # numpy scalars on the left defer to Var

    def __init__(self, fn, name):
        self._fn, self._name = fn, name

    def __repr__(self):
        return "<traced %s in %s>" % (self._name, self._fn.name)

    @property
    def type(self):
        """The value's type, from the checker (fedvm.types)."""
        t = self._fn.types.get(self._name)
        if t is None:
            t = _probe(self)
            self._fn.types[self._name] = t
        return t

    @property
    def shape(self):
        """The tensor's shape, a tuple (None for a dim the checker does not fix)."""
        t = _member(self.type)
        if not isinstance(t, TensorType):
            _fail("'%s' is %s, not a tensor" % (self._name, t))
        return t.shape

    @property
    def dtype(self):
        """The tensor's dtype (fv.DType)."""
        t = _member(self.type)
        if not isinstance(t, TensorType):
            _fail("'%s' is %s, not a tensor" % (self._name, t))
        return t.dtype

    @property
    def ndim(self):
        """The tensor's rank."""
        return len(self.shape)

    def __bool__(self):
        _fail(
            "a traced value has no Python truth value (it is known only when the program runs): "
            "use fv.cond or fv.select instead of if, fv.while_loop instead of while"
        )

    def __len__(self):
        t = _member(self.type)
        if isinstance(t, StructType):
            return len(t.fields)
        s = self.shape
        if not s or s[0] is None:
            _fail("'%s' (%s) has no static length" % (self._name, t))
        return s[0]

    def __iter__(self):
        t = _member(self.type)
        if isinstance(t, StructType):
            return iter([self[i] for i in range(len(t.fields))])
        return iter([self[i] for i in range(len(self))])

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        t = _member(self.type)
        if isinstance(t, StructType) and name in t.names:
            return emit("field", self, name=name)
        raise AttributeError("'%s' (%s) has no field or attribute '%s'" % (self._name, self.type, name))

    def __getitem__(self, k):
        if isinstance(k, str):
            return emit("field", self, name=k)
        t = _member(self.type)
        if isinstance(t, StructType):
            if not isinstance(k, int):
                _fail("a struct's fields are taken by name or by a Python int")
            return emit("field", self, index=k if k >= 0 else len(t.fields) + k)
        if isinstance(k, Var):
            return emit("gather", self, k, axis=0)
        return _index(self, k)

    # arithmetic
    def __add__(self, o):
        return emit("add", self, o)

    def __radd__(self, o):
        return emit("add", o, self)

    def __sub__(self, o):
        return emit("sub", self, o)

    def __rsub__(self, o):
        return emit("sub", o, self)

    def __mul__(self, o):
        return emit("mul", self, o)

    def __rmul__(self, o):
        return emit("mul", o, self)

    def __truediv__(self, o):
        return emit("div", self, o)

    def __rtruediv__(self, o):
        return emit("div", o, self)

    def __floordiv__(self, o):
        return emit("floor_div", self, o)

    def __rfloordiv__(self, o):
        return emit("floor_div", o, self)

    def __mod__(self, o):
        return emit("mod", self, o)

    def __rmod__(self, o):
        return emit("mod", o, self)

    def __pow__(self, o):
        return emit("pow", self, o)

    def __rpow__(self, o):
        return emit("pow", o, self)

    def __matmul__(self, o):
        return emit("matmul", self, o)

    def __rmatmul__(self, o):
        return emit("matmul", o, self)

    def __neg__(self):
        return emit("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return emit("abs", self)

    # comparisons and logic
    def __eq__(self, o):
        return emit("eq", self, o)

    def __ne__(self, o):
        return emit("ne", self, o)

    def __lt__(self, o):
        return emit("lt", self, o)

    def __le__(self, o):
        return emit("le", self, o)

    def __gt__(self, o):
        return emit("gt", self, o)

    def __ge__(self, o):
        return emit("ge", self, o)

    def __and__(self, o):
        return emit("and", self, o)

    def __rand__(self, o):
        return emit("and", o, self)

    def __or__(self, o):
        return emit("or", self, o)

    def __ror__(self, o):
        return emit("or", o, self)

    def __invert__(self):
        return emit("not", self)

    # NumPy-like methods
    @property
    def T(self):
        """The transpose (the op transpose: the axes reversed)."""
        return emit("transpose", self)

    def astype(self, dtype):
        """The value cast to dtype (fv.f32 or "f32"; the op cast)."""
        return emit("cast", self, dtype=dtype)

    def reshape(self, *shape):
        """The value in a new shape (ints, or a tuple; -1 once for the rest; the op reshape)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return emit("reshape", self, shape=list(shape))

    def sum(self, axis=None, keepdims=False):
        """The sum over axis (an int or a tuple; all axes when None), as NumPy's."""
        return _reduce("sum", self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        """The mean over axis, as NumPy's."""
        return _reduce("mean", self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        """The maximum over axis, as NumPy's."""
        return _reduce("max", self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        """The minimum over axis, as NumPy's."""
        return _reduce("min", self, axis, keepdims)

    def argmax(self, axis=None):
        """The index of the maximum along axis (an i64; the op argmax)."""
        return emit("argmax", self, axis=axis)


def _reduce(op, x, axis, keepdims):
    axes = None if axis is None else (list(axis) if isinstance(axis, (tuple, list)) else [axis])
    return emit(op, x, axes=axes, keepdims=keepdims or None)


def _index(x, k):
    """Basic indexing of a tensor by ints and slices (a slice, then a reshape dropping int axes)."""
    if not isinstance(k, tuple):
        k = (k,)
    shape = x.shape
    if len(k) > len(shape):
        _fail("too many indices for '%s' of shape %s" % (x._name, list(shape)))
    start, stop, step, drop = [], [], [], []
    for ax, i in enumerate(k):
        n = shape[ax]
        if isinstance(i, slice):
            if n is None:
                _fail("slicing axis %d of '%s' needs its static length" % (ax, x._name))
            a, b, s = i.indices(n)
            if s <= 0:
                _fail("negative steps are not supported")
            start.append(a), stop.append(max(a, b)), step.append(s)
        elif isinstance(i, (int, np.integer)):
            if n is None:
                _fail("indexing axis %d of '%s' needs its static length" % (ax, x._name))
            i = int(i) + (n if i < 0 else 0)
            if not 0 <= i < n:
                _fail("index %d is out of range for axis %d of length %d" % (int(i), ax, n))
            start.append(i), stop.append(i + 1), step.append(1)
            drop.append(ax)
        else:
            _fail("index %r: ints and slices index a tensor (or a traced integer for axis 0)" % (i,))
    y = emit("slice", x, start=start, stop=stop, step=step)
    if drop:
        rest = list(shape[len(k):])
        kept = [((stop[a] - start[a] + step[a] - 1) // step[a]) for a in range(len(k)) if a not in drop]
        y = emit("reshape", y, shape=kept + rest)
    return y


# ---- probing the checker ---------------------------------------------------------


def _probe(var):
    """The type of var, from the library: the function traced so far with var as its result, checked
    with the functions it may use."""
    from .program import CheckError, loads

    fn = var._fn
    funcs, hps = {}, {}
    for root in _roots:
        for dep in _deps_closure(root):
            funcs.update(dep._funcs_doc())
            hps.update(dep._hparams())
        for sub in root._subs:
            funcs[sub.name] = sub.doc_tree()
            hps.update(sub.hparams)
    hps.update(fn.hparams)
    probe = "fv_probe"
    funcs.pop(fn.name, None)
    funcs[probe] = fn.doc_tree(result=var._name)
    doc = {"fedvm": 1, "functions": funcs}
    if hps:
        doc["hparams"] = {k: h.decl() for k, h in hps.items()}
    p = loads(json.dumps(doc), "%s.json" % fn.name)
    try:
        p.check()
    except CheckError as e:
        raise TraceError(_traced_errors(e, fn, p)) from None
    return p.function(probe).result


def _traced_errors(e, fn, p):
    """A CheckError's diagnostics about the traced function, at their Python lines."""
    lines = []
    for d in e.diagnostics:
        loc = None
        ptr = d.pointer or ""
        pre = "/functions/fv_probe/body/"
        if ptr.startswith(pre):
            k = ptr[len(pre):].split("/")[0]
            if k.isdigit() and int(k) < len(fn.locs):
                loc = fn.locs[int(k)]
        lines.append("%s: %s" % (loc or "in %s" % fn.name, d.message))
    return "\n".join(lines)


def _deps_closure(root):
    seen, out, todo = set(), [], list(root._deps)
    while todo:
        f = todo.pop()
        if id(f) in seen or f is root or f._fn is None:
            continue
        seen.add(id(f))
        out.append(f)
        todo.extend(f._deps)
    return out


# ---- fv.function ---------------------------------------------------------------


def _annotation_type(py, pname, ann):
    if ann is inspect.Parameter.empty:
        raise TypeError("fedvm: parameter '%s' of %s needs a type annotation (fv.f32[3], fv.Clients[...], ...)"
                        % (pname, py.__qualname__))
    if isinstance(ann, str):
        g = dict(py.__globals__)
        try:
            ann = eval(ann, g)  # annotations written as text (from __future__ import annotations)
        except Exception as e:
            raise TypeError("fedvm: parameter '%s' of %s: cannot read its annotation %r (%s)"
                            % (pname, py.__qualname__, ann, e)) from None
    return as_type(ann)


class TracedFunction:
    """A Python function traced into a fedvm function (fv.function). Inside another traced function,
    calling it emits a call; outside, calling it runs it in-process on NumPy arrays."""

    def __init__(self, py, name=None, doc=None):
        self.py = py
        self.name = name or py.__name__
        self.doc = doc if doc is not None else inspect.getdoc(py)
        self._fn = None
        self._subs = []
        self._deps = []
        self._nsub = 0
        self._tracing = False
        self._program = None
        self.__doc__ = py.__doc__
        self.__wrapped__ = py

    def _ensure_traced(self):
        if self._fn is not None:
            return self._fn
        if self._tracing:
            _fail("'%s' calls itself: fedvm functions are not recursive" % self.name)
        sig = inspect.signature(self.py)
        params = [(p, _annotation_type(self.py, p, sig.parameters[p].annotation)) for p in sig.parameters]
        fn = _Fn(self.name, params, self.doc)
        self._tracing = True
        _roots.append(self)
        try:
            _trace_into(fn, self.py)
        finally:
            _roots.pop()
            self._tracing = False
        self._fn = fn
        return fn

    def trace(self):
        """Traces the function (once); returns self."""
        self._ensure_traced()
        return self

    def _funcs_doc(self, locations=True):
        fn = self._ensure_traced()
        d = {self.name: fn.doc_tree(locations=locations)}
        for s in self._subs:
            d[s.name] = s.doc_tree(locations=locations)
        return d

    def _hparams(self):
        self._ensure_traced()
        h = dict(self._fn.hparams)
        for s in self._subs:
            h.update(s.hparams)
        return h

    def _closure(self):
        """self and every traced function it uses, self first."""
        self._ensure_traced()
        return [self] + _deps_closure(self)

    def __call__(self, *args, **kwargs):
        if _stack:
            self._ensure_traced()
            if _roots:
                _roots[-1]._deps.append(self)
            return emit("call", *args, fn=self.name)
        if self._program is None:
            from .program import Program

            self._program = Program(self)
        return self._program(self.name, *args, **kwargs)

    def __repr__(self):
        return "<fedvm traced function %s>" % self.name


def function(py=None, *, name=None, doc=None):
    """Decorator: the annotated Python function traced into a fedvm function named name (default its
    own name) when a program needs it: @fv.function, or @fv.function(name="next")."""
    if py is None:
        return lambda f: TracedFunction(f, name, doc)
    return TracedFunction(py, name, doc)
