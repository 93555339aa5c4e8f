"""Tracing Python functions into fedvm IR: operators, NumPy-like and NN ops, derivatives, loops and
conditionals, federated intrinsics, hyperparameters. Each traced function runs in-process and its
result is compared with NumPy computing the same thing."""

import json
import os
import subprocess
import inspect

import numpy as np
import pytest

import conftest
import fedvm as fv

FEDVM = os.path.join(conftest.FEDVM_BIN, "fedvm")
rng = np.random.default_rng(3)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_every_op_has_a_wrapper_made_from_the_table():
    names = {"and": "logical_and", "or": "logical_or", "not": "logical_not"}
    assert list(fv.lax.generated) == list(fv.op_table())
    for op, info in fv.op_table().items():
        w = fv.lax.generated[op]
        assert w.__name__ == names.get(op, op) and hasattr(fv.lax, w.__name__)
        assert ("The op %s " % op) in w.__doc__ and (", ".join(info.attrs) or "none") in w.__doc__
    assert fv.exp is fv.lax.generated["exp"] and fv.federated_zip is fv.lax.generated["federated_zip"]


def test_mlp_loss_against_numpy():
    @fv.function
    def loss(w1: fv.f32[4, 8], b1: fv.f32[8], w2: fv.f32[8, 3], x: fv.f32[5, 4], y: fv.i32[5]):
        h = fv.relu(x @ w1 + b1)
        logits = h @ w2
        return fv.mean(fv.softmax_cross_entropy(logits, y))

    w1, b1, w2, x = f32(4, 8), f32(8), f32(8, 3), f32(5, 4)
    y = np.array([0, 2, 1, 1, 0], np.int32)
    h = np.maximum(x @ w1 + b1, 0)
    z = h @ w2
    z = z - z.max(1, keepdims=True)
    want = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(5), y])
    np.testing.assert_allclose(loss(w1, b1, w2, x, y), want, rtol=1e-5)


def test_operators_indexing_and_numpy_like():
    @fv.function
    def ops(x: fv.f32[3, 4], s: fv.Struct(a=fv.f32, k=fv.i32[2])):
        return {
            "arith": (2 - x) * x / 4 + x ** 2 - (-x) % 3,
            "cmp": fv.where((x > 0) & ~(x >= 1), x, 0.0),
            "red": x.sum(axis=0) + fv.max(x, axis=0) - x.mean(),
            "idx": x[1] + x[:, 2:3].reshape(3)[0],
            "t": x.T @ x,
            "field": s.a * s["k"].astype(fv.f32)[1],
            "const": fv.array([1.0, 2.0, 3.0, 4.0]) + fv.zeros([4]),
        }

    x = f32(3, 4)
    got = ops(x, {"a": 1.5, "k": [2, 3]})
    np.testing.assert_allclose(got["arith"], (2 - x) * x / 4 + x ** 2 - np.mod(-x, 3), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["cmp"], np.where((x > 0) & ~(x >= 1), x, 0))
    np.testing.assert_allclose(got["red"], x.sum(0) + x.max(0) - x.mean(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["idx"], x[1] + x[0, 2], rtol=1e-6)
    np.testing.assert_allclose(got["t"], x.T @ x, rtol=1e-5, atol=1e-6)
    assert got["field"] == 4.5
    np.testing.assert_array_equal(got["const"], [1, 2, 3, 4])


def test_derivatives_against_analytic_ones():
    @fv.function
    def loss(w: fv.f32[3], x: fv.f32[3]):
        d = fv.sum(w * x) - 1.0
        return d * d

    @fv.function
    def derivs(w: fv.f32[3], x: fv.f32[3], t: fv.f32[3]):
        v, g = fv.value_and_grad(loss)(w, x)
        gx = fv.grad(loss, wrt=1)(w, x)
        val, tan = fv.jvp(lambda w, x: w * w * x)(w, x, t)
        ct = fv.vjp(lambda w: fv.exp(w))(w, t)
        return {"v": v, "g": g, "gx": gx, "g2": fv.grad(loss)(w, x), "tan": tan, "val": val, "ct": ct}

    w, x, t = (np.array(v, np.float32) for v in ([1, 2, 3], [1, 0, 1], [0.5, -1, 2]))
    got = derivs(w, x, t)
    d = w @ x - 1
    assert got["v"] == d * d
    np.testing.assert_allclose(got["g"], 2 * d * x)
    np.testing.assert_array_equal(got["g"], got["g2"])
    np.testing.assert_allclose(got["gx"], 2 * d * w)
    np.testing.assert_allclose(got["val"], w * w * x)
    np.testing.assert_allclose(got["tan"], 2 * w * x * t)
    np.testing.assert_allclose(got["ct"], np.exp(w) * t, rtol=1e-6)
    # the IR's own constructs, not derivatives computed in Python
    ir = fv.Program(derivs).ir()["functions"]["derivs"]["body"]
    assert [i[1] for i in ir][:3] == ["value_and_grad", "field", "field"]
    assert {"grad", "jvp", "vjp"} <= {i[1] for i in ir}


def test_has_aux():
    """grad and value_and_grad with has_aux (jax's): f returns (value, aux); the gradient is the
    value's alone, bit for bit the plain form's, and aux comes back beside it."""

    @fv.function
    def loss(w: fv.f32[3], x: fv.f32[3]):
        d = fv.sum(w * x) - 1.0
        return d * d

    @fv.function
    def loss_aux(w: fv.f32[3], x: fv.f32[3]):
        d = fv.sum(w * x) - 1.0
        return d * d, {"d": d, "wx": w * x}

    @fv.function
    def derivs(w: fv.f32[3], x: fv.f32[3]):
        (v, aux), g = fv.value_and_grad(loss_aux, has_aux=True)(w, x)
        ga, aux2 = fv.grad(loss_aux, has_aux=True)(w, x)
        return {"v": v, "d": aux["d"], "wx": aux2["wx"], "g": g, "ga": ga, "plain": fv.grad(loss)(w, x)}

    w, x = (np.array(v, np.float32) for v in ([1, 2, 3], [1, 0, 1]))
    got = derivs(w, x)
    d = w @ x - 1
    assert got["v"] == d * d and got["d"] == d
    np.testing.assert_allclose(got["wx"], w * x)
    np.testing.assert_allclose(got["g"], 2 * d * x)
    np.testing.assert_array_equal(got["g"], got["plain"])
    np.testing.assert_array_equal(got["ga"], got["plain"])
    body = fv.Program(derivs).ir()["functions"]["derivs"]["body"]
    assert [i[2].get("has_aux") for i in body if i[1] in ("grad", "value_and_grad")] == [True, True, None]


def test_loops_and_conditionals():
    @fv.function
    def loops(x: fv.f32[2], xs: fv.Seq[fv.f32[2]], p: fv.bool_):
        a = fv.fori(4, lambda i, s, x: s * 0.5 + x + fv.cast(i, dtype=fv.f32), x, x)
        b = fv.while_loop(lambda y: fv.sum(y) < 50.0, lambda y: y * 3.0 + 1.0, x, max_iter=100)
        c = fv.cond(p, lambda x, y: x + y, lambda x, y: x - y, x, a)
        d = fv.sequence_reduce(xs, x, lambda acc, e: fv.maximum(acc, e))
        return a, b, c, d

    x = np.array([1.0, 2.0], np.float32)
    xs = np.array([[0, 5], [3, 1], [2, 2]], np.float32)
    a = x.copy()
    for i in range(4):
        a = a * np.float32(0.5) + x + np.float32(i)
    b = x.copy()
    while b.sum() < 50:
        b = b * 3 + 1
    for p in (True, False):
        got = loops(x, xs, p)
        np.testing.assert_array_equal(got[0], a)
        np.testing.assert_array_equal(got[1], b)
        np.testing.assert_array_equal(got[2], x + a if p else x - a)
        np.testing.assert_array_equal(got[3], np.maximum(x, xs.max(0)))
    ops = [i[1] for i in fv.Program(loops).ir()["functions"]["loops"]["body"]]
    assert {"fori", "while", "cond", "sequence_reduce"} <= set(ops)


LR = fv.hparam("client_lr", fv.f32, 0.5, doc="the clients' step size")


@fv.function
def client_update(w: fv.f32[2], xs: fv.Seq[fv.f32[2]]):
    return fv.sequence_reduce(xs, w, lambda acc, x: acc - LR * (acc - x))


@fv.function
def round_(w: fv.Server[fv.f32[2]], data: fv.Clients[fv.Seq[fv.f32[2]]]):
    new = fv.map_fn(client_update, fv.broadcast(w), data)
    counts = fv.federated_map(lambda s: fv.sequence_length(s), data)
    return {"w": fv.reduce_mean(new), "n": fv.reduce_sum(counts), "w2": fv.federated_mean(new)}


def _reference(w, data, lr):
    out = []
    for xs in data:
        acc = w.copy()
        for x in xs:
            acc = acc - np.float32(lr) * (acc - x)
        out.append(acc)
    return np.mean(out, 0), sum(len(xs) for xs in data)


def test_federated_round_with_a_hyperparameter(tmp_path):
    prog = fv.Program(round_, doc="one round of a toy federated averaging")
    ir = prog.ir()
    assert ir["hparams"] == {"client_lr": {"doc": "the clients' step size", "type": "f32[]", "default": 0.5}}
    assert {"federated_broadcast", "federated_map", "federated_mean", "federated_sum"} <= {
        i[1] for i in ir["functions"]["round_"]["body"]}
    w = np.array([0.0, 1.0], np.float32)
    data = [np.array([[1, 1], [2, 2]], np.float32), np.array([[0, 4]], np.float32), np.zeros((0, 2), np.float32)]
    got = prog.round_(w, data)
    mean, n = _reference(w, data, 0.5)
    np.testing.assert_allclose(got["w"], mean, rtol=1e-6)
    np.testing.assert_array_equal(got["w"], got["w2"])
    assert got["n"] == n
    # the saved program runs under fedvm run with the same bits, and takes --set
    path = str(tmp_path / "round.json")
    prog.save(path)
    args = ["--fn", "round_", "--arg", "w=[0, 1]", "--arg", "data=%s" % json.dumps([d.tolist() for d in data])]
    r = subprocess.run([FEDVM, "run", path] + args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ref = json.loads(r.stdout)
    assert np.array_equal(np.array(ref["w"], np.float32), got["w"])
    r = subprocess.run([FEDVM, "run", path, "--set", "client_lr=0.25"] + args, capture_output=True, text=True)
    np.testing.assert_allclose(np.array(json.loads(r.stdout)["w"], np.float32), _reference(w, data, 0.25)[0], rtol=1e-6)


def test_tracing_mistakes_name_the_python_line():
    @fv.function
    def branchy(x: fv.f32[3]):
        if x[0] > 0:  # a traced value has no truth value
            return x
        return -x

    with pytest.raises(fv.TraceError, match="fv.cond") as e:
        branchy.trace()
    line = inspect.getsourcelines(branchy.py)[1] + 2
    assert ("test_trace.py:%d:" % line) in str(e.value)

    @fv.function
    def outer(x: fv.f32[3], data: fv.Clients[fv.f32[3]]):
        return fv.federated_map(lambda d: d + x, data)  # x is outer's, not at the clients

    with pytest.raises(fv.TraceError, match="federated_map passes its function no other values"):
        outer.trace()

    @fv.function
    def shapes(x: fv.f32[3], w: fv.f32[4, 2]):
        y = x @ w
        return fv.fori(2, lambda i, s: s * 2.0, y)  # the loop needs y's type: the checker says why not

    with pytest.raises(fv.TraceError) as e:
        shapes.trace()
    line = inspect.getsourcelines(shapes.py)[1] + 2
    assert ("test_trace.py:%d: " % line) in str(e.value) and "matmul" in str(e.value)


def test_traced_functions_compose_with_loaded_programs(tmp_path):
    @fv.function
    def double(x: fv.f64[2]):
        return x * 2

    @fv.function
    def quad(x: fv.f64[2]):
        return double(double(x))

    prog = fv.Program(quad)
    assert set(prog.functions) == {"quad", "double"}
    path = str(tmp_path / "quad.json")
    prog.save(path)
    again = fv.load(path)
    np.testing.assert_array_equal(again.quad(np.array([1.5, -2.0])), [6.0, -8.0])
    assert [i[1] for i in prog.ir()["functions"]["quad"]["body"]] == ["call", "call"]
