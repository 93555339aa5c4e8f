"""docs/TUTORIAL.md runs as shown: its Python blocks in order in one namespace, its sh blocks as
transcripts (each "$ " line a command, the lines after it its output), in a temporary directory,
on Fashion-MNIST imported there as make demo imports it; with 3 rounds instead of 20."""

import os
import re
import subprocess

import pytest

import conftest

DOC = os.path.join(conftest.ROOT, "docs", "TUTORIAL.md")
ROUNDS = 3


def blocks(text):
    return re.findall(r"^```(python|sh)\n(.*?)^```$", text, re.S | re.M)


def adapt(code, data, out):
    code = code.replace("build/demo/fashion_mnist.sqlite", data).replace("build/demo/", out + "/")
    code = code.replace("rounds=20", "rounds=%d" % ROUNDS)
    code = code.replace("--rounds 20", "--rounds %d" % ROUNDS).replace("round-000020", "round-%06d" % ROUNDS)
    return code.replace("bin/fedvm", conftest.FEDVM)


@pytest.fixture(scope="module")
def fashion_mnist(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fm") / "fashion_mnist.sqlite")
    r = subprocess.run([conftest.FEDVM, "data", "import", "fashion-mnist", "--clients", "100", "--partition", "iid",
                        "--seed", "0", "-o", path], capture_output=True, text=True)
    if r.returncode != 0 and "dataset-fashion-mnist" in r.stderr:
        pytest.skip("Fashion-MNIST is not installed (make deps installs dataset-fashion-mnist)")
    assert r.returncode == 0, r.stderr
    return path


def test_the_tutorial_runs_as_shown(tmp_path, fashion_mnist, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = blocks(open(DOC).read())
    assert [k for k, _ in found].count("python") >= 5 and any("fedvm plot" in b for _, b in found)
    ns = {"__name__": "tutorial"}
    for kind, text in found:
        text = adapt(text, fashion_mnist, str(tmp_path))
        if kind == "python":
            exec(compile(text, DOC, "exec"), ns)
            continue
        cmd, want = None, []
        for line in text.splitlines() + ["$ "]:
            if line.startswith("$ "):
                if cmd and cmd != "make demo":
                    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
                    assert r.returncode == 0, (cmd, r.stderr)
                    assert r.stdout.splitlines() == want, cmd
                cmd, want = line[2:], []
            else:
                want.append(line)
    m = ns["m"]
    acc = [r["eval"]["accuracy"] for r in m]
    assert len(acc) == ROUNDS and acc[-1] > acc[0] and acc[-1] >= 0.65, acc  # 10 classes: chance is 0.1
    assert os.path.getsize("fedavg_fm.svg") > 1000 and os.path.exists("fedavg_fm.json")
    assert sorted(os.listdir(str(tmp_path))) == ["fedavg_fm", "fedavg_fm.json", "fedavg_fm.jsonl", "fedavg_fm.svg",
                                                 "fedavg_fm_cli"]
