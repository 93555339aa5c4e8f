"""fedvm types in TFF's notation, as Python objects: tensors, structs, sequences, placed values.

    fv.f32[784, 200]       f32[784,200]       fv.f32 (or fv.f32[()]) f32[]
    fv.f32[None, 3]        f32[?,3]
    fv.Struct(w=T, b=U)    <w=T,b=U>          fv.Struct(T, U)        <T,U>
    fv.Seq[T]              T*
    fv.Clients[T]          {T}@CLIENTS        fv.Server[T]           T@SERVER
    fv.ClientsAll[T]       T@CLIENTS

parse() reads the notation (format/SPEC.md, "Types") back into these objects.
"""

import numpy as np

__all__ = [
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
    "Server",
    "ClientsAll",
    "parse",
    "as_type",
    "DTYPES",
]

# fedvm dtype -> NumPy dtype (bool is stored as one byte 0/1, as NumPy's is)
DTYPES = {
    "bool": np.dtype(np.bool_),
    "u8": np.dtype(np.uint8),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u32": np.dtype(np.uint32),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
}
# the order of fvm_dtype (vm/ir/tensor.h)
DTYPE_CODES = ["bool", "u8", "i32", "i64", "u32", "f32", "f64"]


class Type:
    """A fedvm type; str() is its notation."""

    def __eq__(self, other):
        return isinstance(other, Type) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))

    def __repr__(self):
        return "fv.type(%r)" % str(self)


class TensorType(Type):
    """A tensor type: dtype (a DType) and shape (a tuple of ints, None where unknown)."""

    def __init__(self, dtype, shape=()):
        self.dtype = dtype if isinstance(dtype, DType) else DType(dtype)
        self.shape = tuple(None if s is None or s == -1 else int(s) for s in shape)

    def __str__(self):
        return "%s[%s]" % (self.dtype.name, ",".join("?" if s is None else str(s) for s in self.shape))

    @property
    def np_dtype(self):
        """The NumPy dtype of the tensor's elements."""
        return DTYPES[self.dtype.name]


class DType(TensorType):
    """A dtype: as a type, its scalar (fv.f32 is f32[]); indexed, a tensor type (fv.f32[784, 10])."""

    def __init__(self, name):
        if name not in DTYPES:
            raise ValueError("fedvm: unknown dtype '%s' (one of %s)" % (name, ", ".join(DTYPES)))
        self.name = name
        self.dtype = self
        self.shape = ()

    def __getitem__(self, shape):
        if not isinstance(shape, tuple):
            shape = (shape,)
        return TensorType(self, shape)

    def __str__(self):
        return self.name + "[]"


class StructType(Type):
    """A struct: fields, a list of (name or None, type)."""

    def __init__(self, fields):
        self.fields = [(n, as_type(t)) for n, t in fields]

    @property
    def names(self):
        """The fields' names (None for a positional field)."""
        return [n for n, _ in self.fields]

    def __str__(self):
        return "<%s>" % ",".join(("%s=%s" % (n, t)) if n else str(t) for n, t in self.fields)


class SeqType(Type):
    """A sequence of elements of one type."""

    def __init__(self, elem):
        self.elem = as_type(elem)

    def __str__(self):
        e = str(self.elem)
        return ("(%s)*" % e if isinstance(self.elem, (FedType, FnType)) else e + "*")


class FedType(Type):
    """A placed value: member at placement 'SERVER' or 'CLIENTS'; at CLIENTS, one per client
    ({T}@CLIENTS) unless all_equal (T@CLIENTS)."""

    def __init__(self, member, placement, all_equal):
        self.member = as_type(member)
        self.placement = placement
        self.all_equal = all_equal or placement == "SERVER"

    def __str__(self):
        if self.all_equal:
            return "%s@%s" % (self.member, self.placement)
        return "{%s}@%s" % (self.member, self.placement)


class FnType(Type):
    """A function type (param may be None)."""

    def __init__(self, param, result):
        self.param = as_type(param) if param is not None else None
        self.result = as_type(result)

    def __str__(self):
        return "(%s -> %s)" % ("" if self.param is None else self.param, self.result)


def Struct(*fields, **named):
    """A struct type: Struct(w=T, b=U) for <w=T,b=U>, Struct(T, U) for <T,U>, or Struct({"w": T})."""
    if len(fields) == 1 and isinstance(fields[0], dict) and not named:
        return StructType(list(fields[0].items()))
    if fields and named:
        raise TypeError("fedvm: a struct's fields are all named or all positional")
    return StructType([(None, t) for t in fields] + list(named.items()))


class _Former:
    def __init__(self, make, what):
        self._make, self._what = make, what

    def __getitem__(self, t):
        return self._make(t)

    def __repr__(self):
        return "fv." + self._what


Seq = _Former(SeqType, "Seq")
Clients = _Former(lambda t: FedType(t, "CLIENTS", False), "Clients")
ClientsAll = _Former(lambda t: FedType(t, "CLIENTS", True), "ClientsAll")
Server = _Former(lambda t: FedType(t, "SERVER", True), "Server")


def as_type(t):
    """A Type from a Type, a dict of types (a struct), or type notation text."""
    if isinstance(t, Type):
        return t
    if isinstance(t, dict):
        return Struct(t)
    if isinstance(t, str):
        return parse(t)
    raise TypeError("fedvm: not a type: %r" % (t,))


class _Parser:
    def __init__(self, text, aliases):
        self.s, self.i, self.aliases = text, 0, aliases or {}

    def error(self, what):
        raise ValueError("fedvm: bad type '%s' at %d: %s" % (self.s, self.i + 1, what))

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\n":
            self.i += 1

    def peek(self, tok):
        self.ws()
        return self.s.startswith(tok, self.i)

    def eat(self, tok):
        if not self.peek(tok):
            self.error("expected '%s'" % tok)
        self.i += len(tok)

    def ident(self):
        self.ws()
        j = self.i
        while j < len(self.s) and (self.s[j].isalnum() or self.s[j] == "_"):
            j += 1
        if j == self.i:
            self.error("expected a name")
        name, self.i = self.s[self.i : j], j
        return name

    def type(self):
        t = self.atom()
        while True:
            if self.peek("*"):
                self.eat("*")
                t = SeqType(t)
            elif self.peek("@"):
                self.eat("@")
                pl = self.ident()
                if pl not in ("SERVER", "CLIENTS"):
                    self.error("unknown placement '%s'" % pl)
                t = FedType(t, pl, True)
            else:
                return t

    def atom(self):
        if self.peek("<"):
            self.eat("<")
            fields = []
            while not self.peek(">"):
                save = self.i
                name = None
                try:
                    n = self.ident()
                    if self.peek("="):
                        self.eat("=")
                        name = n
                    else:
                        self.i = save
                except ValueError:
                    self.i = save
                fields.append((name, self.type()))
                if not self.peek(">"):
                    self.eat(",")
            self.eat(">")
            return StructType(fields)
        if self.peek("{"):
            self.eat("{")
            m = self.type()
            self.eat("}")
            self.eat("@")
            pl = self.ident()
            if pl != "CLIENTS":
                self.error("{T} is placed at CLIENTS")
            return FedType(m, pl, False)
        if self.peek("("):
            self.eat("(")
            if self.peek("->"):
                param = None
            else:
                param = self.type()
                if self.peek(")"):
                    self.eat(")")
                    return param
            self.eat("->")
            res = self.type()
            self.eat(")")
            return FnType(param, res)
        name = self.ident()
        if name in DTYPES:
            self.eat("[")
            dims = []
            while not self.peek("]"):
                self.ws()
                if self.peek("?"):
                    self.eat("?")
                    dims.append(None)
                else:
                    j = self.i
                    while j < len(self.s) and self.s[j].isdigit():
                        j += 1
                    if j == self.i:
                        self.error("expected a dimension")
                    dims.append(int(self.s[self.i : j]))
                    self.i = j
                if not self.peek("]"):
                    self.eat(",")
            self.eat("]")
            return TensorType(DType(name), dims)
        if name in self.aliases:
            return as_type(self.aliases[name])
        self.error("unknown type name '%s'" % name)


def parse(text, aliases=None):
    """The Type written as text in fedvm's notation (aliases: name -> Type or text)."""
    p = _Parser(text, aliases)
    t = p.type()
    p.ws()
    if p.i != len(p.s):
        p.error("unexpected text")
    return t
