"""The package's first layer: loading the library, the op table, programs loaded, checked, written and
called in-process with NumPy arrays. Expected values come from NumPy."""

import json
import os
import subprocess

import numpy as np
import pytest

import conftest
import fedvm as fv

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
FEDVM = os.path.join(conftest.FEDVM_BIN, "fedvm")

SMALL = """{
  "fedvm": 1,
  "functions": {
    "affine": {
      "params": {"x": "f32[2,3]", "w": "f32[3,4]", "b": "f32[4]"},
      "body": [["y", "matmul", "x", "w"], ["z", "add", "y", "b"], ["r", "relu", "z"]],
      "result": "r"
    },
    "pair": {
      "params": {"p": "<a=i64[],b=f64[3]>"},
      "body": [["a", "field", {"name": "a"}, "p"], ["b", "field", {"name": "b"}, "p"],
               ["s", "sum", "b"], ["t", "struct", {"names": ["total", "count"]}, "s", "a"]],
      "result": "t"
    },
    "mean": {
      "params": {"v": "{f32[2]}@CLIENTS"},
      "body": [["m", "federated_mean", "v"]],
      "result": "m"
    },
    "total": {
      "params": {"xs": "f64[]*"},
      "body": [["s", "sequence_sum", "xs"]],
      "result": "s"
    }
  }
}
"""


def test_library_found_beside_the_package():
    assert os.path.samefile(fv.library_path, os.path.join(ROOT, "lib", "libfedvm.so"))


def test_library_missing_is_a_clear_error(tmp_path):
    env = dict(os.environ, FEDVM_LIB=str(tmp_path / "nowhere.so"), PYTHONPATH=os.path.join(ROOT, "tools", "python"))
    r = subprocess.run(["/usr/bin/python3", "-c", "import fedvm"], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert "cannot load libfedvm.so" in r.stderr and "nowhere.so" in r.stderr and "FEDVM_LIB" in r.stderr


def test_op_table_is_the_library_s():
    ops = fv.op_table()
    # every op SPEC documents is there with its arity and attributes, read from the library
    spec = open(os.path.join(ROOT, "format", "SPEC.md"), encoding="utf-8").read()
    assert len(ops) > 100
    for name in ("matmul", "federated_mean", "grad", "fori", "const", "conv2d"):
        assert name in ops and ("`%s`" % name) in spec
    assert (ops["matmul"].min_args, ops["matmul"].max_args) == (2, 2)
    assert "transpose_a" in ops["matmul"].attrs
    assert ops["const"].required == ["value"]
    assert "federated" in ops["federated_mean"].flags and "lift" in ops["add"].flags
    assert fv.attr_table()["fn"] == "func"


def test_call_with_numpy():
    p = fv.loads(SMALL, "small.json").check()
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (3, 4), (4,)))
    got = p("affine", x, w, b)
    want = np.maximum(x @ w + b, 0)
    assert got.dtype == np.float32 and got.shape == (2, 4)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # by attribute and keyword, Python lists cast exactly to the parameter's dtype
    assert np.array_equal(p.affine(x=x.tolist(), w=w, b=b), got)


def test_structs_sequences_and_clients():
    p = fv.loads(SMALL, "small.json")
    assert p.pair({"a": 3, "b": [0.5, 1.5, 2.0]}) == {"total": 4.0, "count": 3}
    assert p.pair((3, np.array([1.0, 2, 3]))) == {"total": 6.0, "count": 3}
    members = [np.array([1, 2], np.float32), np.array([3, 5], np.float32), np.array([2, 2], np.float32)]
    np.testing.assert_array_equal(p.mean(members), np.array([2, 3], np.float32))
    assert p.total([1.0, 2.5, 4.0]) == 7.5  # a list of elements
    assert p.total(np.arange(5.0)) == 10.0  # by columns


def test_bad_arguments_are_python_errors():
    p = fv.loads(SMALL, "small.json")
    with pytest.raises(TypeError, match=r"affine: x: expected f32\[2,3\], found shape \[3,2\]"):
        p.affine(np.zeros((3, 2)), np.zeros((3, 4)), np.zeros(4))
    with pytest.raises(TypeError, match="missing b"):
        p.affine(np.zeros((2, 3)), np.zeros((3, 4)))
    with pytest.raises(TypeError, match="cannot hold"):
        p.pair({"a": 2.5, "b": [0, 0, 0]})
    with pytest.raises(AttributeError):
        p.nothing


def test_check_error_lists_every_diagnostic(tmp_path):
    bad = json.loads(SMALL)
    body = bad["functions"]["affine"]["body"]
    body[0] = ["y", "matmul", "w", "x"]  # f32[3,4] @ f32[2,3]
    bad["functions"]["mean"]["body"][0] = ["m", "federated_mean", "nothing"]
    p = fv.loads(json.dumps(bad, indent=1), "bad.json")
    with pytest.raises(fv.CheckError) as e:
        p.check()
    ds = e.value.diagnostics
    assert len(ds) == 2
    assert ds[0].code == "type" and ds[0].file == "bad.json" and ds[0].pointer == "/functions/affine/body/0"
    assert ds[1].code == "name" and "nothing" in ds[1].message and ds[1].pointer.startswith("/functions/mean/body/0")
    assert ds[0].line > 0 and ds[1].line > ds[0].line
    # the message lists them at their places, as 'fedvm check' prints them
    (tmp_path / "bad.json").write_text(json.dumps(bad, indent=1))
    r = subprocess.run([FEDVM, "check", "bad.json"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode != 0
    for d in ds:
        assert str(d).startswith("bad.json:%d:%d: " % (d.line, d.col))
        assert str(d) in r.stderr
        assert str(d) in str(e.value)


def test_unreadable_programs():
    with pytest.raises(fv.CheckError, match="broken.json:1:2: invalid JSON") as e:
        fv.loads("{", "broken.json")
    assert e.value.diagnostics[0].code == "syntax"
    with pytest.raises(fv.CheckError) as e:
        fv.load("/nonexistent/p.json")
    assert e.value.diagnostics[0].code == "io"


def test_save_is_what_fedvm_takes(tmp_path):
    p = fv.load(os.path.join(ROOT, "programs", "fedavg_2nn.json")).check()
    out = str(tmp_path / "algo.json")
    p.save(out)
    r = subprocess.run([FEDVM, "check", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # self-contained (its includes inlined), the same functions
    doc = json.load(open(out))
    assert "include" not in doc
    assert set(p.functions) <= set(doc["functions"])
    # a file without includes is written as 'fedvm fmt' writes it
    path = os.path.join(ROOT, "programs", "histogram.json")
    fmt = subprocess.run([FEDVM, "fmt", path], capture_output=True, text=True)
    assert fmt.returncode == 0 and fv.load(path).to_text() == fmt.stdout
    small = fv.loads(SMALL, "small.json")
    (tmp_path / "small.json").write_text(SMALL)
    fmt = subprocess.run([FEDVM, "fmt", str(tmp_path / "small.json")], capture_output=True, text=True)
    assert fmt.returncode == 0 and small.to_text() == fmt.stdout
    small.save(str(tmp_path / "small.yaml"))
    assert fv.load(str(tmp_path / "small.yaml")).pair({"a": 1, "b": [1, 1, 1]}) == {"total": 3.0, "count": 1}


def test_calls_match_fedvm_run(tmp_path):
    """The initial model of fedavg_2nn, in-process and through 'fedvm run', bit for bit."""
    path = os.path.join(ROOT, "programs", "fedavg_2nn.json")
    p = fv.load(path)
    key = np.array([7, 11], np.uint32)
    state = p.initialize(key)
    r = subprocess.run([FEDVM, "run", path, "--fn", "initialize", "--arg", "key=[7, 11]"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ref = json.loads(r.stdout)
    for k, v in state["model"].items():
        assert np.array_equal(v.reshape(-1), np.asarray(ref["model"][k], np.float32).reshape(-1)), k
    w1 = state["model"]["w1"]
    assert w1.shape == (784, 200) and w1.dtype == np.float32
    assert 0 < np.abs(w1).max() <= np.sqrt(6 / (784 + 200))  # Glorot-uniform's bound


def _numpy_client_totals(model, pixels, labels, order, epochs, batch, lr):
    """The totals of fedavg_2nn's local training, written from its definition in NumPy: E epochs
    of SGD on the mean cross-entropy in batches of B in the given order of each epoch; each
    batch's summed cross-entropy and right answers under the model its step starts from."""
    w = [np.asarray(model[k], np.float32).copy() for k in ("w1", "b1", "w2", "b2", "w3", "b3")]
    x_all = (pixels.astype(np.float32) / np.float32(255)).reshape(-1, 784)
    loss_sum, correct, seen = 0.0, 0, 0
    for e in range(epochs):
        for i in range(0, len(labels), batch):
            idx = order[e][i:i + batch]
            x, y = x_all[idx], labels[idx]
            h1 = np.maximum(x @ w[0] + w[1], 0)
            h2 = np.maximum(h1 @ w[2] + w[3], 0)
            z = h2 @ w[4] + w[5]
            s = z - z.max(axis=1, keepdims=True)
            p = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
            ce = np.log(np.exp(s).sum(axis=1)) - s[np.arange(len(y)), y]
            loss_sum += float(ce.astype(np.float64).sum())
            correct += int((z.argmax(axis=1) == y).sum())
            seen += len(y)
            dz = p
            dz[np.arange(len(y)), y] -= 1
            dz /= np.float32(len(y))
            d2 = (dz @ w[4].T) * (h2 > 0)
            d1 = (d2 @ w[2].T) * (h1 > 0)
            grads = [x.T @ d1, d1.sum(0), h1.T @ d2, d2.sum(0), h2.T @ dz, dz.sum(0)]
            for p_, g in zip(w, grads):
                p_ -= np.float32(lr) * g
    return loss_sum, correct, seen, w


def test_fedavg_2nn_metrics_from_the_training_pass():
    """fedavg_2nn's training metrics come from the training pass (grad with has_aux): a client's
    totals are those of a NumPy reference running the same SGD (from the same model, on the same
    batches: fedvm's shuffle of each epoch) and summing each batch's cross-entropy and right
    answers under the model its step starts from, two epochs, a last partial batch."""
    p = fv.load(os.path.join(ROOT, "programs", "fedavg_2nn.json")).set(epochs=2)
    model = p.initialize(np.array([7, 11], np.uint32))["model"]
    rng = np.random.default_rng(0)
    n = 53
    pixels = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n).astype(np.int32)
    key = np.array([3, 5], np.uint32)

    orders = conftest.epoch_orders(n, key, 2)
    assert sorted(orders[0]) == list(range(n)) and list(orders[0]) != list(orders[1])
    out = p.client_update(model, {"pixels": pixels, "label": labels}, key)
    loss_sum, correct, seen, trained = _numpy_client_totals(model, pixels, labels, orders, 2, 10, 0.05)
    t = out["totals"]
    assert float(t["examples"]) == seen == 2 * n and float(out["weight"]) == n
    assert float(t["correct"]) == correct
    assert abs(float(t["loss"]) - loss_sum) <= 1e-5 * loss_sum
    # the pseudo-gradient is the plain SGD's: x_t - x_k
    for k, w in zip(("w1", "b1", "w2", "b2", "w3", "b3"), trained):
        np.testing.assert_allclose(np.asarray(model[k]) - np.asarray(out["pseudo_grad"][k]), w, rtol=0, atol=2e-6)
