"""Training runs in-process through the library's training sessions (vm/runtime/session.h): what
'fedvm run' does with an iterative program, with the same metrics, checkpoints and bits."""

import ctypes
import json
import sys

import numpy as np

from . import _lib
from ._lib import lib
from ._values import from_value
from .program import FedvmError, Program, diagnostics
from .tracer import _jsonable
from .types import parse

__all__ = ["train", "Metrics"]


class Metrics(list):
    """The per-round metrics of a run: one dict per round as the metrics file has it
    ({"round": 1, "train": {...}, "eval": {...}}); .state is the final state (NumPy arrays)."""

    state = None


def _arg(name, v):
    if isinstance(v, str):
        return _lib.NamedText(name.encode(), v.encode(), _lib.ARG_DATA)
    if isinstance(v, dict) and set(v) == {"json"}:
        return _lib.NamedText(name.encode(), v["json"].encode(), _lib.ARG_JSON)
    return _lib.NamedText(name.encode(), json.dumps(_jsonable(v)).encode(), _lib.ARG_JSON)


def train(prog, rounds, clients_per_round=0, seed=0, set=None, metrics=None, checkpoint_dir=None,
          checkpoint_every=0, resume=None, init=None, eval_every=0, client_ids=None, clients=None,
          threads=None, progress=None, **data):
    """Runs rounds of an iterative program (initialize, next, optional evaluate), as 'fedvm run' does.

    data: next's and evaluate's parameters after the state, by name: a string is a dataset
    "FILE[:SPLIT]" (FedJAX or TFF SQLite: train="fm.sqlite", test="fm.sqlite:test"), anything else
    a value (NumPy arrays, lists, dicts). set: hyperparameters {name: value} (--set). metrics,
    checkpoint_dir, checkpoint_every, resume, init, eval_every, client_ids, clients: as fedvm run's
    options. threads: run clients on that many threads (the results are the same bits). progress:
    a line per round on stderr (default: when stderr is a terminal).

    Returns the per-round metrics: a Metrics list of dicts (a pandas DataFrame when pandas is
    installed, the final state in df.attrs["state"]); .state is the final state.
    """
    if not isinstance(prog, Program):
        raise TypeError("fedvm: train takes a program (fv.load, fv.Program), not %r" % (prog,))
    if set:
        prog = prog.set(**set)
    prog.check()
    args = [_arg(k, v) for k, v in data.items()]
    arr = (_lib.NamedText * max(1, len(args)))(*args)
    keep = [client_ids, metrics, checkpoint_dir, resume, init]
    enc = [x.encode() if isinstance(x, str) else None for x in keep]
    out = Metrics()
    show = sys.stderr.isatty() if progress is None else progress
    err = []

    def on_event(user, e, d):
        try:
            ev = e.contents
            if ev.kind == _lib.SESSION_ROUND:
                buf, n = ctypes.c_void_p(), ctypes.c_size_t()
                dd = _lib.Diag()
                if lib.fvm_metrics_line(ev.figures, ctypes.byref(buf), ctypes.byref(n), ctypes.byref(dd)):
                    return 9  # FVM_ERR_NOMEM
                line = json.loads(_lib.take_string(buf.value, n.value))
                out.append(line)
                if show:
                    tr = line.get("train", {})
                    parts = ["round %d/%d" % (ev.round, ev.last)]
                    if isinstance(tr, dict):
                        parts += ["%s %.4f" % (k, v) for k, v in tr.items() if isinstance(v, float)][:3]
                    if isinstance(line.get("eval"), dict):
                        parts += ["eval %s %.4f" % (k, v) for k, v in line["eval"].items() if isinstance(v, float)][:2]
                    sys.stderr.write("\r" + "  ".join(parts) + ("\n" if ev.round == ev.last else "\033[K"))
                    sys.stderr.flush()
            return 0
        except BaseException as x:  # an exception cannot cross C: stop the session, raise it after
            err.append(x)
            return 11  # FVM_ERR_USAGE

    cb = _lib.PROGRESS_FN(on_event)
    backend = lib.fvm_backend_threads(int(threads)) if threads else None
    o = _lib.SessionOpts(
        program=prog.name.encode(),
        args=arr,
        nargs=len(args),
        has_clients=clients is not None,
        clients=int(clients or 0),
        seed=int(seed),
        rounds=int(rounds),
        clients_per_round=int(clients_per_round),
        client_ids=enc[0],
        eval_every=int(eval_every),
        metrics=enc[1],
        checkpoint_dir=enc[2],
        checkpoint_every=int(checkpoint_every),
        resume=enc[3],
        init=enc[4],
        backend=backend,
        progress=cb,
    )
    s = ctypes.c_void_p()
    d = _lib.Diag()
    try:
        if lib.fvm_session_new(prog._p, ctypes.byref(o), ctypes.byref(s), ctypes.byref(d)) or \
                lib.fvm_session_run(s, ctypes.byref(d)):
            if err:
                lib.fvm_diag_clear(ctypes.byref(d))
                raise err[0]
            raise FedvmError(diagnostics(d))
        t = ctypes.c_void_p()
        v = lib.fvm_session_state(s, ctypes.byref(t))
        if v:
            out.state = from_value(v, parse(lib.fvm_type_str(ctypes.byref(prog._arena), t, False).decode()))
    finally:
        lib.fvm_session_free(s)
        if backend:
            _lib.backend_free(backend)
    try:
        import pandas as pd
    except ImportError:
        return out
    df = pd.json_normalize(list(out))
    df.attrs["state"] = out.state
    return df
