#!/usr/bin/env python3
"""check_format_docs.py - keeps format/SPEC.md and format/fedvm.schema.json in step with the code.

Checks, from the repository root:
  (a) format/fedvm.schema.json is exactly what format/gen_schema.py generates
      from vm/ops.def and vm/attrs.def;
  (b) the schema is a valid draft 2020-12 schema and every program under
      programs/ (every *.json outside programs/data/, which holds argument
      values) validates against it;
  (c) invalid documents (unknown op, unknown top-level member, an attribute
      the op does not take, a wrong version, ...) are rejected by the schema,
      and by `fedvm check` too, while a valid one passes both;
  (d) SPEC.md has one `### name` heading per op of vm/ops.def, in the order
      and under the group headings (`## Ops: <group>`) of ops.def, no op
      heading for an op that does not exist, a row of its attribute table for
      every attribute of vm/attrs.def, and in each op's section a mention of
      each attribute the op takes and one paragraph starting "**Gradient.**"
      that agrees with the op's vjp column: "None" first for vjp_none,
      "Not differentiable" first for vjp_unsupported, and neither for an op
      with a rule of its own;
  (e) every ```json (and ```yaml) block of SPEC.md that is a complete program
      (has "fedvm") passes `fedvm check`, or fails it when the block is marked
      <!-- expect-error -->; a block marked <!-- file: PATH --> is written
      under that name (so examples can include each other); instruction
      fragments in other json blocks name real ops and allowed attributes;
      a block marked <!-- run --> is a transcript: each `$ fedvm ...` line is
      run (in the directory of the examples, where programs/ is the
      repository's) and must print exactly the lines that follow it.

Usage: python3 tests/check_format_docs.py [--fedvm PATH]   (default bin/fedvm)
Exit status 0 when everything holds, 1 otherwise (every failure is listed).
"""
import argparse
import copy
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "format", "SPEC.md")
SCHEMA = os.path.join(ROOT, "format", "fedvm.schema.json")
GEN = os.path.join(ROOT, "format", "gen_schema.py")

sys.path.insert(0, os.path.join(ROOT, "format"))
import gen_schema  # noqa: E402  (the same parser of ops.def/attrs.def the schema comes from)

failures = []


def fail(check, msg):
    failures.append(f"[{check}] {msg}")


def rel(path):
    return os.path.relpath(path, ROOT)


# ---- the op table -------------------------------------------------------------

def op_table():
    attrs = gen_schema.read_attrs(os.path.join(ROOT, "vm", "attrs.def"))
    ops = gen_schema.read_ops(os.path.join(ROOT, "vm", "ops.def"), {a[0] for a in attrs})
    by_id = {a[0]: a[1] for a in attrs}
    for o in ops:
        o["attr_names"] = [by_id[i] for i in o["attrs"]]
        o["required_names"] = [by_id[i] for i in o["required"]]
    return ops, attrs


# ---- (a) the committed schema is the generated one ------------------------------

def check_generated():
    r = subprocess.run([sys.executable, GEN], capture_output=True, text=True)
    if r.returncode != 0:
        fail("a", f"format/gen_schema.py failed (exit {r.returncode}): {r.stderr.strip()}")
        return
    try:
        with open(SCHEMA, encoding="utf-8") as f:
            committed = f.read()
    except OSError as e:
        fail("a", f"cannot read {rel(SCHEMA)}: {e}")
        return
    if committed != r.stdout:
        a, b = committed.splitlines(), r.stdout.splitlines()
        line = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        fail("a", f"{rel(SCHEMA)} differs from the output of format/gen_schema.py (first at line {line + 1}); "
                  f"regenerate it: python3 format/gen_schema.py -o format/fedvm.schema.json")


# ---- (b) programs validate ------------------------------------------------------

def load_validator():
    try:
        import jsonschema
    except ImportError:
        fail("b", "the Python module jsonschema is missing (Debian: python3-jsonschema)")
        return None
    try:
        with open(SCHEMA, encoding="utf-8") as f:
            schema = json.load(f)
    except (OSError, ValueError) as e:
        fail("b", f"cannot read {rel(SCHEMA)} as JSON: {e}")
        return None
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        fail("b", f"{rel(SCHEMA)} is not a valid draft 2020-12 schema: {e.message}")
        return None
    return jsonschema.Draft202012Validator(schema)


def schema_errors(validator, doc):
    errs = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    return ["/" + "/".join(str(p) for p in e.absolute_path) + ": " + e.message[:200] for e in errs]


def program_files():
    out = []
    base = os.path.join(ROOT, "programs")
    for d, dirs, files in os.walk(base):
        dirs.sort()
        if os.path.relpath(d, base).split(os.sep)[0] == "data":
            continue
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".json")]
    return out


def check_programs(validator):
    files = program_files()
    if not files:
        fail("b", "no programs found under programs/")
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            fail("b", f"{rel(path)}: not readable JSON: {e}")
            continue
        for e in schema_errors(validator, doc):
            fail("b", f"{rel(path)}: does not validate against the schema: {e}")


# ---- (c) invalid documents are rejected ------------------------------------------

VALID = {
    "fedvm": 1,
    "doc": "A valid base document that each case below breaks in one place.",
    "types": {"Vec": "f32[3]"},
    "functions": {
        "clip": {
            "params": {"x": "Vec", "bound": "f32[]"},
            "body": [
                ["low", "neg", "bound"],
                ["raised", "maximum", "x", "low"],
                ["clipped", "minimum", "raised", "bound"],
            ],
            "result": "clipped",
        },
        "main": {
            "params": {"values": "{Vec}@CLIENTS", "bound": "f32[]@SERVER"},
            "body": [
                ["bound_c", "federated_broadcast", "bound"],
                ["clipped", "federated_map", {"fn": "clip"}, "values", "bound_c"],
                ["mean", "federated_mean", "clipped"],
                ["rows", "const", {"value": [1, 2, 3], "dtype": "i32", "shape": [3]}],
            ],
            "result": "mean",
        },
    },
}


def broken(edit):
    doc = copy.deepcopy(VALID)
    edit(doc)
    return doc


def body(doc, fn="main"):
    return doc["functions"][fn]["body"]


INVALID = [
    ("unknown op", lambda d: body(d)[2].__setitem__(1, "federated_average")),
    ("unknown top-level member", lambda d: d.__setitem__("function", {})),
    ("attribute the op does not take", lambda d: body(d).__setitem__(2, ["mean", "federated_mean", {"axis": 0}, "clipped"])),
    ("unknown attribute", lambda d: body(d)[1][2].__setitem__("fun", "clip")),
    ("wrong version (2)", lambda d: d.__setitem__("fedvm", 2)),
    ("wrong version (the string \"1\")", lambda d: d.__setitem__("fedvm", "1")),
    ("missing version", lambda d: d.pop("fedvm")),
    ("attribute of the wrong JSON kind", lambda d: body(d)[3][2].__setitem__("shape", 3)),
    ("dtype that does not exist", lambda d: body(d)[3][2].__setitem__("dtype", "float32")),
    ("missing required attribute", lambda d: body(d).__setitem__(1, ["clipped", "federated_map", "values", "bound_c"])),
    ("attributes after the arguments", lambda d: body(d).__setitem__(1, ["clipped", "federated_map", "values", {"fn": "clip"}, "bound_c"])),
    ("function without result", lambda d: d["functions"]["clip"].pop("result")),
    ("unknown member of a function", lambda d: d["functions"]["clip"].__setitem__("returns", "clipped")),
    ("instruction without an op", lambda d: body(d).__setitem__(0, ["bound_c"])),
    ("alias named like a dtype", lambda d: d["types"].__setitem__("f32", "f64[]")),
]


def fedvm_check_doc(fedvm, doc, tmp, name):
    path = os.path.join(tmp, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    r = subprocess.run([fedvm, "check", path], capture_output=True, text=True)
    return r.returncode, (r.stderr + r.stdout).strip()


def check_invalid(validator, fedvm):
    errs = schema_errors(validator, VALID)
    if errs:
        fail("c", f"the valid base document is rejected by the schema: {errs[0]}")
    with tempfile.TemporaryDirectory(prefix="fedvm-docs-") as tmp:
        if fedvm:
            rc, out = fedvm_check_doc(fedvm, VALID, tmp, "valid.json")
            if rc != 0:
                fail("c", f"the valid base document fails `fedvm check`: {out}")
        for i, (what, edit) in enumerate(INVALID):
            doc = broken(edit)
            if not schema_errors(validator, doc):
                fail("c", f"the schema accepts a document with: {what}")
            if fedvm:
                rc, out = fedvm_check_doc(fedvm, doc, tmp, f"invalid_{i}.json")
                if rc == 0:
                    fail("c", f"`fedvm check` accepts a document with: {what} (the schema and the code disagree)")


# ---- (d) SPEC.md covers the op table ------------------------------------------------

FENCE_RE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")


def spec_lines():
    with open(SPEC, encoding="utf-8") as f:
        return f.read().splitlines()


def headings(lines):
    """[(line number, level, text)] outside code blocks."""
    out, fence = [], None
    for n, line in enumerate(lines, 1):
        m = FENCE_RE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1).startswith(fence[0]) and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if fence is None:
            h = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if h:
                out.append((n, len(h.group(1)), h.group(2)))
    return out


def check_spec_ops(lines, ops, attrs):
    names = [o["name"] for o in ops]
    hs = headings(lines)
    section = None          # the current '## ' heading
    seen = []               # (op, line, section)
    for n, level, text in hs:
        if level == 2:
            section = text
        elif level == 3:
            word = text.strip("` ")
            in_ops = section is not None and section.startswith("Ops:")
            if word in names:
                seen.append((word, n, section))
                if not in_ops:
                    fail("d", f"SPEC.md:{n}: op heading '### {word}' is outside the '## Ops: ...' sections")
            elif in_ops:
                fail("d", f"SPEC.md:{n}: '### {text}' in section '## {section}' is not an op of vm/ops.def")
    counts = {}
    for op, n, _ in seen:
        counts[op] = counts.get(op, 0) + 1
    for o in ops:
        c = counts.get(o["name"], 0)
        if c == 0:
            fail("d", f"SPEC.md has no '### {o['name']}' heading (op {o['id']} of vm/ops.def)")
        elif c > 1:
            fail("d", f"SPEC.md has {c} '### {o['name']}' headings")
    order = [op for op, _, _ in seen]
    if sorted(set(order)) == sorted(names) and order != names:
        first = next(i for i in range(len(names)) if order[i] != names[i])
        fail("d", f"SPEC.md's op sections are not in the order of vm/ops.def: '{order[first]}' comes where "
                  f"'{names[first]}' is expected")
    group = {o["name"]: o["group"] for o in ops}
    for op, n, sec in seen:
        want = f"Ops: {group[op]}"
        if sec != want:
            fail("d", f"SPEC.md:{n}: '### {op}' is under '## {sec}', but vm/ops.def puts it in the group "
                      f"'{group[op]}' (expected under '## {want}')")

    # Each op's section mentions the attributes the op takes.
    spans, cur = {}, None
    for n, level, text in hs:
        word = text.strip("` ")
        if cur and level <= 3:
            spans[cur[0]] = (cur[1], n - 1)
            cur = None
        if level == 3 and word in names:
            cur = (word, n)
    if cur:
        spans[cur[0]] = (cur[1], len(lines))
    for o in ops:
        if o["name"] not in spans:
            continue
        a, b = spans[o["name"]]
        text = "\n".join(lines[a - 1:b])
        for attr in o["attr_names"]:
            if f"`{attr}`" not in text:
                fail("d", f"SPEC.md:{a}: the section of '{o['name']}' does not mention its attribute `{attr}`")
        if not o["attr_names"] and "no attributes" not in text:
            fail("d", f"SPEC.md:{a}: the section of '{o['name']}' should say it takes no attributes")

    # Each op's section has one "**Gradient.**" paragraph that says what its
    # vjp column of ops.def says.
    for o in ops:
        if o["name"] in spans:
            check_gradient(lines, o, *spans[o["name"]])

    # The attribute table: one row per attribute of attrs.def, and no others.
    attr_names = [a[1] for a in attrs]
    rows = {}
    in_attrs = False
    for n, line in enumerate(lines, 1):
        h = re.match(r"^##\s+(.*)$", line)
        if h and not line.startswith("###"):
            in_attrs = h.group(1).strip() == "Attributes"
            continue
        if in_attrs:
            m = re.match(r"^\|\s*`([^`]+)`\s*\|", line)
            if m:
                rows[m.group(1)] = n
    if not rows:
        fail("d", "SPEC.md has no '## Attributes' section with a table of attributes")
    for a in attr_names:
        if a not in rows:
            fail("d", f"SPEC.md's attribute table has no row for `{a}` (vm/attrs.def)")
    for a, n in rows.items():
        if a not in attr_names:
            fail("d", f"SPEC.md:{n}: the attribute table lists `{a}`, which vm/attrs.def does not define")


GRADIENT = "**Gradient.**"
NO_GRADIENT = {"vjp_none": "None", "vjp_unsupported": "Not differentiable"}


def check_gradient(lines, op, a, b):
    """The "**Gradient.**" paragraph of op's section (lines a..b) agrees with ops.def's vjp column."""
    paras, fence, cur = [], None, None
    for n in range(a, b + 1):
        line = lines[n - 1]
        m = FENCE_RE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1).startswith(fence[0]) and len(m.group(1)) >= len(fence):
                fence = None
            cur = None
            continue
        if fence is not None:
            continue
        if not line.strip():
            cur = None
        elif cur is not None:
            cur[1].append(line.strip())
        elif line.startswith(GRADIENT):
            cur = (n, [line.strip()])
            paras.append(cur)
    name, vjp = op["name"], op["vjp"]
    if not paras:
        fail("d", f"SPEC.md:{a}: the section of '{name}' has no paragraph starting with '{GRADIENT}' "
                  f"(its vjp rule in vm/ops.def is {vjp})")
        return
    if len(paras) > 1:
        fail("d", f"SPEC.md:{paras[1][0]}: the section of '{name}' has {len(paras)} '{GRADIENT}' paragraphs")
    n, text = paras[0][0], " ".join(paras[0][1])[len(GRADIENT):].strip()
    want = NO_GRADIENT.get(vjp)
    if want and not text.startswith(want):
        fail("d", f"SPEC.md:{n}: '{name}' has the vjp rule {vjp} in vm/ops.def, so its gradient paragraph "
                  f"should start with '{GRADIENT} {want}'")
    if not want:
        for other in NO_GRADIENT.values():
            if text.startswith(other) or (other != "None" and other in text):
                fail("d", f"SPEC.md:{n}: '{name}' has its own vjp rule ({vjp}) in vm/ops.def, but its gradient "
                          f"paragraph says '{other}'")


# ---- (e) examples in SPEC.md are real ----------------------------------------------

def code_blocks(lines):
    """[(start line, language, text, markers)]; markers are the <!-- ... --> comments just before."""
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).lower(), i + 1
        markers, j = [], i - 1
        while j >= 0 and (not lines[j].strip() or lines[j].strip().startswith("<!--")):
            c = re.match(r"^\s*<!--\s*(.*?)\s*-->\s*$", lines[j])
            if c:
                markers.append(c.group(1))
            j -= 1
        k = i + 1
        while k < len(lines) and not lines[k].strip().startswith(fence):
            k += 1
        blocks.append((start, lang, "\n".join(lines[i + 1:k]) + "\n", markers))
        i = k + 1
    return blocks


def is_program(lang, text):
    if lang == "json":
        return '"fedvm"' in text
    if lang in ("yaml", "yml"):
        return re.search(r"^fedvm\s*:", text, re.M) is not None
    return False


def check_fragments(validator, start, text):
    """Lines of a json fragment that are instructions must name real ops and allowed attributes."""
    if validator is None:
        return
    sub = type(validator)({"$defs": validator.schema["$defs"], "$ref": "#/$defs/instruction"})
    for off, line in enumerate(text.splitlines()):
        line = line.strip().rstrip(",")
        if not line.startswith("["):
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not (isinstance(item, list) and len(item) >= 2 and all(isinstance(x, (str, dict)) for x in item)):
            continue
        errs = list(sub.iter_errors(item))
        if errs:
            fail("e", f"SPEC.md:{start + 1 + off}: the instruction {line} is not valid: {errs[0].message[:200]}")


def check_spec_examples(lines, fedvm, validator):
    blocks = code_blocks(lines)
    programs = [b for b in blocks if is_program(b[1], b[2])]
    if not programs:
        fail("e", "SPEC.md has no complete example program")
    for start, lang, text, markers in blocks:
        if lang == "json" and not is_program(lang, text):
            check_fragments(validator, start, text)
    if not fedvm:
        return
    with tempfile.TemporaryDirectory(prefix="fedvm-spec-") as tmp:
        jobs = []
        for start, lang, text, markers in blocks:
            names = [m[len("file:"):].strip() for m in markers if m.startswith("file:")]
            if not names and not is_program(lang, text):
                continue
            name = names[0] if names else f"spec_line_{start}.{'json' if lang == 'json' else 'yaml'}"
            path = os.path.normpath(os.path.join(tmp, name))
            if not path.startswith(tmp + os.sep):
                fail("e", f"SPEC.md:{start}: the file marker '{name}' leaves the example directory")
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            if is_program(lang, text):
                jobs.append((start, path, "expect-error" in markers))
        os.symlink(os.path.join(ROOT, "programs"), os.path.join(tmp, "programs"))
        for start, lang, text, markers in blocks:
            if "run" in markers:
                check_transcript(fedvm, tmp, start, text)
        for start, path, expect_error in jobs:
            r = subprocess.run([fedvm, "check", path], capture_output=True, text=True, cwd=tmp)
            out = (r.stderr + r.stdout).strip().replace(tmp + os.sep, "")
            if expect_error:
                if r.returncode != 1:
                    fail("e", f"SPEC.md:{start}: the example marked expect-error should fail `fedvm check` "
                              f"(exit {r.returncode}): {out}")
            elif r.returncode != 0:
                fail("e", f"SPEC.md:{start}: the example program fails `fedvm check` (exit {r.returncode}):\n    "
                          + out.replace("\n", "\n    "))


def check_transcript(fedvm, tmp, start, text):
    """Runs each '$ fedvm ...' line of a transcript and compares its output with the lines after it."""
    steps = []
    for off, line in enumerate(text.splitlines()):
        if line.startswith("$ "):
            steps.append((start + 1 + off, line[2:], []))
        elif steps:
            steps[-1][2].append(line.rstrip())
        elif line.strip():
            fail("e", f"SPEC.md:{start + 1 + off}: a transcript must start with a '$ fedvm ...' line")
            return
    if not steps:
        fail("e", f"SPEC.md:{start}: the block marked run has no '$ fedvm ...' line")
    for n, cmd, want in steps:
        argv = shlex.split(cmd)
        if not argv or argv[0] != "fedvm":
            fail("e", f"SPEC.md:{n}: transcripts may only run fedvm, found: {cmd}")
            continue
        r = subprocess.run([fedvm] + argv[1:], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        got = [ln.rstrip() for ln in r.stdout.replace(tmp + os.sep, "").splitlines()]
        while want and not want[-1]:
            want.pop()
        if got != want:
            fail("e", f"SPEC.md:{n}: `{cmd}` prints\n      " + "\n      ".join(got or ["(nothing)"])
                 + "\n    but the transcript shows\n      " + "\n      ".join(want or ["(nothing)"]))


# ---- main ------------------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fedvm", default=os.path.join(ROOT, "bin", "fedvm"), help="the fedvm binary (default bin/fedvm)")
    args = ap.parse_args(argv)
    fedvm = os.path.abspath(args.fedvm)
    if not os.access(fedvm, os.X_OK):
        fail("e", f"{args.fedvm} is not an executable; build it first (make)")
        fedvm = None

    ops, attrs = op_table()
    check_generated()
    validator = load_validator()
    if validator is not None:
        check_programs(validator)
        check_invalid(validator, fedvm)
    try:
        lines = spec_lines()
    except OSError as e:
        fail("d", f"cannot read {rel(SPEC)}: {e}")
        lines = None
    if lines is not None:
        check_spec_ops(lines, ops, attrs)
        check_spec_examples(lines, fedvm, validator)

    if failures:
        print(f"check_format_docs: {len(failures)} problem{'s' if len(failures) != 1 else ''}:", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"check_format_docs: ok ({len(ops)} ops, {len(attrs)} attributes, schema, programs, examples)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
