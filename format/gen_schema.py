#!/usr/bin/env python3
"""gen_schema.py - generates format/fedvm.schema.json from vm/ir/ops.def, vm/ir/attrs.def and vm/ir/op_attrs.def.

The schema (JSON Schema draft 2020-12) describes the structure of a fedvm
document, format version 1: the top-level members, functions, parameters,
instructions, the op names, and for each op its number of arguments, the
attribute names it accepts, the JSON kind and the domain of each (the DOMAIN
column of attrs.def, or the op's own in op_attrs.def: bounds, list lengths,
allowed values), and which are required. fedvm's attribute decoder (vm/ir/check.c)
enforces the same domains from the same files. The schema does not check what
only the checker can (names, types, shapes, placements).

    python3 format/gen_schema.py            # print the schema
    python3 format/gen_schema.py -o FILE    # write it to FILE

Run from anywhere; paths are relative to the repository root (this file's
parent directory). Python 3 standard library only.
"""
import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DTYPES = ["bool", "u8", "i32", "i64", "u32", "f32", "f64"]
PLACEMENTS = ["SERVER", "CLIENTS"]
MAX_RANK = 8      # FVM_MAX_RANK (vm/core/status.h): entries of an INTS attribute
MAX_NAME = 256    # MAX_NAME (format/ir_read.c), in bytes there, in characters here
IDENT = "^[A-Za-z_][A-Za-z0-9_]*$"
# Control characters, found anywhere: a pattern anchored with '$' would let
# "y\n" through validators that use Python's re, where '$' also matches
# before a final newline.
CONTROL = {"pattern": "[\\u0000-\\u001f\\u007f]"}

# FVM_OP rows, and FVM_EW rows (elementwise ops: FVM_OP's columns, then their kernel's)
OP_RE = re.compile(
    r'^FVM_(?:OP|EW)\(\s*(\w+)\s*,\s*"([^"]+)"\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*([^,]+?)\s*,'
    r'\s*([^,]+?)\s*,\s*([^,]+?)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*(?:,[^()]*)?\)$')
GROUP_RE = re.compile(r'^/\*\s*--\s*(.*?)\s*--\s*\*/')
ATTR_RE = re.compile(r'^FVM_ATTR\(\s*(\w+)\s*,\s*"([^"]+)"\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(D\(.*\))\s*\)$')
OP_ATTR_RE = re.compile(r'^FVM_OP_ATTR\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(D\(.*\))\s*\)$')
MASK_RE = re.compile(r'A\((\w+)\)')
NUM = r'-?\d+(?:\.\d+)?'
DOMAIN_ITEM_RE = re.compile(r'\s*(?:(ANY)|(MIN|MAX|ABOVE|BELOW)\(\s*(' + NUM + r')\s*\)'
                            r'|(LEN)\(\s*(\d+)\s*,\s*(\d+)\s*\)|(ONE_OF)\(\s*"([^"]*)"\s*\))\s*(,|$)')
# Which DOMAIN items each attribute kind can have (attrs.def).
DOMAIN_KINDS = {"MIN": {"INT", "INTS", "REAL"}, "MAX": {"INT", "INTS", "REAL"}, "ABOVE": {"REAL"},
                "BELOW": {"REAL"}, "LEN": {"INTS"}, "ONE_OF": {"STRING", "DTYPE"}}


def number(text):
    return float(text) if "." in text else int(text)


def read_domain(text, kind, where):
    """The DOMAIN column 'D(MIN(1), MAX(64))' as a dict (min, max, min_open, max_open, len, one_of)."""
    body = text[2:-1].strip()
    dom, pos = {}, 0
    if body == "ANY":
        return dom
    while pos < len(body):
        m = DOMAIN_ITEM_RE.match(body, pos)
        if not m or m.group(1):
            raise SystemExit(f"gen_schema: cannot read the domain '{text}' of {where}")
        item = m.group(2) or m.group(4) or m.group(7)
        if kind not in DOMAIN_KINDS[item]:
            raise SystemExit(f"gen_schema: {where}: {item} does not apply to an attribute of kind {kind}")
        key = {"MIN": "min", "ABOVE": "min", "MAX": "max", "BELOW": "max", "LEN": "len", "ONE_OF": "one_of"}[item]
        if key in dom:
            raise SystemExit(f"gen_schema: {where}: the domain '{text}' bounds {key} twice")
        if item in ("MIN", "MAX", "ABOVE", "BELOW"):
            dom[key] = number(m.group(3))
            dom[key + "_open"] = item in ("ABOVE", "BELOW")
            if kind != "REAL" and not isinstance(dom[key], int):
                raise SystemExit(f"gen_schema: {where}: an integer attribute needs whole bounds")
        elif item == "LEN":
            lo, hi = int(m.group(5)), int(m.group(6))
            if not 0 <= lo <= hi <= MAX_RANK:
                raise SystemExit(f"gen_schema: {where}: LEN({lo}, {hi}) is not within 0 to {MAX_RANK}")
            dom["len"] = (lo, hi)
        else:
            values = m.group(8).split("|")
            if kind == "DTYPE" and not set(values) <= set(DTYPES):
                raise SystemExit(f"gen_schema: {where}: ONE_OF names unknown dtypes {sorted(set(values) - set(DTYPES))}")
            if not all(values) or len(set(values)) != len(values):
                raise SystemExit(f"gen_schema: {where}: ONE_OF(\"{m.group(8)}\") has empty or repeated values")
            dom["one_of"] = values
        pos = m.end()
    if "min" in dom and "max" in dom and dom["min"] > dom["max"]:
        raise SystemExit(f"gen_schema: {where}: the domain '{text}' is empty")
    return dom


def read_attrs(path):
    """[(ID, json name, KIND, domain)] in attrs.def order."""
    attrs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("FVM_ATTR("):
                continue
            m = ATTR_RE.match(line)
            if not m:
                raise SystemExit(f"gen_schema: {path}:{n}: cannot read this FVM_ATTR entry")
            where = f"attribute {m.group(2)}"
            attrs.append((m.group(1), m.group(2), m.group(3), read_domain(m.group(5), m.group(3), where)))
    if not attrs:
        raise SystemExit(f"gen_schema: no FVM_ATTR entries in {path}")
    return attrs


def read_op_attrs(path, ops, attrs):
    """{(op name, attribute json name): domain} from op_attrs.def; each op must take the attribute."""
    by_id = {a[0]: a for a in attrs}
    op_by_id = {o["id"]: o for o in ops}
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("FVM_OP_ATTR("):
                continue
            m = OP_ATTR_RE.match(line)
            if not m:
                raise SystemExit(f"gen_schema: {path}:{n}: cannot read this FVM_OP_ATTR entry")
            op, attr = op_by_id.get(m.group(1)), by_id.get(m.group(2))
            if not op or not attr or attr[0] not in op["attrs"]:
                raise SystemExit(f"gen_schema: {path}:{n}: op {m.group(1)} does not take an attribute {m.group(2)}")
            key = (op["name"], attr[1])
            if key in out:
                raise SystemExit(f"gen_schema: {path}:{n}: a second domain for {key[1]} in {key[0]}")
            out[key] = read_domain(m.group(3), attr[2], f"{key[1]} in {key[0]}")
    return out


def mask(text, ids, where):
    """Attribute IDs of a mask such as 'A(FN) | A(N)' or '0'."""
    text = text.strip()
    if text == "0":
        return []
    names = MASK_RE.findall(text)
    rest = MASK_RE.sub("", text).replace("|", "").strip()
    if not names or rest:
        raise SystemExit(f"gen_schema: cannot read the attribute mask '{text}' of {where}")
    for n in names:
        if n not in ids:
            raise SystemExit(f"gen_schema: {where} names the unknown attribute {n}")
    return names


def read_ops(path, attr_ids):
    """[dict(id, name, group, min, max, flags, attrs, required, vjp)] in ops.def order."""
    ops, group = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            g = GROUP_RE.match(line)
            if g:
                group = g.group(1)
                continue
            m = OP_RE.match(line)
            if not m:
                continue
            where = f"op {m.group(2)}"
            ops.append({
                "id": m.group(1),
                "name": m.group(2),
                "group": group,
                "min": int(m.group(3)),
                "max": int(m.group(4)),
                "flags": [x.strip() for x in m.group(5).split("|") if x.strip() != "0"],
                "attrs": mask(m.group(6), attr_ids, where),
                "required": mask(m.group(7), attr_ids, where),
                "vjp": m.group(10),
            })
    if not ops:
        raise SystemExit(f"gen_schema: no FVM_OP entries in {path}")
    return ops


def bounds(dom):
    """JSON Schema bounds of a number from a domain."""
    out = {}
    if "min" in dom:
        out["exclusiveMinimum" if dom["min_open"] else "minimum"] = dom["min"]
    if "max" in dom:
        out["exclusiveMaximum" if dom["max_open"] else "maximum"] = dom["max"]
    return out


def kind_schema(kind, dom):
    """The JSON form of an attribute of this kind (attrs.def KIND) and domain."""
    if kind == "FUNC":
        return {"$ref": "#/$defs/name", "description": "a function name"}
    if kind == "INT":
        return {"anyOf": [{"type": "integer", **bounds(dom)}, {"$ref": "#/$defs/hparam_ref"}]}
    if kind == "BOOL":
        return {"type": "boolean"}
    if kind == "INTS":
        lo, hi = dom.get("len", (0, MAX_RANK))
        out = {"type": "array"}
        if lo:
            out["minItems"] = lo
        out["maxItems"] = hi
        out["items"] = {"type": "integer", **bounds(dom)}
        return out
    if kind == "DTYPE":
        return {"enum": dom.get("one_of", DTYPES)}
    if kind == "PLACEMENT":
        return {"enum": PLACEMENTS}
    if kind == "STRING":
        return {"enum": dom["one_of"]} if "one_of" in dom else {"type": "string"}
    if kind == "STRINGS":
        return {"type": "array", "uniqueItems": True, "items": {"$ref": "#/$defs/identifier"}}
    if kind == "REAL":
        return {"anyOf": [{"type": "number", **bounds(dom)}, {"$ref": "#/$defs/hparam_ref"}]}
    if kind == "VALUE":
        return {"description": "any JSON value (const reads it as a tensor literal)"}
    raise SystemExit(f"gen_schema: unknown attribute kind {kind}")


def arity(o, at):
    """Items of an instruction of op o whose arguments start at position at."""
    out = {}
    if at + o["min"] > 2:
        out["minItems"] = at + o["min"]
    if o["max"] >= 0:
        out["maxItems"] = at + o["max"]
    return out


def build(ops, attrs, op_domains):
    by_id = {a[0]: a for a in attrs}
    op_names = [o["name"] for o in ops]

    attr_defs = {
        "loc": {
            "type": "string",
            "pattern": "^.+:[1-9][0-9]*$",
            "description": "FILE:LINE, where a generator (the Python front end) made the instruction",
        }
    }
    for _, name, kind, dom in attrs:
        attr_defs["attr_" + name] = kind_schema(kind, dom)

    per_op = []
    for o in ops:
        names = [by_id[i][1] for i in o["attrs"]]
        required = [by_id[i][1] for i in o["required"]]
        props = {}
        for i in o["attrs"]:
            _, n, kind, _ = by_id[i]
            dom = op_domains.get((o["name"], n))
            props[n] = kind_schema(kind, dom) if dom is not None else {"$ref": "#/$defs/attr_" + n}
        props["loc"] = {"$ref": "#/$defs/loc"}  # any op: where a generator made it (SPEC "Source locations")
        attr_obj = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            attr_obj["required"] = required
        if required:
            # Required attributes: position 2 must be the attribute object.
            attrs_part = {"minItems": 3, "prefixItems": [True, True, attr_obj]}
        else:
            attrs_part = {"prefixItems": [True, True, {"if": {"type": "object"}, "then": attr_obj}]}
        # Item 0: a name, or for fields the array of names a destructuring binds. The arguments: names,
        # or scalar literals (a number or a boolean) in the ops that take them (OPF_LIT).
        lit = "OPF_LIT" in o["flags"]
        arg = {"anyOf": [{"$ref": "#/$defs/name"}, {"$ref": "#/$defs/literal"}]} if lit else {"$ref": "#/$defs/name"}
        items_part = {
            "prefixItems": [{"$ref": "#/$defs/names" if o["name"] == "fields" else "#/$defs/name"}, True,
                            {"anyOf": [{"type": "object"}, arg]}],
            "items": arg,
        }
        # The arguments follow the attribute object if there is one.
        args_part = {
            "if": {"minItems": 3, "prefixItems": [True, True, {"type": "object"}]},
            "then": arity(o, 3),
        }
        if arity(o, 2):
            args_part["else"] = arity(o, 2)
        per_op.append({
            "if": {"prefixItems": [True, {"const": o["name"]}]},
            "then": {"allOf": [attrs_part, items_part, args_part]},
        })

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:fedvm:format:1",
        "title": "fedvm program, format version 1",
        "description": (
            "The structure of a fedvm document (format/SPEC.md). Generated by format/gen_schema.py "
            "from vm/ir/ops.def, vm/ir/attrs.def and vm/ir/op_attrs.def; do not edit. It checks the members of the "
            "document and of functions, the shape of instructions [name, op, {attributes}?, args...], the op "
            "names, and per op the number of arguments, the allowed attribute names, their JSON kinds, their "
            "domains (bounds, list lengths, allowed values; the same ones `fedvm check` enforces, from the same "
            "files) and the required ones. Only `fedvm check` checks: names (defined, unique, used after their "
            "definition, functions named by attributes), type strings and aliases, types, shapes and placements "
            "(and what depends on them: an axis in range, a bitwidth that fits the dtype, how many names a "
            "struct has), which of field's name and index is given, const values, a literal's dtype and range, "
            "which fields a destructuring binds, included documents, "
            "program conventions (initialize, next), recursion, the readers' limits (nesting, size) and "
            "names' length in bytes (here: characters). Integers may be written with a zero fraction (2.0), "
            "in fedvm as in JSON Schema."
        ),
        "type": "object",
        "required": ["fedvm"],
        "additionalProperties": False,
        "properties": {
            "fedvm": {"const": 1, "description": "the format version"},
            "doc": {"type": "string"},
            "form": {
                "type": "object",
                "description": (
                    "what fedplan wrote this program as (format/PLANS.md): its kind (mapreduce, "
                    "distribute-aggregate, cross-device) and parts. fedvm keeps it as written and runs "
                    "nothing differently because of it, so any object is accepted."
                ),
            },
            "privacy": {
                "type": "object",
                "description": (
                    "differential privacy: the run's rounds are accounted as the Poisson-subsampled Gaussian "
                    "mechanism with this noise multiplier (a number, or the name of a scalar hyperparameter), "
                    "and each round's metrics line gets epsilon for this delta (format/SPEC.md, Differential privacy)"
                ),
                "required": ["noise_multiplier", "delta"],
                "additionalProperties": False,
                "properties": {
                    "noise_multiplier": {
                        "oneOf": [{"type": "number", "minimum": 0}, {"$ref": "#/$defs/identifier"}],
                    },
                    "delta": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                },
            },
            "include": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "paths of included documents, relative to this file's directory",
            },
            "hparams": {
                "type": "object",
                "description": "hyperparameters: named, typed values read by the op hparam and by "
                "{\"hparam\": name} in integer and number attributes; --set NAME=VALUE overrides a default",
                "propertyNames": {"$ref": "#/$defs/identifier"},
                "additionalProperties": {
                    "type": "object",
                    "required": ["default"],
                    "additionalProperties": False,
                    "description": "without a type: a new default for a hyperparameter an included file "
                    "declares (only in the program's own file, which the checker sees)",
                    "properties": {
                        "doc": {"type": "string"},
                        "type": {"type": "string", "description": "a tensor type with a static shape"},
                        "default": {"description": "a value of the type (a number, a boolean or nested arrays)"},
                    },
                },
            },
            "types": {
                "type": "object",
                "propertyNames": {"$ref": "#/$defs/alias_name"},
                "additionalProperties": {"type": "string", "description": "a type string"},
            },
            "functions": {
                "type": "object",
                "propertyNames": {"$ref": "#/$defs/name"},
                "additionalProperties": {"$ref": "#/$defs/function"},
            },
        },
        "$defs": {
            "name": {
                "description": "a function, parameter or instruction name: 1 to 256 bytes, no control characters",
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_NAME,
                "not": CONTROL,
            },
            "identifier": {"type": "string", "pattern": IDENT, "not": CONTROL},
            "names": {
                "description": "the names a destructuring binds (fields), one or more distinct names",
                "type": "array",
                "minItems": 1,
                "uniqueItems": True,
                "items": {"$ref": "#/$defs/name"},
            },
            "literal": {
                "description": "a scalar literal argument: a number or a boolean, of the dtype of the op's other "
                "operands (format/SPEC.md, Literals)",
                "type": ["number", "boolean"],
            },
            "hparam_ref": {
                "description": "a hyperparameter's value (a scalar; an integer one for an integer attribute), "
                "checked against the attribute's bounds by fedvm check",
                "type": "object",
                "required": ["hparam"],
                "additionalProperties": False,
                "properties": {"hparam": {"$ref": "#/$defs/identifier"}},
            },
            "alias_name": {
                "description": "a type alias name: an identifier that is not a dtype or a placement",
                "allOf": [{"$ref": "#/$defs/identifier"}, {"not": {"enum": DTYPES + PLACEMENTS}}],
            },
            "function": {
                "type": "object",
                "required": ["result"],
                "additionalProperties": False,
                "properties": {
                    "doc": {"type": "string"},
                    "params": {
                        "type": "object",
                        "description": "parameter name -> type string, in positional order",
                        "propertyNames": {"$ref": "#/$defs/name"},
                        "additionalProperties": {"type": "string"},
                    },
                    "body": {"type": "array", "items": {"$ref": "#/$defs/instruction"}},
                    "result": {"$ref": "#/$defs/name"},
                },
            },
            "op": {"enum": op_names},
            "instruction": {
                "description": (
                    "[name, op, {attributes}?, args...]: the attribute object, if any, at position 2; "
                    "arguments are names, or scalar literals in the ops that take them; fields binds an array of "
                    "names. The number of arguments is not checked here."
                ),
                "type": "array",
                "minItems": 2,
                "prefixItems": [
                    {"anyOf": [{"$ref": "#/$defs/name"}, {"$ref": "#/$defs/names"}]},
                    {"$ref": "#/$defs/op"},
                    {"anyOf": [{"type": "object"}, {"$ref": "#/$defs/name"}, {"$ref": "#/$defs/literal"}]},
                ],
                "items": {"anyOf": [{"$ref": "#/$defs/name"}, {"$ref": "#/$defs/literal"}]},
                "allOf": per_op,
            },
            **attr_defs,
        },
    }


def main(argv):
    ap = argparse.ArgumentParser(description="Generate the fedvm document JSON Schema from the op table.")
    ap.add_argument("-o", "--output", help="write the schema to this file instead of stdout")
    args = ap.parse_args(argv)
    attrs = read_attrs(os.path.join(ROOT, "vm", "ir", "attrs.def"))
    ops = read_ops(os.path.join(ROOT, "vm", "ir", "ops.def"), {a[0] for a in attrs})
    op_domains = read_op_attrs(os.path.join(ROOT, "vm", "ir", "op_attrs.def"), ops, attrs)
    text = json.dumps(build(ops, attrs, op_domains), indent=2, ensure_ascii=True) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
