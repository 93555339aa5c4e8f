#!/usr/bin/env python3
"""check_format_docs.py - keeps format/SPEC.md and format/fedvm.schema.json in step with the code.

Checks, from the repository root:
  (a) format/fedvm.schema.json is exactly what format/gen_schema.py generates
      from vm/ir/ops.def, vm/ir/attrs.def and vm/ir/op_attrs.def;
  (b) the schema is a valid draft 2020-12 schema and every program under
      programs/ (every *.json outside programs/data/, which holds argument
      values) and tests/golden/programs/ validates against it, and so do the
      programs fedplan writes for them (the mapreduce and
      distribute-aggregate forms, the two programs of a cross-device plan);
  (c) invalid documents (unknown op, unknown top-level member, an attribute
      the op does not take, a wrong version, ...) are rejected by the schema,
      and by `fedvm check` too, while a valid one passes both;
  (d) SPEC.md has one `### name` heading per op of vm/ir/ops.def, in the order
      and under the group headings (`## Ops: <group>`) of ops.def, no op
      heading for an op that does not exist, a row of its attribute table for
      every attribute of vm/ir/attrs.def, and in each op's section a mention of
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
      repository's) and must print exactly the lines that follow it;
  (f) the schema and `fedvm check` judge alike: every input of tests/invalid/
      is refused by both, unless CHECKER_ONLY lists it with the reason only
      the checker can see its fault (and then the schema must accept it, so
      the list stays exact); every valid input (tests/regress/,
      tests/invalid/run/, tests/golden/programs/) passes both; and for every
      op and attribute with a domain (vm/ir/attrs.def, vm/ir/op_attrs.def), values
      inside it pass both, values outside fail both, fedvm's error located at
      the attribute. Integers written as reals (2.0) are accepted by both.

Usage: python3 tests/check_format_docs.py [--fedvm PATH]   (default bin/fedvm; fedplan beside it)
Exit status 0 when everything holds, 1 otherwise (every failure is listed).
"""
import argparse
import copy
import glob
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
    attrs = gen_schema.read_attrs(os.path.join(ROOT, "vm", "ir", "attrs.def"))
    ops = gen_schema.read_ops(os.path.join(ROOT, "vm", "ir", "ops.def"), {a[0] for a in attrs})
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
    files += corpus("tests/golden/programs/*.json")
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            fail("b", f"{rel(path)}: not readable JSON: {e}")
            continue
        for e in schema_errors(validator, doc):
            fail("b", f"{rel(path)}: does not validate against the schema: {e}")


def golden_programs():
    """The programs of the golden cases (tests/golden/*.json), repository-relative."""
    out = []
    for path in corpus("tests/golden/*.json"):
        with open(path, encoding="utf-8") as f:
            prog = json.load(f).get("program")
        if prog and prog not in out:
            out.append(prog)
    return out


def check_forms(validator, fedplan):
    """The programs fedplan writes for the golden programs validate (a program without a round form is skipped)."""
    written = 0
    with tempfile.TemporaryDirectory(prefix="fedvm-forms-") as tmp:
        for prog in golden_programs():
            for to in ("mapreduce", "distribute-aggregate", "cross-device"):
                out = os.path.join(tmp, "plan.json")
                r = subprocess.run([fedplan, prog, "--to", to, "-o", out], capture_output=True, text=True, cwd=ROOT)
                if r.returncode == 1 and "round" in r.stderr:
                    continue  # no round form (two exchanges, not federated): tests/run_forms.sh checks the message
                if r.returncode != 0:
                    fail("b", f"fedplan {prog} --to {to} fails (exit {r.returncode}): {r.stderr.strip()[:300]}")
                    continue
                with open(out, encoding="utf-8") as f:
                    plan = json.load(f)
                docs = [plan] if to != "cross-device" else [plan["client"]["program"], plan["server"]["program"]]
                for doc in docs:
                    written += 1
                    for e in schema_errors(validator, doc)[:1]:
                        fail("b", f"the {to} program fedplan writes for {prog} does not validate: {e}")
    if not written:
        fail("b", "fedplan wrote no form to validate")


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
                fail("d", f"SPEC.md:{n}: '### {text}' in section '## {section}' is not an op of vm/ir/ops.def")
    counts = {}
    for op, n, _ in seen:
        counts[op] = counts.get(op, 0) + 1
    for o in ops:
        c = counts.get(o["name"], 0)
        if c == 0:
            fail("d", f"SPEC.md has no '### {o['name']}' heading (op {o['id']} of vm/ir/ops.def)")
        elif c > 1:
            fail("d", f"SPEC.md has {c} '### {o['name']}' headings")
    order = [op for op, _, _ in seen]
    if sorted(set(order)) == sorted(names) and order != names:
        first = next(i for i in range(len(names)) if order[i] != names[i])
        fail("d", f"SPEC.md's op sections are not in the order of vm/ir/ops.def: '{order[first]}' comes where "
                  f"'{names[first]}' is expected")
    group = {o["name"]: o["group"] for o in ops}
    for op, n, sec in seen:
        want = f"Ops: {group[op]}"
        if sec != want:
            fail("d", f"SPEC.md:{n}: '### {op}' is under '## {sec}', but vm/ir/ops.def puts it in the group "
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
            fail("d", f"SPEC.md's attribute table has no row for `{a}` (vm/ir/attrs.def)")
    for a, n in rows.items():
        if a not in attr_names:
            fail("d", f"SPEC.md:{n}: the attribute table lists `{a}`, which vm/ir/attrs.def does not define")
    # Its JSON column states each domain: the bounds, the list lengths, the values, and the ops with their own.
    op_domains = gen_schema.read_op_attrs(os.path.join(ROOT, "vm", "ir", "op_attrs.def"), ops, attrs)
    for _, a, _, dom in attrs:
        if a not in rows:
            continue
        cells = lines[rows[a] - 1].split(" | ")
        json_col = cells[2] if len(cells) > 2 else ""
        for (op, attr), own in sorted(op_domains.items()):
            if attr == a and f"`{op}`" not in json_col:
                fail("d", f"SPEC.md:{rows[a]}: the JSON column of `{a}` does not name `{op}`, which has its own "
                          f"domain for it (vm/ir/op_attrs.def)")
        for d in [dom] + [own for (op, attr), own in op_domains.items() if attr == a]:
            words = [str(d[k]) for k in ("min", "max") if k in d] + [f'"{v}"' if a != "dtype" else v
                                                                    for v in d.get("one_of", [])]
            if "len" in d and d["len"][0] == d["len"][1]:
                words.append({1: "one", 2: "two", 3: "three"}.get(d["len"][0], str(d["len"][0])))
            elif "len" in d:
                words += [str(x) for x in d["len"]]
            for w in words:
                if w not in json_col:
                    fail("d", f"SPEC.md:{rows[a]}: the JSON column of `{a}` does not state {w} of its domain "
                              f"(vm/ir/attrs.def, vm/ir/op_attrs.def): {json_col}")


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
                  f"(its vjp rule in vm/ir/ops.def is {vjp})")
        return
    if len(paras) > 1:
        fail("d", f"SPEC.md:{paras[1][0]}: the section of '{name}' has {len(paras)} '{GRADIENT}' paragraphs")
    n, text = paras[0][0], " ".join(paras[0][1])[len(GRADIENT):].strip()
    want = NO_GRADIENT.get(vjp)
    if want and not text.startswith(want):
        fail("d", f"SPEC.md:{n}: '{name}' has the vjp rule {vjp} in vm/ir/ops.def, so its gradient paragraph "
                  f"should start with '{GRADIENT} {want}'")
    if not want:
        for other in NO_GRADIENT.values():
            if text.startswith(other) or (other != "None" and other in text):
                fail("d", f"SPEC.md:{n}: '{name}' has its own vjp rule ({vjp}) in vm/ir/ops.def, but its gradient "
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


# ---- (f) the schema and `fedvm check` judge alike ----------------------------------------
#
# Every input of tests/invalid/ must be refused by the schema, unless it is
# listed here with the reason only the checker can see its fault; every valid
# input (tests/regress/, tests/invalid/run/, tests/golden/programs/) must pass
# both. Inputs that are not one document Python reads as fedvm's readers do
# (bad syntax or encoding, duplicate keys, beyond the readers' limits) are
# outside the schema's reach and are counted, not judged.

TYPES = "types: the types of values (the checker's type rules)"
SHAPES = "shapes: the dimensions of tensors"
PLACEMENTS = "placements: where values live (@SERVER, @CLIENTS)"
NAMES = "names: defined, unique, used after their definition"
TYPE_STRINGS = "type strings and aliases: the schema sees only strings"
VALUES = "const values: the schema accepts any JSON value"
INCLUDES = "included documents: the schema sees one document"
CONVENTIONS = "program conventions: initialize, next and initialize_client"
RECURSION = "recursion: which function calls which"

CHECKER_ONLY = {
    "add_dtype_mismatch": TYPES,
    "add_on_clients": PLACEMENTS,
    "add_shape_mismatch": SHAPES,
    "aggregate_bad_accumulate": TYPES,
    "avg_pool_grad_rank5": SHAPES,
    "broadcast_clients": PLACEMENTS,
    "clip_bound_dtype": TYPES,
    "cond_non_bool": TYPES,
    "const_bad_value": VALUES,
    "const_ragged": VALUES,
    "const_zero_size_huge_dims": SHAPES,
    "conv2d_grad_filter_channels": SHAPES,
    "conv2d_grad_filter_dy_shape": SHAPES,
    "conv2d_grad_input_dy_shape": SHAPES,
    "conv2d_rank5": SHAPES,
    "cumsum_of_bool": TYPES,
    "cyclic_type_aliases": TYPE_STRINGS,
    "dim_axis_out_of_range": TYPES,
    "duplicate_param_name": NAMES,
    "duplicate_ssa_name": NAMES,
    "federated_map_federated_fn": PLACEMENTS,
    "federated_mean_integers": TYPES,
    "federated_sum_server": PLACEMENTS,
    "field_of_tensor": TYPES,
    "field_unknown_name": NAMES,
    "fields_names_count": NAMES,
    "fields_placed_unknown": NAMES,
    "fields_unknown_name": NAMES,
    "fields_wrong_count": TYPES,
    "fori_result_missing_field": TYPES,
    "fori_wrong_result": TYPES,
    "grad_of_vector": TYPES,
    "grad_has_aux_not_pair": TYPES,
    "grad_has_aux_vector_value": TYPES,
    "grad_through_federated_value": TYPES,
    "grad_through_sequence_filter": TYPES,
    "grad_through_while": TYPES,
    "grad_wrt_integer": TYPES,
    "grad_wrt_sequence": TYPES,
    "include_cycle": INCLUDES,
    "jvp_tangent_type": TYPES,
    "jvp_through_while": TYPES,
    "include_duplicate_function": INCLUDES,
    "include_missing": INCLUDES,
    "client_state_no_param": CONVENTIONS,
    "client_state_param_type": CONVENTIONS,
    "client_state_third_result_without_init": CONVENTIONS,
    "client_state_two_results": CONVENTIONS,
    "client_state_without_init": CONVENTIONS,
    "initialize_client_alone": CONVENTIONS,
    "initialize_client_placed": CONVENTIONS,
    "initialize_client_sequence": CONVENTIONS,
    "initialize_with_params": CONVENTIONS,
    "literal_f32_range": TYPES,
    "literal_fraction_with_integer": TYPES,
    "literal_mixed_struct": TYPES,
    "literal_no_operand": TYPES,
    "literal_number_with_bool": TYPES,
    "literal_out_of_range": TYPES,
    "literal_select_predicate": TYPES,
    "loc_origin": SHAPES,
    "map_all_equal_per_client": PLACEMENTS,
    "matmul_inner_dim": SHAPES,
    "max_pool_gather_u_shape": SHAPES,
    "max_pool_grad_dy_shape": SHAPES,
    "next_bad_result": CONVENTIONS,
    "next_without_initialize": CONVENTIONS,
    "one_hot_float_indices": TYPES,
    "param_function_type": TYPE_STRINGS,
    "param_struct_with_function": TYPE_STRINGS,
    "privacy_hparam_not_scalar": TYPES,
    "privacy_unknown_hparam": NAMES,
    "recursion_direct": RECURSION,
    "recursion_mutual": RECURSION,
    "reshape_count": SHAPES,
    "secure_modular_sum_modulus": TYPES + " (a modulus must fit the dtype)",
    "secure_sum_bitwidth": TYPES + " (a bitwidth must fit the dtype)",
    "secure_sum_floats": TYPES,
    "secure_sum_narrow_leaf_late": TYPES + " (a bitwidth must fit the dtype)",
    "select_float_keys": TYPES,
    "sequence_filter_not_bool": TYPES,
    "sequence_take_of_tensor": TYPES,
    "shuffle_bad_key": TYPES,
    "type_alias_chain_deep": TYPE_STRINGS,
    "type_alias_chain_huge": TYPE_STRINGS,
    "type_alias_chain_reversed": TYPE_STRINGS,
    "type_dim_exponent": TYPE_STRINGS,
    "type_error_after_escape": TYPE_STRINGS,
    "type_nested_placement": TYPE_STRINGS,
    "type_rank_too_high": TYPE_STRINGS,
    "type_sequence_too_deep": TYPE_STRINGS,
    "type_server_braces": TYPE_STRINGS,
    "type_too_deep": TYPE_STRINGS,
    "type_too_large": TYPE_STRINGS,
    "type_unknown_dtype": TYPE_STRINGS,
    "type_unterminated_shape": TYPE_STRINGS,
    "type_zero_size_huge_dims": TYPE_STRINGS,
    "undefined_argument": NAMES,
    "undefined_function_attr": NAMES,
    "undefined_result": NAMES,
    "undefined_type_alias": TYPE_STRINGS,
    "used_before_definition": NAMES,
    "yaml_type_plain_scalar": TYPE_STRINGS,
}

MAX_DEPTH = 512            # FVM_MAX_DEPTH (vm/core/status.h): nested collections
MAX_DOC_NODES = 10000000   # FVM_MAX_DOC_NODES: nodes once YAML aliases are expanded


class Unreadable(Exception):
    """The input is not one document that Python reads as fedvm's readers do."""


def strict_object(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise Unreadable("a duplicate key")
    return dict(pairs)


def refuse_constant(name):
    raise Unreadable(f"the non-JSON constant {name}")


def yaml_module():
    try:
        import yaml
    except ImportError:
        return None
    return yaml


def read_yaml(yaml, text):
    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = set()
        for k, _ in node.value:
            key = loader.construct_object(k, deep=deep)
            if key in seen:
                raise Unreadable(f"the duplicate key {key!r}")
            seen.add(key)
        return loader.construct_mapping(node, deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=Strict)
    except (yaml.YAMLError, RecursionError) as e:
        raise Unreadable(f"not YAML fedvm reads: {type(e).__name__}")


def within_reader_limits(doc):
    """Raises Unreadable beyond the readers' limits: nesting, expanded size, an alias inside itself.
    Iterative, and memoized per collection (YAML aliases make the document a DAG)."""
    size, height, busy = {}, {}, set()
    stack = [(doc, False)]
    while stack:
        x, done = stack.pop()
        if not isinstance(x, (list, dict)):
            continue
        items = list(x.values()) if isinstance(x, dict) else x
        if done:
            busy.discard(id(x))
            size[id(x)] = 1 + sum(size.get(id(v), 1) for v in items)
            height[id(x)] = 1 + max((height.get(id(v), 0) for v in items), default=0)
            if size[id(x)] > MAX_DOC_NODES:
                raise Unreadable(f"more than {MAX_DOC_NODES} nodes once aliases are expanded")
            if height[id(x)] > MAX_DEPTH:
                raise Unreadable(f"nested deeper than {MAX_DEPTH}")
            continue
        if id(x) in size:
            continue
        if id(x) in busy:
            raise Unreadable("an alias inside the collection it refers to")
        busy.add(id(x))
        stack.append((x, True))
        stack.extend((v, False) for v in items)


def read_document(path, yaml):
    """The document at path as Python values; Unreadable when fedvm's readers would refuse it."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8")
    if path.endswith((".yaml", ".yml")):
        doc = read_yaml(yaml, text)
    else:
        try:
            doc = json.loads(text, object_pairs_hook=strict_object, parse_constant=refuse_constant)
        except (ValueError, RecursionError) as e:
            if isinstance(e, Unreadable):
                raise
            raise Unreadable(f"not JSON: {str(e)[:80]}")
    within_reader_limits(doc)
    return doc


def fedvm_check_file(fedvm, path):
    r = subprocess.run([fedvm, "check", path], capture_output=True, text=True, cwd=ROOT)
    return r.returncode, (r.stderr + r.stdout).strip()


def corpus(pattern):
    return sorted(glob.glob(os.path.join(ROOT, pattern)))


def check_agreement(validator, fedvm):
    yaml = yaml_module()
    invalid = corpus("tests/invalid/*.json") + corpus("tests/invalid/*.yaml") + corpus("tests/invalid/*.yml")
    valid = corpus("tests/regress/*.json") + corpus("tests/invalid/run/*.json") + corpus("tests/golden/programs/*.json")
    if not invalid or not valid:
        fail("f", "no inputs under tests/invalid/ or tests/regress/")
    names = {os.path.splitext(os.path.basename(p))[0] for p in invalid}
    for name in sorted(set(CHECKER_ONLY) - names):
        fail("f", f"CHECKER_ONLY lists '{name}', which is not an input of tests/invalid/")
    judged = unreadable = 0
    for path, want_ok in [(p, False) for p in invalid] + [(p, True) for p in valid]:
        name = os.path.splitext(os.path.basename(path))[0]
        if yaml is None and path.endswith((".yaml", ".yml")):
            continue  # without Python's yaml module (Debian: python3-yaml) YAML inputs are not judged
        try:
            doc = read_document(path, yaml)
        except Unreadable as e:
            unreadable += 1
            if want_ok:
                fail("f", f"{rel(path)} is a valid input but cannot be read as a document: {e}")
            elif name in CHECKER_ONLY:
                fail("f", f"CHECKER_ONLY lists '{name}', but it is not even a document the schema could judge ({e})")
            continue
        judged += 1
        errs = schema_errors(validator, doc)
        rc, out = fedvm_check_file(fedvm, path) if fedvm else (None, "")
        if fedvm and rc not in (0, 1):
            fail("f", f"{rel(path)}: `fedvm check` exits {rc}: {out[:300]}")
            continue
        if fedvm and (rc == 0) != want_ok:
            fail("f", f"{rel(path)}: `fedvm check` {'accepts' if rc == 0 else 'refuses'} it (exit {rc}): {out[:300]}")
            continue
        if want_ok:
            if errs:
                fail("f", f"{rel(path)}: fedvm accepts it, the schema refuses it: {errs[0]}")
        elif name in CHECKER_ONLY:
            if errs:
                fail("f", f"{rel(path)}: the schema refuses it ({errs[0]}), so CHECKER_ONLY should not list it "
                          f"('{CHECKER_ONLY[name]}')")
        elif not errs:
            first = out.splitlines()[0] if out else "(no message)"
            fail("f", f"{rel(path)}: fedvm refuses it ({first[:300]}) but the schema accepts it: give the schema "
                      f"the constraint (vm/ir/attrs.def, vm/ir/op_attrs.def, format/gen_schema.py), or list it in "
                      f"CHECKER_ONLY with the reason only the checker can see it")
    return judged, unreadable


# ---- (f) every attribute domain, probed on both sides --------------------------------------

def valid_number(dom, integer):
    """A value inside a domain's bounds."""
    lo, hi = dom.get("min"), dom.get("max")
    if lo is not None and not dom["min_open"]:
        return lo
    if hi is not None and not dom["max_open"]:
        return hi
    if lo is not None and hi is not None:
        return (lo + hi) / 2
    if lo is not None:
        return lo + 1
    if hi is not None:
        return hi - 1
    return 0 if integer else 0.5


def outside_numbers(dom, integer):
    """Values just outside a domain's bounds."""
    step = 1 if integer else 0.5
    out = []
    if "min" in dom:
        out.append(dom["min"] if dom["min_open"] else dom["min"] - step)
    if "max" in dom:
        out.append(dom["max"] if dom["max_open"] else dom["max"] + step)
    return out


def valid_value(kind, dom):
    if kind == "INT":
        return valid_number(dom, True)
    if kind == "REAL":
        return valid_number(dom, False)
    if kind == "INTS":
        lo, _ = dom.get("len", (0, gen_schema.MAX_RANK))
        return [valid_number(dom, True)] * max(lo, 1)
    if kind in ("DTYPE", "STRING"):
        return dom.get("one_of", ["f32" if kind == "DTYPE" else "s"])[0]
    return {"FUNC": "f", "BOOL": True, "PLACEMENT": "SERVER", "STRINGS": ["a"], "VALUE": 0}[kind]


def domain_probes(kind, dom):
    """[(what, value, inside)] for an attribute of this kind and domain."""
    ok = valid_value(kind, dom)
    probes = [("a value inside", ok, True)]
    if kind == "INT":
        probes += [(f"{v} (outside)", v, False) for v in outside_numbers(dom, True)]
        probes += [(f"{float(ok)} (an integer written as a real)", float(ok), True),
                   (f"{ok + 0.5} (not an integer)", ok + 0.5, False)]
    elif kind == "REAL":
        probes += [(f"{v} (outside)", v, False) for v in outside_numbers(dom, False)]
    elif kind == "INTS":
        lo, hi = dom.get("len", (0, gen_schema.MAX_RANK))
        probes += [(f"an entry {v} (outside)", ok[:-1] + [v], False) for v in outside_numbers(dom, True)]
        probes += [("entries written as reals", [float(v) for v in ok], True),
                   ("an entry that is not an integer", ok[:-1] + [ok[-1] + 0.5], False),
                   (f"{hi + 1} entries", [ok[0]] * (hi + 1), False)]
        if lo > 0:
            probes.append((f"{lo - 1} entr{'y' if lo == 2 else 'ies'}", [ok[0]] * (lo - 1), False))
    elif "one_of" in dom:
        other = next(v for v in [ok.lower(), ok.upper(), "x", "f32", "bool"] if v not in dom["one_of"])
        probes.append((f'"{other}" (not one of them)', other, False))
    return probes


def check_domains(validator, fedvm, ops, attrs):
    """For every op and attribute with a domain: values inside pass both judges, values outside fail both,
    and fedvm's error is the decoder's, at the attribute."""
    by_id = {a[0]: a for a in attrs}
    op_domains = gen_schema.read_op_attrs(os.path.join(ROOT, "vm", "ir", "op_attrs.def"), ops, attrs)
    probes = []
    for o in ops:
        for i in o["attrs"]:
            _, name, kind, dom = by_id[i]
            dom = op_domains.get((o["name"], name), dom)
            if not dom and kind not in ("INT", "INTS"):
                continue
            for what, value, inside in domain_probes(kind, dom):
                a = {by_id[r][1]: valid_value(by_id[r][2], op_domains.get((o["name"], by_id[r][1]), by_id[r][3]))
                     for r in o["required"]}
                a[name] = value
                instr = ["r", o["name"], a] + ["x"] * o["min"]
                doc = {"fedvm": 1, "functions": {"main": {"params": {"x": "f32[]"}, "body": [instr],
                                                          "result": "r"}}}
                probes.append((o["name"], name, what, inside, doc))
    with tempfile.TemporaryDirectory(prefix="fedvm-domains-") as tmp:
        for k, (op, name, what, inside, doc) in enumerate(probes):
            errs = schema_errors(validator, doc)
            if inside and errs:
                fail("f", f"{op}.{name} = {what}: the schema refuses it: {errs[0]}")
            if not inside and not errs:
                fail("f", f"{op}.{name} = {what}: the schema accepts it")
            if not fedvm:
                continue
            rc, out = fedvm_check_doc(fedvm, doc, tmp, f"probe_{k}.json")
            said = [ln for ln in out.splitlines() if f"attribute '{name}' must be" in ln]
            if inside and said:
                fail("f", f"{op}.{name} = {what}: fedvm refuses the value: {said[0][:300]}")
            if not inside and (rc != 1 or not any(f"/functions/main/body/0/2/{name}" in ln for ln in said)):
                fail("f", f"{op}.{name} = {what}: fedvm does not refuse the value at /functions/main/body/0/2/{name} "
                          f"(exit {rc}): {out[:300]}")
    return len(probes)


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
    counts = ""
    if validator is not None:
        check_programs(validator)
        fedplan = os.path.join(os.path.dirname(fedvm), "fedplan") if fedvm else None
        if fedplan and os.access(fedplan, os.X_OK):
            check_forms(validator, fedplan)
        else:
            fail("b", "no fedplan beside the fedvm binary; build it first (make)")
        check_invalid(validator, fedvm)
        judged, unreadable = check_agreement(validator, fedvm)
        probes = check_domains(validator, fedvm, ops, attrs)
        counts = (f", {judged} inputs judged alike ({len(CHECKER_ONLY)} only by the checker, "
                  f"{unreadable} not documents), {probes} domain probes")
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
    print(f"check_format_docs: ok ({len(ops)} ops, {len(attrs)} attributes, schema, programs, examples{counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
