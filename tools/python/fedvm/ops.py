"""The op table, read from the library at import (vm/ir/ops.def, exported as fvm_op_table).

op_table() maps each op's name to an Op: its arity, flags and attributes (names, and which are
required), as the checker and the interpreter know it. Nothing here lists ops by hand: the
wrappers that emit instructions are made from these rows.
"""

from ._lib import lib

__all__ = ["Op", "op_table", "attr_table", "ATTR_KINDS"]

# fvm_attr_kind (vm/ir/ops.h)
ATTR_KINDS = ["func", "int", "bool", "ints", "dtype", "placement", "string", "strings", "real", "value"]
# the OPF_ flags (vm/ir/ops.h)
_FLAGS = {"lift": 1 << 0, "placed": 1 << 1, "federated": 1 << 2, "aggregate": 1 << 3, "literals": 1 << 4}


class Op:
    """One row of the op table: name, min_args, max_args (None: any number), flags (a set of "lift",
    "placed", "federated", "aggregate", "literals"), attrs (names it takes, in attrs.def's order),
    required (the names it needs)."""

    __slots__ = ("name", "index", "min_args", "max_args", "flags", "attrs", "required")

    def __init__(self, name, index, min_args, max_args, flags, attrs, required):
        self.name, self.index, self.min_args, self.max_args = name, index, min_args, max_args
        self.flags, self.attrs, self.required = flags, attrs, required

    def __repr__(self):
        arity = "%d..%s" % (self.min_args, "" if self.max_args is None else self.max_args)
        return "<fedvm op %s args %s attrs %s>" % (self.name, arity, ",".join(self.attrs) or "-")


def _read():
    attrs = []
    i = 0
    while True:
        a = lib.fvm_attr_info_at(i)
        if not a:
            break
        attrs.append((a.contents.name.decode(), ATTR_KINDS[a.contents.kind]))
        i += 1
    ops = {}
    i = 0
    while True:
        o = lib.fvm_op_info_at(i)
        if not o:
            break
        r = o.contents
        names = [attrs[k][0] for k in range(len(attrs)) if r.attrs >> k & 1]
        req = [attrs[k][0] for k in range(len(attrs)) if r.required >> k & 1]
        flags = frozenset(f for f, bit in _FLAGS.items() if r.flags & bit)
        name = r.name.decode()
        ops[name] = Op(name, i, r.min_args, None if r.max_args < 0 else r.max_args, flags, names, req)
        i += 1
    return ops, dict(attrs)


_OPS, _ATTRS = _read()


def op_table():
    """Every op the library knows: name -> Op, in the table's order."""
    return dict(_OPS)


def attr_table():
    """Every attribute: name -> kind ("func", "int", "ints", "dtype", ...)."""
    return dict(_ATTRS)
