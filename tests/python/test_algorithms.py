"""The algorithm library in Python: FedAvg, FedProx, FedAdam, FedYogi, FedAdagrad, FedSGD and SCAFFOLD
written with the package run bit-identically to programs/*.json (checkpoints and the clients' stored
states compared byte for byte, metrics line for line)."""

import os
import sqlite3
import subprocess

import pytest

import conftest
import fedvm as fv
from fedvm import algorithms

FEDVM = conftest.FEDVM
ROOT = conftest.ROOT


def client_states(ck):
    """The clients' stored states of a checkpoint directory (format/client_store.h): (client, round, bytes)
    of each client's last round; None when the program keeps none."""
    path = os.path.join(ck, "client_states.sqlite")
    if not os.path.exists(path):
        return None
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT client, max(round), state FROM client_state GROUP BY client ORDER BY client").fetchall()
    finally:
        db.close()


@pytest.mark.parametrize("name", ["fedavg", "fedprox", "fedadam", "fedyogi", "fedadagrad", "fedsgd", "scaffold"])
def test_python_algorithm_is_the_json_program(tmp_path, syn, name):
    py_dir = tmp_path / "py"
    py_dir.mkdir()
    saved = str(py_dir / (name + ".json"))  # the base name checkpoints record, as fedvm run's
    getattr(algorithms, name + "_synthetic")().save(saved)
    chk = subprocess.run([FEDVM, "check", saved], capture_output=True, text=True)
    assert chk.returncode == 0, chk.stderr
    common = ["--data", "train=" + syn, "--data", "test=%s:test" % syn, "--rounds", "3", "--clients-per-round", "4",
              "--seed", "5", "--set", "epochs=3"]
    runs = {}
    for which, prog in (("json", os.path.join(ROOT, "programs", name + ".json")), ("python", saved)):
        ck, metrics = str(tmp_path / ("ck_" + which)), str(tmp_path / (which + ".jsonl"))
        r = subprocess.run([FEDVM, "run", prog] + common + ["--checkpoint-dir", ck, "--metrics", metrics],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        runs[which] = (ck, metrics)
    # in-process too
    m = fv.train(fv.load(saved), train=syn, test=syn + ":test", rounds=3, clients_per_round=4, seed=5,
                 set={"epochs": 3}, checkpoint_dir=str(tmp_path / "ck_train"), progress=False)
    last = "round-000003.safetensors"
    want = open(os.path.join(runs["json"][0], last), "rb").read()
    assert open(os.path.join(runs["python"][0], last), "rb").read() == want
    assert open(os.path.join(str(tmp_path / "ck_train"), last), "rb").read() == want
    states = client_states(runs["json"][0])
    assert (states is not None) == (name == "scaffold")
    if states is not None:  # every client of the 3 rounds, its control variate as of its last round
        assert len(states) >= 4 and any(s != states[0][2] for _, _, s in states)
        assert client_states(runs["python"][0]) == states
        assert client_states(str(tmp_path / "ck_train")) == states
    assert conftest.round_lines(runs["python"][1]) == conftest.round_lines(runs["json"][1])
    assert 0 < conftest.round_lines(runs["json"][1])[-1]["eval"]["accuracy"] <= 1
    rows = list(m) if isinstance(m, list) else m.to_dict("records")
    assert rows[-1]["eval"] == conftest.round_lines(runs["json"][1])[-1]["eval"]


def test_python_fedprox_stragglers_are_the_json_programs(tmp_path, syn):
    """With stragglers, some dropped: the device model written in Python gives programs/fedprox.json's bits."""
    saved = str(tmp_path / "fedprox.json")
    algorithms.fedprox_synthetic().save(saved)
    common = ["--data", "train=" + syn, "--rounds", "3", "--clients-per-round", "4", "--seed", "5",
              "--set", "epochs=3", "--set", "stragglers=0.5", "--set", "drop_stragglers=true"]
    outs = []
    for which, prog in (("json", os.path.join(ROOT, "programs", "fedprox.json")), ("python", saved)):
        ck, metrics = str(tmp_path / ("ck_" + which)), str(tmp_path / (which + ".jsonl"))
        r = subprocess.run([FEDVM, "run", prog] + common + ["--checkpoint-dir", ck, "--metrics", metrics],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs.append((open(os.path.join(ck, "round-000003.safetensors"), "rb").read(), conftest.round_lines(metrics)))
    assert outs[0] == outs[1]
    assert sum(r["train"]["stragglers"] for r in outs[0][1]) > 0
    assert [r["train"]["dropped"] for r in outs[0][1]] == [r["train"]["stragglers"] for r in outs[0][1]]
