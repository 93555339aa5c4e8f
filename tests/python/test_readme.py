"""README.md's Python example ("Using it from Python") runs as written and prints what fedvm check reports."""

import contextlib
import io
import os
import re
import subprocess

import conftest

ROOT = conftest.ROOT


def test_readme_python_example(tmp_path):
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    sec = text[text.index("## Using it from Python") :]
    code = re.search(r"```python\n(.*?)```", sec, re.S).group(1)
    for d in ("programs", "docs"):
        os.symlink(os.path.join(ROOT, d), tmp_path / d)
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    lines = out.getvalue().splitlines()
    assert lines[0] == "(784, 200)"
    r = subprocess.run(
        [os.path.join(conftest.FEDVM_BIN, "fedvm"), "check", "docs/examples/broken.json"],
        cwd=ROOT, capture_output=True, text=True,
    )
    want = [m.group(1) for m in re.finditer(r"^docs/examples/broken.json:(\d+):\d+: ", r.stderr, re.M)]
    assert len(want) >= 2
    assert [l.split()[0] for l in lines[1:-1]] == want
    assert lines[-1] == "[5. 4. 5.]"  # (1 + 9) / 2, (4 + 4) / 2, (9 + 1) / 2
    saved = subprocess.run(
        [os.path.join(conftest.FEDVM_BIN, "fedvm"), "check", str(tmp_path / "fedavg_2nn_whole.json")],
        capture_output=True, text=True,
    )
    assert saved.returncode == 0, saved.stderr
    squares = subprocess.run(
        [os.path.join(conftest.FEDVM_BIN, "fedvm"), "run", str(tmp_path / "squares.json"), "--fn", "mean_of_squares",
         "--arg", "x=[[1, 2, 3], [3, 2, 1]]"], capture_output=True, text=True,
    )
    assert squares.returncode == 0 and squares.stdout.split() == ["[5.0,", "4.0,", "5.0]"], squares.stdout + squares.stderr
