"""fv.train: training runs through the library's sessions, against 'fedvm run' bit for bit (checkpoint
bytes and metrics lines), for a program in programs/ and a traced one; results against NumPy."""

import json
import os
import subprocess

import numpy as np
import pytest

import conftest
import fedvm as fv

FEDVM = conftest.FEDVM
ROOT = conftest.ROOT


def test_fedavg_bit_identical_to_fedvm_run(tmp_path, syn):
    prog_path = os.path.join(ROOT, "programs", "fedavg.json")
    opts = dict(rounds=3, clients_per_round=5, seed=3)
    m = fv.train(fv.load(prog_path), train=syn, test=syn + ":test", checkpoint_dir=str(tmp_path / "py"),
                 metrics=str(tmp_path / "py.jsonl"), set={"server_lr": 0.5}, threads=2, **opts)
    r = subprocess.run([FEDVM, "run", prog_path, "--data", "train=" + syn, "--data", "test=%s:test" % syn,
                        "--rounds", "3", "--clients-per-round", "5", "--seed", "3", "--set", "server_lr=0.5",
                        "--checkpoint-dir", str(tmp_path / "cli"), "--metrics", str(tmp_path / "cli.jsonl")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for k in (1, 2, 3):
        name = "round-%06d.safetensors" % k
        assert open(tmp_path / "py" / name, "rb").read() == open(tmp_path / "cli" / name, "rb").read(), name
    assert conftest.round_lines(tmp_path / "py.jsonl") == conftest.round_lines(tmp_path / "cli.jsonl")
    # the returned metrics are the file's lines; the final state is the last checkpoint's
    rows = list(m) if isinstance(m, list) else m.to_dict("records")
    assert [row["round"] for row in rows] == [1, 2, 3]
    assert rows[2]["eval"] == conftest.round_lines(tmp_path / "cli.jsonl")[2]["eval"]
    header = json.loads(open(tmp_path / "py.jsonl").readline())
    assert header["run"]["hparams"]["server_lr"] == 0.5
    state = m.state if isinstance(m, list) else m.attrs["state"]
    assert set(state) == {"model", "opt"}


@fv.function
def initialize():
    return fv.federated_value(fv.zeros([2]), placement="SERVER")


@fv.function
def local_mean(w: fv.f32[2], xs: fv.Seq[fv.f32[2]]):
    return fv.sequence_reduce(xs, w, lambda acc, x: acc + 0.5 * (x - acc))


@fv.function(name="next")
def round_(state: fv.Server[fv.f32[2]], data: fv.Clients[fv.Seq[fv.f32[2]]]):
    new = fv.reduce_mean(fv.map_fn(local_mean, fv.broadcast(state), data))
    dist = fv.federated_apply(lambda p: fv.sum(fv.square(p[0] - p[1])), fv.federated_zip(new, state))
    return {"state": new, "metrics": dist}


def test_traced_program_bit_identical_to_fedvm_run(tmp_path):
    prog = fv.Program(initialize=initialize, next=round_)
    path = str(tmp_path / "toy.json")
    prog.save(path)
    data = [[[1.0, 2.0], [3.0, 0.0]], [[-1.0, 4.0]], [[2.0, 2.0], [0.0, 1.0], [5.0, 5.0]]]
    open(tmp_path / "data.json", "w").write(json.dumps(data))
    m = fv.train(fv.load(path), data=data, rounds=4, seed=1, checkpoint_dir=str(tmp_path / "py"), progress=False)
    r = subprocess.run([FEDVM, "run", path, "--arg", "data=@%s" % (tmp_path / "data.json"), "--rounds", "4",
                        "--seed", "1", "--checkpoint-dir", str(tmp_path / "cli")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    name = "round-000004.safetensors"
    assert open(tmp_path / "py" / name, "rb").read() == open(tmp_path / "cli" / name, "rb").read()
    # NumPy: four rounds of the clients' running means, averaged
    w = np.zeros(2, np.float32)
    for _ in range(4):
        news = []
        for xs in data:
            acc = w.copy()
            for x in np.array(xs, np.float32):
                acc = acc + np.float32(0.5) * (x - acc)
            news.append(acc)
        prev, w = w, np.mean(news, 0, dtype=np.float32)
    state = m.state if isinstance(m, list) else m.attrs["state"]
    np.testing.assert_allclose(state, w, rtol=1e-6)
    rows = list(m) if isinstance(m, list) else m.to_dict("records")
    np.testing.assert_allclose(rows[-1]["train"], np.sum((w - prev) ** 2), rtol=1e-5)


def test_errors_are_python_exceptions(syn):
    with pytest.raises(fv.FedvmError, match="nothing"):
        fv.train(fv.load(os.path.join(ROOT, "programs", "fedavg.json")), train=syn, nothing=1, rounds=1)
