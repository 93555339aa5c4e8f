"""The ops as Python functions, made at import from the library's op table (one per row of
vm/ir/ops.def, so they cannot drift from the VM), and the control flow, derivative and
federated forms that take Python functions.

Every op op is lax.op(*args, **attributes) ("and", "or", "not" are logical_and, logical_or,
logical_not). An op whose attribute fn takes a function also takes it as its first positional
argument, as TFF writes tff.federated_map(fn, arg): a function decorated with fv.function, its
name, or a Python function, traced on the types of the arguments it will get.
"""

from . import tracer
from .tracer import OPS, TracedFunction, Var, emit, struct, const
from .types import TensorType

_PY_NAMES = {"and": "logical_and", "or": "logical_or", "not": "logical_not"}
__all__ = []


def _wrapper(op):
    info = OPS[op]
    takes_fn = "fn" in info.attrs

    def f(*args, **attrs):
        if takes_fn and args and "fn" not in attrs and (callable(args[0]) or isinstance(args[0], str)) \
                and not isinstance(args[0], Var):
            attrs["fn"], args = args[0], args[1:]
        return emit(op, *args, **attrs)

    f.__name__ = _PY_NAMES.get(op, op)
    arity = "%d" % info.min_args if info.max_args == info.min_args else (
        "%d or more" % info.min_args if info.max_args is None else "%d to %d" % (info.min_args, info.max_args))
    f.__doc__ = "The op %s (format/SPEC.md): %s argument(s); attributes %s%s." % (
        op, arity, ", ".join(info.attrs) or "none",
        (" (required: %s)" % ", ".join(info.required)) if info.required else "")
    return f


generated = {}  # op name -> its wrapper, as made from the table (some are given friendlier forms below)
for _op in OPS:
    _f = generated[_op] = _wrapper(_op)
    globals()[_f.__name__] = _f
    __all__.append(_f.__name__)
struct = tracer.struct  # named or positional fields (the op struct, names from the keywords)
const = tracer.const  # a value's dtype and shape from the value
__all__.remove("hparam")  # fv.hparam declares one (tracer.hparam); a use of it emits the op


# ---- NumPy-like ------------------------------------------------------------------


def sum(x, axis=None, keepdims=False):  # noqa: A001
    """Sum over axis (an int or a tuple; all axes when None)."""
    return tracer._reduce("sum", x, axis, keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean over axis."""
    return tracer._reduce("mean", x, axis, keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    """Maximum over axis."""
    return tracer._reduce("max", x, axis, keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    """Minimum over axis."""
    return tracer._reduce("min", x, axis, keepdims)


def where(p, a, b):
    """a where p, else b (the op select)."""
    return emit("select", p, a, b)


def dot(a, b):
    """a @ b (the op matmul)."""
    return emit("matmul", a, b)


def square(x):
    """x * x."""
    return emit("mul", x, x)


def zeros(shape, dtype="f32"):
    """A constant of zeros."""
    return const(0, dtype=dtype, shape=list(shape))


def ones(shape, dtype="f32"):
    """A constant of ones."""
    return const(1, dtype=dtype, shape=list(shape))


def full(shape, value, dtype="f32"):
    """A constant filled with value."""
    return const(value, dtype=dtype, shape=list(shape))


def array(value, dtype=None):
    """A constant from a Python number, nested list or NumPy array."""
    return const(value, dtype=dtype)


def astype(x, dtype):
    """x cast to dtype."""
    return emit("cast", x, dtype=dtype)


__all__ += ["sum", "mean", "max", "min", "where", "dot", "square", "zeros", "ones", "full", "array", "astype",
            "struct", "const"]


# ---- control flow ------------------------------------------------------------------


def fori(n, body, init, *extra):
    """for i in range(n): state = body(i, state, *extra); the state at the end. n is an int or a
    hyperparameter (jax.lax.fori_loop(0, n, body, init))."""
    return emit("fori", init, *extra, fn=body, n=n)


def fori_loop(lower, upper, body, init):
    """jax.lax.fori_loop with lower 0."""
    if lower != 0:
        tracer._fail("fori_loop: fedvm's loops start at 0")
    return fori(upper, body, init)


def while_loop(cond_fn, body_fn, init, *extra, max_iter):
    """while cond_fn(state, *extra): state = body_fn(state, *extra); stopped with an error after
    max_iter iterations (jax.lax.while_loop)."""
    return emit("while", init, *extra, cond=cond_fn, body=body_fn, max_iter=max_iter)


def cond(pred, true_fn, false_fn, *operands):
    """true_fn(*operands) if pred else false_fn(*operands); only the branch taken runs (jax.lax.cond)."""
    return emit("cond", pred, *operands, then=true_fn, **{"else": false_fn})


def sequence_reduce(seq, init, fn, *extra):
    """A left fold: acc = init; for e in seq: acc = fn(acc, e, *extra) (tff.sequence_reduce)."""
    return emit("sequence_reduce", seq, init, *extra, fn=fn)


def sequence_map(fn, seq, *extra):
    """[fn(e, *extra) for e in seq] (tff.sequence_map)."""
    return emit("sequence_map", seq, *extra, fn=fn)


__all__ += ["fori", "fori_loop", "while_loop", "cond", "sequence_reduce", "sequence_map"]


# ---- derivatives -----------------------------------------------------------------------


def _diff(op, f, wrt, result, has_aux=False):
    def g(*args):
        nsubs = len(tracer._roots[-1]._subs) if tracer._roots else 0
        fname = tracer._func_attr(op, "fn", f, args)
        if tracer._roots and len(tracer._roots[-1]._subs) > nsubs:  # values f captured: more arguments
            args = tracer._captured_args(op, tracer._cur(), tracer._roots[-1]._subs[nsubs:], list(args), names=False)
        w = wrt
        if isinstance(w, int):
            w = None if w == 0 else _param_name(fname, w)
        if has_aux:
            return result(emit(op, *args, fn=fname, wrt=w, has_aux=True))
        return result(emit(op, *args, fn=fname, wrt=w))

    return g


def _param_name(fname, k):
    for root in tracer._roots:
        for s in root._subs:
            if s.name == fname:
                return s.params[k][0]
        for d in [root] + tracer._deps_closure(root):
            if d.name == fname and d._fn is not None:
                return d._fn.params[k][0]
    tracer._fail("cannot find the parameters of '%s'" % fname)


def grad(f, wrt=0, has_aux=False):
    """The gradient of f (a scalar float result) with respect to its parameter wrt (an index or a
    name; default the first): fv.grad(loss)(w, data) (jax.grad; the op grad). With has_aux, f
    returns (value, aux) and the result is (gradient of value, aux), as jax.grad(f, has_aux=True)."""
    if has_aux:
        return _diff("grad", f, wrt, lambda v: (v["grad"], v["aux"]), True)
    return _diff("grad", f, wrt, lambda v: v)


def value_and_grad(f, wrt=0, has_aux=False):
    """(f's value, its gradient): fv.value_and_grad(loss)(w, data) (jax.value_and_grad). With
    has_aux, f returns (value, aux) and the result is ((value, aux), gradient of value), as
    jax.value_and_grad(f, has_aux=True)."""
    if has_aux:
        return _diff("value_and_grad", f, wrt, lambda v: ((v["value"][0], v["value"][1]), v["grad"]), True)
    return _diff("value_and_grad", f, wrt, lambda v: (v["value"], v["grad"]))


def vjp(f, wrt=0):
    """The vector-Jacobian product: fv.vjp(f)(*args, ct) is ct . df/dx_wrt (the op vjp)."""
    return _diff("vjp", f, wrt, lambda v: v)


def jvp(f, wrt=0):
    """The Jacobian-vector product with f's value: fv.jvp(f)(*args, t) is (f(args), df/dx_wrt . t)."""
    return _diff("jvp", f, wrt, lambda v: (v["value"], v["tangent"]))


__all__ += ["grad", "value_and_grad", "vjp", "jvp"]


# ---- federated intrinsics: TFF's names (made above) and DrJAX/FAX-style aliases -----------------------


def broadcast(x):
    """federated_broadcast: a server value at every client (drjax.broadcast)."""
    return emit("federated_broadcast", x)


def map_fn(fn, *args):
    """federated_map: fn at every client (drjax.map_fn)."""
    return emit("federated_map", *args, fn=fn)


def reduce_sum(x):
    """federated_sum: the clients' values summed at the server (drjax.reduce_sum)."""
    return emit("federated_sum", x)


def reduce_mean(x):
    """federated_mean: the clients' values averaged at the server (drjax.reduce_mean)."""
    return emit("federated_mean", x)


__all__ += ["broadcast", "map_fn", "reduce_sum", "reduce_mean"]
