#!/usr/bin/env python3
"""make_grad_program.py - programs whose derivative once grew without bound (tests/hostile/grad_*.case).

usage: make_grad_program.py tree DEPTH   f0..fDEPTH, each fk calling f(k-1) twice; main takes grad of fDEPTH
       make_grad_program.py chain N      f, a chain of N tanh; main takes grad of f

The grad instruction is always on line 2, at /functions/main/body/0."""
import json
import sys


def fn(params, body, result):
    return {"params": params, "body": body, "result": result}


def main():
    kind, n = sys.argv[1], int(sys.argv[2])
    fs = {}
    if kind == "tree":
        top = "f%d" % n
        fs["f0"] = fn({"x": "f64[]"}, [["t", "tanh", "x"], ["y", "add", "t", "x"]], "y")
        for k in range(1, n + 1):
            fs["f%d" % k] = fn({"x": "f64[]"}, [["a", "call", {"fn": "f%d" % (k - 1)}, "x"],
                                                ["b", "call", {"fn": "f%d" % (k - 1)}, "a"],
                                                ["y", "add", "a", "b"]], "y")
    elif kind == "chain":
        top = "f"
        fs["f"] = fn({"x": "f64[]"}, [["y0", "tanh", "x"]] + [["y%d" % i, "tanh", "y%d" % (i - 1)] for i in range(1, n)],
                     "y%d" % (n - 1))
    else:
        sys.exit("usage: make_grad_program.py tree DEPTH | chain N")
    out = sys.stdout
    out.write('{"fedvm": 1, "functions": {\n')
    out.write('"main": %s,\n' % json.dumps(fn({"x": "f64[]"}, [["g", "grad", {"fn": top}, "x"]], "g")))
    out.write(",\n".join("%s: %s" % (json.dumps(k), json.dumps(v)) for k, v in fs.items()))
    out.write("\n}}\n")


main()
