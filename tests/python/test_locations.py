"""Errors point at Python lines: each traced instruction carries its file:line (the member "loc" of
its attributes, format/SPEC.md "Source locations"), and the checker names it in its errors."""

import inspect
import json
import os
import subprocess

import pytest

import conftest
import fedvm as fv

FEDVM = os.path.join(conftest.FEDVM_BIN, "fedvm")
HERE = os.path.abspath(__file__)


def _line(f, offset):
    return inspect.getsourcelines(f.py)[1] + offset


@fv.function
def bad(x: fv.f32[3], w: fv.f32[4, 2]):
    h = fv.tanh(x)
    y = h @ w  # [3] @ [4,2]: a shape error
    z = fv.log(fv.cast(x, dtype=fv.i32))  # log of an integer: a dtype error
    return fv.struct(y, z)


def test_a_shape_error_names_the_python_line():
    with pytest.raises(fv.CheckError) as e:
        fv.Program(bad).check()
    ds = e.value.diagnostics
    assert [d.py_line for d in ds] == [_line(bad, 3), _line(bad, 4)]
    assert all(os.path.samefile(d.py_file, HERE) for d in ds)
    assert "matmul" in ds[0].message and "(from" not in ds[0].message
    # the exception lists each at its Python line, with the IR position after it
    text = str(e.value)
    for d in ds:
        assert "%s:%d: %s (IR: program.json:" % (d.py_file, d.py_line, d.message) in text
    assert ds[0].pointer.startswith("/functions/bad/body/1")


def test_saved_programs_keep_their_locations(tmp_path):
    path = str(tmp_path / "bad.json")
    prog = fv.Program(bad)
    text = json.dumps(prog.ir())
    open(path, "w").write(text)
    r = subprocess.run([FEDVM, "check", path], capture_output=True, text=True)
    assert r.returncode == 1
    errs = r.stderr.strip().splitlines()
    assert len(errs) == 2
    assert errs[0].startswith(path + ":") and errs[0].endswith("(from %s:%d)" % (HERE, _line(bad, 3)))
    assert errs[1].endswith("(from %s:%d)" % (HERE, _line(bad, 4)))
    # the canonical writer keeps them
    @fv.function
    def good(x: fv.f32[3]):
        return fv.tanh(x) * 2.0

    good_path = str(tmp_path / "good.json")
    fv.Program(good).save(good_path)
    fmt = subprocess.run([FEDVM, "fmt", good_path], capture_output=True, text=True)
    assert fmt.returncode == 0
    body = json.loads(fmt.stdout)["functions"]["good"]["body"]
    assert [i[2]["loc"] for i in body] == ["%s:%d" % (HERE, _line(good, 2))] * 2
    # and without them
    assert "loc" not in json.dumps(fv.Program(good, locations=False).ir())


def test_a_malformed_location_is_an_error():
    text = json.dumps({"fedvm": 1, "functions": {"f": {"params": {"x": "f32[]"}, "body": [
        ["y", "neg", {"loc": "algo.py"}, "x"], ["z", "neg", {"loc": 12}, "y"], ["w", "neg", {"loc": "a:b:7"}, "z"]],
        "result": "w"}}})
    with pytest.raises(fv.CheckError) as e:
        fv.loads(text, "locs.json").check()
    ds = e.value.diagnostics
    assert [d.pointer for d in ds] == ["/functions/f/body/0/2/loc", "/functions/f/body/1/2/loc"]
    assert all("'loc' must be a string FILE:LINE" in d.message for d in ds)


def test_the_schema_takes_locations():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.load(open(os.path.join(conftest.ROOT, "format", "fedvm.schema.json")))
    ir = fv.Program(bad).ir()
    jsonschema.validate(ir, schema)
    ir["functions"]["bad"]["body"][0][2]["loc"] = "no line"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(ir, schema)
