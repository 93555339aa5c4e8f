"""Closures in traced functions: Python numbers and NumPy arrays a function uses become literals and
constants; values of the enclosing traced function that a Python function given to an op uses
become extra parameters of it and extra arguments of the op. Results against NumPy."""

import inspect
import os
import subprocess

import numpy as np
import pytest

import conftest
import fedvm as fv

FEDVM = os.path.join(conftest.FEDVM_BIN, "fedvm")
rng = np.random.default_rng(11)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_python_numbers_and_numpy_arrays_are_constants():
    scale, shift = 0.5, f32(3)

    @fv.function
    def affine3(x: fv.f32[3]):
        return fv.fori(3, lambda i, s: s * scale + shift, x)

    x = f32(3)
    want = x
    for _ in range(3):
        want = want * np.float32(scale) + shift
    np.testing.assert_allclose(affine3(x), want, rtol=1e-6)
    shift[:] = 0  # the constant is the array as traced
    np.testing.assert_allclose(affine3(x), want, rtol=1e-6)


def test_loops_capture_values_of_the_enclosing_function(tmp_path):
    @fv.function
    def drift(x: fv.f32[4], w: fv.f32[4], xs: fv.Seq[fv.f32[4]]):
        b = w * 2.0  # captured by the loop body, w by the inner fold (two levels down)
        return fv.fori(3, lambda i, s: fv.sequence_reduce(xs, s, lambda acc, e: acc + e * w) - b, x)

    x, w = f32(4), f32(4)
    xs = [f32(4) for _ in range(5)]
    want = x.copy()
    for _ in range(3):
        for e in xs:
            want = want + e * w
        want = want - w * np.float32(2)
    got = drift(x, w, xs)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    prog = fv.Program(drift)
    ir = prog.ir()["functions"]
    loop = [i for i in ir["drift"]["body"] if i[1] == "fori"][0]
    assert loop[3:6] == ["x", "xs", "w"] and len(loop) == 7  # the state, then the captured values, as used
    assert list(ir[loop[2]["fn"]]["params"]) == ["i", "s", "xs", "w", loop[6]]  # loop[6]: b
    path = str(tmp_path / "drift.json")
    prog.save(path)
    r = subprocess.run([FEDVM, "check", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_branches_and_while_loops_share_their_captured_values():
    @fv.function
    def pick(p: fv.bool_, x: fv.f32[3], a: fv.f32[3], b: fv.f32[3]):
        return fv.cond(p, lambda v: v + a, lambda v: v * b, x)  # then uses a, else b: both take a and b

    x, a, b = f32(3), f32(3), f32(3)
    np.testing.assert_allclose(pick(True, x, a, b), x + a, rtol=1e-6)
    np.testing.assert_allclose(pick(False, x, a, b), x * b, rtol=1e-6)

    @fv.function
    def count_to(limit: fv.f32, step: fv.f32):
        return fv.while_loop(lambda s: s < limit, lambda s: s + step, fv.array(0.0), max_iter=1000)

    assert float(count_to(np.float32(10), np.float32(3))) == 12.0


def test_derivatives_of_closures():
    @fv.function
    def fit_grad(w: fv.f32[3], x: fv.f32[3], y: fv.f32[3]):
        return fv.grad(lambda v: fv.sum(fv.square(v * x - y)))(w)

    @fv.function
    def fit_vjp(w: fv.f32[3], x: fv.f32[3], ct: fv.f32[3]):
        return fv.vjp(lambda v: v * x)(w, ct)

    w, x, y, ct = f32(3), f32(3), f32(3), f32(3)
    np.testing.assert_allclose(fit_grad(w, x, y), 2 * (w * x - y) * x, rtol=1e-5)
    np.testing.assert_allclose(fit_vjp(w, x, ct), ct * x, rtol=1e-6)


def test_values_no_function_can_take_are_errors_at_their_line():
    @fv.function
    def federated(w: fv.Server[fv.f32[3]], data: fv.Clients[fv.f32[3]], lr: fv.f32):
        return fv.federated_mean(fv.federated_map(lambda d: d * lr, data))  # lr is not at the clients

    with pytest.raises(fv.TraceError, match="federated_map passes its function no other values") as e:
        federated.trace()
    line = inspect.getsourcelines(federated.py)[1] + 2
    assert ("test_closures.py:%d:" % line) in str(e.value)

    @fv.function
    def helper(x: fv.f32[3]):
        return x + held[0]  # a value of another traced function: not an enclosing one

    @fv.function
    def caller(x: fv.f32[3]):
        held.append(x * 2.0)
        return helper(x)

    held = []
    with pytest.raises(fv.TraceError, match="no free variables"):
        caller.trace()
