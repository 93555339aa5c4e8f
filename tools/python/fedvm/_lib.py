"""Loading libfedvm.so with ctypes, and the C structs and functions the package uses.

The library is found, in order, at the path in the environment variable
FEDVM_LIB; beside the package in a source checkout (lib/libfedvm.so of the
repository, as 'make' builds it); in the prefix the package was installed
into by 'make install' (PREFIX/lib/libfedvm.so.0); and by the dynamic linker
(libfedvm.so.0 on its search path). The structs mirror the public headers'
(docs/API.md: readable, growing only at their end); only the members read
here are declared where a struct is read through a pointer.
"""

import ctypes
import ctypes.util
import os

__all__ = ["lib", "LibraryNotFound", "library_path"]


class LibraryNotFound(ImportError):
    """libfedvm.so could not be found or loaded (the message says where it was looked for)."""


c_int, c_int64, c_uint64, c_size_t, c_char_p, c_void_p, c_bool, c_double = (
    ctypes.c_int,
    ctypes.c_int64,
    ctypes.c_uint64,
    ctypes.c_size_t,
    ctypes.c_char_p,
    ctypes.c_void_p,
    ctypes.c_bool,
    ctypes.c_double,
)
P = ctypes.POINTER

MAX_RANK = 8  # FVM_MAX_RANK (vm/core/status.h)


class Loc(ctypes.Structure):
    _fields_ = [("file", c_char_p), ("line", c_int), ("col", c_int), ("ptr", c_char_p)]


class Error(ctypes.Structure):
    _fields_ = [("code", c_int), ("loc", Loc), ("msg", c_char_p)]


class Diag(ctypes.Structure):
    _fields_ = [("errs", P(Error)), ("n", c_int), ("cap", c_int), ("max_errors", c_int), ("dropped", c_int)]


class Arena(ctypes.Structure):
    _fields_ = [("head", c_void_p), ("used", c_size_t), ("total", c_size_t)]


class Dims(ctypes.Structure):
    _fields_ = [("rank", c_int), ("d", c_int64 * MAX_RANK)]


class Tensor(ctypes.Structure):
    _fields_ = [("dtype", c_int), ("shape", Dims), ("buf", c_void_p), ("offset", c_size_t)]


class Value(ctypes.Structure):
    pass


Value._fields_ = [
    ("refs", c_int),
    ("kind", c_int),
    ("t", Tensor),
    ("n", c_int64),
    ("items", P(P(Value))),
    ("cols", P(Value)),
    ("src", c_void_p),
]

# fvm_vkind
V_TENSOR, V_STRUCT, V_SEQ, V_CLIENTS = range(4)


class Func(ctypes.Structure):  # its members up to result_type
    _fields_ = [
        ("name", c_char_p),
        ("doc", c_char_p),
        ("nparams", c_int),
        ("param_names", P(c_char_p)),
        ("param_types", P(c_void_p)),
        ("param_type_text", P(c_char_p)),
        ("param_type_nodes", P(c_void_p)),
        ("param_locs", P(Loc)),
        ("param_name_locs", P(Loc)),
        ("ninstrs", c_int),
        ("instrs", c_void_p),
        ("result_name", c_char_p),
        ("result_loc", Loc),
        ("loc", Loc),
        ("module", c_void_p),
        ("result_type", c_void_p),
    ]


class Program(ctypes.Structure):  # its first members
    _fields_ = [
        ("arena", Arena),
        ("root", c_void_p),
        ("nmodules", c_int),
        ("modules", c_void_p),
        ("nfuncs", c_int),
        ("funcs", P(P(Func))),
    ]


class OpInfo(ctypes.Structure):
    _fields_ = [
        ("name", c_char_p),
        ("min_args", c_int),
        ("max_args", c_int),
        ("flags", ctypes.c_uint),
        ("attrs", c_uint64),
        ("required", c_uint64),
    ]


class AttrInfo(ctypes.Structure):  # its first members
    _fields_ = [("name", c_char_p), ("kind", c_int)]


class NamedText(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("text", c_char_p), ("kind", c_int)]


ARG_JSON, ARG_DATA = 0, 1


class LoadOpts(ctypes.Structure):
    _fields_ = [
        ("no_include", c_bool),
        ("sets", P(c_char_p)),
        ("nsets", c_int),
        ("include_dirs", P(c_char_p)),
        ("ninclude_dirs", c_int),
    ]


class SessionEvent(ctypes.Structure):
    _fields_ = [
        ("kind", c_int),
        ("round", c_int64),
        ("first", c_int64),
        ("last", c_int64),
        ("replaced", c_int),
        ("figures", c_void_p),
    ]


SESSION_RESUMED, SESSION_INIT, SESSION_ROUND = range(3)
PROGRESS_FN = ctypes.CFUNCTYPE(c_int, c_void_p, P(SessionEvent), P(Diag))


class SessionOpts(ctypes.Structure):
    _fields_ = [
        ("program", c_char_p),
        ("args", P(NamedText)),
        ("nargs", c_int),
        ("has_clients", c_bool),
        ("clients", c_int64),
        ("seed", c_uint64),
        ("rounds", c_int64),
        ("clients_per_round", c_int64),
        ("client_ids", c_char_p),
        ("eval_every", c_int64),
        ("metrics", c_char_p),
        ("checkpoint_dir", c_char_p),
        ("checkpoint_every", c_int64),
        ("resume", c_char_p),
        ("init", c_char_p),
        ("backend", c_void_p),
        ("kernels", c_void_p),
        ("max_steps", c_int64),
        ("time_limit", c_double),
        ("data_cache", c_void_p),
        ("progress", PROGRESS_FN),
        ("user", c_void_p),
    ]


class BackendI(ctypes.Structure):  # struct fvm_backend_i (vm/exec/backend.h)
    _fields_ = [("name", c_char_p), ("run", c_void_p), ("agree", c_void_p), ("free", ctypes.CFUNCTYPE(None, c_void_p))]


class Backend(ctypes.Structure):  # its first member
    _fields_ = [("iface", P(BackendI))]


def backend_free(b):
    """fvm_backend_free (an inline function of vm/exec/backend.h): the backend's own free."""
    if b:
        ctypes.cast(b, P(Backend)).contents.iface.contents.free(b)


# The C functions: name -> (restype, argtypes).
_FUNCS = {
    "fvm_status_name": (c_char_p, [c_int]),
    "fvm_diag_clear": (None, [P(Diag)]),
    "fvm_error_format": (c_void_p, [P(Error)]),
    "fvm_program_load_opts": (
        c_int,
        [c_char_p, c_char_p, c_size_t, c_char_p, c_void_p, P(P(Program)), P(Diag)],
    ),
    "fvm_program_free": (None, [P(Program)]),
    "fvm_program_func": (P(Func), [P(Program), c_char_p]),
    "fvm_compile": (c_int, [P(Program), P(Diag)]),
    "fvm_module_write": (c_int, [c_void_p, c_bool, P(c_void_p), P(c_size_t), P(Diag)]),
    "fvm_program_to_doc": (c_void_p, [P(Arena), P(Program), c_char_p]),
    "fvm_json_write": (c_int, [c_void_p, P(c_void_p), P(c_size_t), P(Diag)]),
    "fvm_yaml_write": (c_int, [c_void_p, P(c_void_p), P(c_size_t), P(Diag)]),
    "fvm_arena_free": (None, [P(Arena)]),
    "fvm_type_str": (c_char_p, [P(Arena), c_void_p, c_bool]),
    "fvm_vm_new": (c_int, [P(Program), c_void_p, P(c_void_p), P(Diag)]),
    "fvm_vm_free": (None, [c_void_p]),
    "fvm_vm_set_clients": (c_int, [c_void_p, c_int64, P(Diag)]),
    "fvm_vm_call": (c_int, [c_void_p, P(Func), P(P(Value)), P(P(Value)), P(Diag)]),
    "fvm_tensor_alloc": (c_int, [P(Tensor), c_int, P(Dims), P(Diag)]),
    "fvm_tensor_release": (None, [P(Tensor)]),
    "fvm_tensor_ptr": (c_void_p, [P(Tensor)]),
    "fvm_value_tensor_take": (P(Value), [P(Tensor)]),
    "fvm_value_list": (P(Value), [c_int, c_int64]),
    "fvm_value_seq_cols_take": (P(Value), [c_int64, P(Value)]),
    "fvm_value_release": (None, [P(Value)]),
    "fvm_clients_get": (c_int, [P(Value), c_int64, P(P(Value)), P(Diag)]),
    "fvm_seq_get": (c_int, [P(Value), c_int64, P(P(Value)), P(Diag)]),
    "fvm_op_info_at": (P(OpInfo), [c_int]),
    "fvm_attr_info_at": (P(AttrInfo), [c_int]),
    "fvm_dtype_name": (c_char_p, [c_int]),
    "fvm_session_new": (c_int, [P(Program), P(SessionOpts), P(c_void_p), P(Diag)]),
    "fvm_session_run": (c_int, [c_void_p, P(Diag)]),
    "fvm_session_state": (P(Value), [c_void_p, P(c_void_p)]),
    "fvm_session_metric": (c_double, [c_void_p, c_char_p]),
    "fvm_session_first": (c_int64, [c_void_p]),
    "fvm_session_free": (None, [c_void_p]),
    "fvm_metrics_line": (c_int, [c_void_p, P(c_void_p), P(c_size_t), P(Diag)]),
    "fvm_backend_seq": (c_void_p, []),
    "fvm_backend_threads": (c_void_p, [c_int]),
}


def _candidates():
    env = os.environ.get("FEDVM_LIB")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    up3 = os.path.normpath(os.path.join(here, "..", "..", ".."))
    return [
        os.path.join(up3, "lib", "libfedvm.so"),  # a checkout: tools/python/fedvm -> lib/
        os.path.join(up3, "libfedvm.so.0"),  # installed: PREFIX/lib/pythonX.Y/dist-packages/fedvm -> PREFIX/lib
    ], False


def _load():
    paths, from_env = _candidates()
    tried = []
    for path in paths:
        if not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    if not from_env:
        try:
            return ctypes.CDLL("libfedvm.so.0"), "libfedvm.so.0"
        except OSError as e:
            tried.append("libfedvm.so.0 through the dynamic linker (%s)" % e)
    raise LibraryNotFound(
        "fedvm: cannot load libfedvm.so; tried: "
        + "; ".join(tried)
        + ". Build it with 'make' in the fedvm checkout, install it with 'make install',"
        " or set FEDVM_LIB to the path of libfedvm.so"
    )


lib, library_path = _load()
for _name, (_res, _args) in _FUNCS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        raise LibraryNotFound(
            "fedvm: %s has no %s: it is older than this package (rebuild it)" % (library_path, _name)
        ) from None
    _f.restype, _f.argtypes = _res, _args

_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.free.argtypes = [c_void_p]
_libc.free.restype = None
free = _libc.free


def take_string(ptr, length=None):
    """The C string at ptr (malloc'd by the library) as Python text; frees it."""
    if not ptr:
        return None
    try:
        raw = ctypes.string_at(ptr, length) if length is not None else ctypes.string_at(ptr)
        return raw.decode("utf-8")
    finally:
        free(ptr)
