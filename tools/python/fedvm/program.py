"""Programs: loading fedvm IR (files or text), checking it, writing it, and calling its functions in-process."""

import ctypes
import os

from . import _lib
from ._lib import lib
from ._values import from_value, nclients, to_value
from .types import FedType, parse

__all__ = ["Diagnostic", "FedvmError", "CheckError", "RunError", "Program", "Function", "load", "loads"]

P = ctypes.POINTER


import re as _re

# the checker names an instruction's origin (its "loc") after the message: " (from FILE:LINE)"
_ORIGIN = _re.compile(r" \(from (.+):(\d+)\)$")


class Diagnostic:
    """One error the library reported: code (its kind: "type", "name", "placement", ...), file, line,
    col (1-based; 0 when unknown), pointer (the JSON pointer of the node at fault) and message.
    str() is the library's own form, "file:line:col: pointer: message". An error at an instruction
    that carries its Python line (traced, or the member "loc") has it as py_file and py_line."""

    __slots__ = ("code", "file", "line", "col", "pointer", "message", "text", "py_file", "py_line")

    def __init__(self, code, file, line, col, pointer, message, text):
        self.code, self.file, self.line, self.col = code, file, line, col
        self.pointer, self.message, self.text = pointer, message, text
        self.py_file, self.py_line = None, 0
        m = _ORIGIN.search(message or "")
        if m:
            self.message = message[: m.start()]
            self.py_file, self.py_line = m.group(1), int(m.group(2))

    def __str__(self):
        """At its Python line when a traced instruction has it ("algo.py:12: message (IR: file:line:col:
        pointer)"), else the library's own form."""
        if self.py_file:
            ir = "%s:%d:%d: %s" % (self.file, self.line, self.col, self.pointer or "")
            return "%s:%d: %s (IR: %s)" % (self.py_file, self.py_line, self.message, ir)
        return self.text

    def __repr__(self):
        return "Diagnostic(%r)" % self.text


def _s(b):
    return b.decode("utf-8", "replace") if b is not None else None


def diagnostics(d):
    """The errors of an fvm_diag as Diagnostics; clears it."""
    out = []
    for i in range(d.n):
        e = d.errs[i]
        text = _lib.take_string(lib.fvm_error_format(ctypes.byref(e))) or _s(e.msg)
        out.append(
            Diagnostic(_s(lib.fvm_status_name(e.code)), _s(e.loc.file), e.loc.line, e.loc.col, _s(e.loc.ptr), _s(e.msg), text)
        )
    if d.dropped:
        out.append(Diagnostic("limit", None, 0, 0, None, "%d more errors" % d.dropped, "... %d more errors" % d.dropped))
    lib.fvm_diag_clear(ctypes.byref(d))
    return out


class FedvmError(Exception):
    """An error the library reported; .diagnostics lists every one (Diagnostic), str() shows them one a line."""

    def __init__(self, diagnostics, what=None):
        self.diagnostics = list(diagnostics)
        lines = [str(x) for x in self.diagnostics]
        head = what or (lines[0] if len(lines) == 1 else "%d errors" % len(lines))
        super().__init__(head if len(lines) <= 1 and not what else "\n".join([head] + lines))


class CheckError(FedvmError):
    """A program that does not load or check: every error, located in its source."""


class RunError(FedvmError):
    """An error while running a function (a bad index, a value of the wrong shape, ...)."""


def _call_diag(fn, *args):
    d = _lib.Diag()
    status = fn(*args, ctypes.byref(d))
    return status, d


class Function:
    """A function of a checked program: name, params [(name, Type)], result (Type). Calling it runs it."""

    def __init__(self, program, cfunc):
        self.program = program
        self._f = cfunc
        f = cfunc.contents
        self.name = _s(f.name)
        ar = program._arena
        types = []
        for i in range(f.nparams):
            types.append((_s(f.param_names[i]), parse(_s(lib.fvm_type_str(ctypes.byref(ar), f.param_types[i], False)))))
        self.params = types
        self.result = parse(_s(lib.fvm_type_str(ctypes.byref(ar), f.result_type, False)))

    def __repr__(self):
        return "<fedvm function %s(%s) -> %s>" % (self.name, ", ".join("%s: %s" % p for p in self.params), self.result)

    def __call__(self, *args, **kwargs):
        params = self.params
        if len(args) > len(params):
            raise TypeError("fedvm: %s takes %d arguments, %d given" % (self.name, len(params), len(args)))
        given = dict(zip([n for n, _ in params], args))
        for k, v in kwargs.items():
            if k not in [n for n, _ in params]:
                raise TypeError("fedvm: %s has no parameter '%s'" % (self.name, k))
            if k in given:
                raise TypeError("fedvm: %s: '%s' given twice" % (self.name, k))
            given[k] = v
        missing = [n for n, _ in params if n not in given]
        if missing:
            raise TypeError("fedvm: %s: missing %s" % (self.name, ", ".join(missing)))
        n = None
        for name, t in params:
            k = nclients(given[name], t)
            if k is not None and n is not None and k != n:
                raise TypeError("fedvm: %s: %s has %d clients, another argument %d" % (self.name, name, k, n))
            n = k if k is not None else n
        vals = (P(_lib.Value) * max(1, len(params)))()
        vm = ctypes.c_void_p()
        try:
            for i, (name, t) in enumerate(params):
                vals[i] = to_value(given[name], t, "%s: %s" % (self.name, name))
            st, d = _call_diag(lib.fvm_vm_new, self.program._p, None, ctypes.byref(vm))
            if st:
                raise RunError(diagnostics(d))
            if n is not None:
                st, d = _call_diag(lib.fvm_vm_set_clients, vm, n)
                if st:
                    raise RunError(diagnostics(d))
            out = P(_lib.Value)()
            st, d = _call_diag(lib.fvm_vm_call, vm, self._f, vals, ctypes.byref(out))
            if st:
                raise RunError(diagnostics(d))
            try:
                return from_value(out, self.result)
            finally:
                lib.fvm_value_release(out)
        finally:
            lib.fvm_vm_free(vm)
            for i in range(len(params)):
                lib.fvm_value_release(vals[i])


class Program:
    """A fedvm program (format/SPEC.md) held by the library.

    fv.load(path) or fv.loads(text) reads one; fv.Program(f, g, ..., doc=...) makes one of traced
    functions (fv.function) and every function they use, with their hyperparameters; keyword
    arguments name functions (fv.Program(initialize=init, next=round_fn)). check() compiles it
    (raising CheckError with every error); prog("fn", *args) or prog.fn(*args) calls a function
    with NumPy arrays in and out; save(path) writes it.
    """

    def __init__(self, *functions, doc=None, name="program.json", locations=True, hparams=(), **named):
        self.name = name
        self._extra_hparams = list(hparams)
        self._locations = locations
        self._sets = []
        self._doc = doc
        self._text = None
        self._p = None
        self._load_diag = None
        self._arena = _lib.Arena()
        self._checked = False
        self._funcs = {}
        self._traced = list(functions)
        for key, f in named.items():
            if f.name != key:
                if f._fn is not None:
                    raise ValueError("fedvm: %s is traced as '%s' already; name it '%s' with fv.function(name=...)"
                                     % (f, f.name, key))
                f.name = key
            self._traced.append(f)

    @classmethod
    def _from_source(cls, name, text, sets=()):
        self = cls(name=name)
        self._text = text
        self._sets = list(sets)
        self._ensure()
        return self

    def set(self, **values):
        """The same program with hyperparameters set (fedvm run --set NAME=VALUE): each value a
        number, a list or a NumPy array of the hyperparameter's type."""
        import json

        from .tracer import _jsonable

        self._ensure()
        sets = self._sets + ["%s=%s" % (k, json.dumps(_jsonable(v))) for k, v in values.items()]
        return Program._from_source(self.name, self._text, sets)

    def ir(self):
        """The program as a document (a dict) as traced, before the library reads it; None for a
        loaded program."""
        if not self._traced:
            return None
        funcs, hps, seen = {}, {h.name: h for h in self._extra_hparams}, set()
        for f in self._traced:
            for g in f._closure():
                if id(g) in seen:
                    continue
                seen.add(id(g))
                for name, d in g._funcs_doc(self._locations).items():
                    if name in funcs:
                        raise ValueError("fedvm: two functions named '%s' in %s" % (name, self.name))
                    funcs[name] = d
                for hn, h in g._hparams().items():
                    if hn in hps and hps[hn] is not h and hps[hn].decl() != h.decl():
                        raise ValueError("fedvm: two hyperparameters named '%s' differ" % hn)
                    hps[hn] = h
        doc = {"fedvm": 1}
        if self._doc:
            doc["doc"] = self._doc
        if hps:
            doc["hparams"] = {h.name: h.decl() for h in sorted(hps.values(), key=lambda h: h.order)}
        doc["functions"] = funcs
        return doc

    def _ensure(self):
        if self._p is not None:
            return
        if self._traced:
            import json

            self._text = json.dumps(self.ir(), indent=1)
        p = P(_lib.Program)()
        st, d = self._load(ctypes.byref(p))
        if not p:
            raise CheckError(diagnostics(d))
        self._p = p
        self._load_status, self._load_diag = st, d

    def _load(self, out):
        d = _lib.Diag()
        text = self._text.encode("utf-8") if self._text is not None else None
        opts = None
        if self._sets:
            self._set_bytes = (ctypes.c_char_p * len(self._sets))(*[x.encode("utf-8") for x in self._sets])
            opts = _lib.LoadOpts(False, self._set_bytes, len(self._sets), None, 0)
            opts = ctypes.byref(opts)
        st = lib.fvm_program_load_opts(
            self.name.encode("utf-8"), text, len(text) if text is not None else 0, None, opts, out, ctypes.byref(d)
        )
        return st, d

    def __del__(self):
        if getattr(self, "_p", None):
            lib.fvm_program_free(self._p)
            self._p = None
            lib.fvm_arena_free(ctypes.byref(self._arena))
        if getattr(self, "_load_diag", None) is not None:
            lib.fvm_diag_clear(ctypes.byref(self._load_diag))

    def check(self):
        """Checks the program and runs the passes after checking (fedvm check): returns self, or raises
        CheckError listing every error the loader and the checker found, in source order."""
        self._ensure()
        if self._checked:
            return self
        d = self._load_diag
        st = lib.fvm_compile(self._p, ctypes.byref(d))
        if st or self._load_status or d.n:
            self._load_status = st or self._load_status
            diags = diagnostics(d)
            self._errors = diags
            raise CheckError(diags)
        self._checked = True
        return self

    @property
    def functions(self):
        """The names of the program's functions, in program order."""
        self._ensure()
        q = self._p.contents
        return [_s(q.funcs[i].contents.name) for i in range(q.nfuncs)]

    def function(self, name):
        """The Function name (the program is checked first)."""
        self.check()
        if name not in self._funcs:
            f = lib.fvm_program_func(self._p, name.encode("utf-8"))
            if not f:
                raise KeyError("fedvm: %s has no function '%s'" % (self.name, name))
            self._funcs[name] = Function(self, f)
        return self._funcs[name]

    def __call__(self, fn, *args, **kwargs):
        """Calls function fn with args (NumPy arrays, dicts, lists: see fedvm._values)."""
        return self.function(fn)(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.function(name)
        except KeyError:
            raise AttributeError("fedvm: %s has no function '%s'" % (self.name, name)) from None

    def to_text(self, yaml=False):
        """The program as canonical JSON (or YAML) text: the file as written when it has no includes;
        else the whole program as one module (what it includes inlined)."""
        buf, n = ctypes.c_void_p(), ctypes.c_size_t()
        self._ensure()
        if self._p.contents.nmodules == 1:
            st, d = _call_diag(lib.fvm_module_write, self._p.contents.root, yaml, ctypes.byref(buf), ctypes.byref(n))
            if st:
                raise FedvmError(diagnostics(d))
            return _lib.take_string(buf.value, n.value)
        self.check()  # the writer writes what the checker decoded
        a = _lib.Arena()
        try:
            doc = lib.fvm_program_to_doc(ctypes.byref(a), self._p, None)
            if not doc:
                raise MemoryError("fedvm: out of memory")
            write = lib.fvm_yaml_write if yaml else lib.fvm_json_write
            st, d = _call_diag(write, doc, ctypes.byref(buf), ctypes.byref(n))
            if st:
                raise FedvmError(diagnostics(d))
            return _lib.take_string(buf.value, n.value)
        finally:
            lib.fvm_arena_free(ctypes.byref(a))

    def save(self, path):
        """Writes the program to path (YAML for .yaml/.yml, else JSON) for fedvm check, run and fedplan."""
        text = self.to_text(yaml=str(path).endswith((".yaml", ".yml")))
        tmp = "%s.tmp%d" % (path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
        return path

    def __repr__(self):
        return "<fedvm program %s>" % self.name


def load(path):
    """The program in the file path (JSON or YAML, with its includes). Raises CheckError when it cannot be
    read or parsed; its other errors come from check() (called by the first function call)."""
    return Program._from_source(os.fspath(path), None)


def loads(text, name="<string>.json"):
    """The program in text; name names it in errors and says JSON or YAML by its extension (includes
    resolve relative to it)."""
    return Program._from_source(name, text)
