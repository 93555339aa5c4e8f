#!/usr/bin/env python3
"""gen_schema.py - generates format/fedvm.schema.json from vm/ops.def and vm/attrs.def.

The schema (JSON Schema draft 2020-12) describes the structure of a fedvm
document, format version 1: the top-level members, functions, parameters,
instructions, the op names, and for each op the attribute names it accepts,
the JSON kind of each, and which are required. It does not check what only
the checker can (names, types, shapes, placements, argument counts).

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
MAX_RANK = 8      # FVM_MAX_RANK (vm/status.h): entries of an INTS attribute
MAX_NAME = 256    # MAX_NAME (format/ir_read.c), in bytes there, in characters here
IDENT = "^[A-Za-z_][A-Za-z0-9_]*$"

OP_RE = re.compile(
    r'^FVM_OP\(\s*(\w+)\s*,\s*"([^"]+)"\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*([^,]+?)\s*,'
    r'\s*([^,]+?)\s*,\s*([^,]+?)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)')
GROUP_RE = re.compile(r'^/\*\s*--\s*(.*?)\s*--\s*\*/')
ATTR_RE = re.compile(r'^FVM_ATTR\(\s*(\w+)\s*,\s*"([^"]+)"\s*,\s*(\w+)\s*,\s*(\w+)\s*\)')
MASK_RE = re.compile(r'A\((\w+)\)')


def read_attrs(path):
    """[(ID, json name, KIND)] in attrs.def order."""
    attrs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = ATTR_RE.match(line.strip())
            if m:
                attrs.append((m.group(1), m.group(2), m.group(3)))
    if not attrs:
        raise SystemExit(f"gen_schema: no FVM_ATTR entries in {path}")
    return attrs


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


def kind_schema(kind):
    """The JSON form of an attribute of this kind (attrs.def KIND)."""
    if kind == "FUNC":
        return {"$ref": "#/$defs/name", "description": "a function name"}
    if kind == "INT":
        return {"type": "integer"}
    if kind == "BOOL":
        return {"type": "boolean"}
    if kind == "INTS":
        return {"type": "array", "maxItems": MAX_RANK, "items": {"type": "integer"}}
    if kind == "DTYPE":
        return {"enum": DTYPES}
    if kind == "PLACEMENT":
        return {"enum": PLACEMENTS}
    if kind == "STRING":
        return {"type": "string"}
    if kind == "STRINGS":
        return {"type": "array", "uniqueItems": True, "items": {"$ref": "#/$defs/identifier"}}
    if kind == "REAL":
        return {"type": "number"}
    if kind == "VALUE":
        return {"description": "any JSON value (const reads it as a tensor literal)"}
    raise SystemExit(f"gen_schema: unknown attribute kind {kind}")


def build(ops, attrs):
    by_id = {a[0]: a for a in attrs}
    op_names = [o["name"] for o in ops]

    attr_defs = {}
    for _, name, kind in attrs:
        attr_defs["attr_" + name] = kind_schema(kind)

    per_op = []
    for o in ops:
        names = [by_id[i][1] for i in o["attrs"]]
        required = [by_id[i][1] for i in o["required"]]
        attr_obj = {
            "type": "object",
            "properties": {n: {"$ref": "#/$defs/attr_" + n} for n in names},
            "additionalProperties": False,
        }
        if required:
            attr_obj["required"] = required
        then = {"prefixItems": [True, True, {"if": {"type": "object"}, "then": attr_obj}]}
        if required:
            # Required attributes: position 2 must be the attribute object.
            then["minItems"] = 3
            then["prefixItems"][2] = attr_obj
        per_op.append({
            "if": {"prefixItems": [True, {"const": o["name"]}]},
            "then": then,
        })

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:fedvm:format:1",
        "title": "fedvm program, format version 1",
        "description": (
            "The structure of a fedvm document (format/SPEC.md). Generated by format/gen_schema.py "
            "from vm/ops.def and vm/attrs.def; do not edit. It checks the members of the document and "
            "of functions, the shape of instructions [name, op, {attributes}?, args...], the op names, "
            "and per op the allowed attribute names, their JSON kinds and the required ones. It does not "
            "check the number of arguments of an op, names (defined, unique, used after definition), "
            "type strings, shapes, placements or values; `fedvm check` does. JSON Schema cannot tell "
            "2 from 2.0, nor count bytes: fedvm also requires integer attributes to be written without "
            "a fraction and names to have at most 256 bytes."
        ),
        "type": "object",
        "required": ["fedvm"],
        "additionalProperties": False,
        "properties": {
            "fedvm": {"const": 1, "description": "the format version"},
            "doc": {"type": "string"},
            "form": {
                "type": "object",
                "required": ["kind"],
                "properties": {"kind": {"enum": ["mapreduce", "distribute-aggregate"]}},
                "description": "what fedplan wrote this program as: the round form and its parts (format/PLANS.md)",
            },
            "include": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "paths of included documents, relative to this file's directory",
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
                "pattern": "^[^\\u0000-\\u001f\\u007f]+$",
            },
            "identifier": {"type": "string", "pattern": IDENT},
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
                    "arguments are names. The number of arguments is not checked here."
                ),
                "type": "array",
                "minItems": 2,
                "prefixItems": [
                    {"$ref": "#/$defs/name"},
                    {"$ref": "#/$defs/op"},
                    {"anyOf": [{"type": "object"}, {"$ref": "#/$defs/name"}]},
                ],
                "items": {"$ref": "#/$defs/name"},
                "allOf": per_op,
            },
            **attr_defs,
        },
    }


def main(argv):
    ap = argparse.ArgumentParser(description="Generate the fedvm document JSON Schema from the op table.")
    ap.add_argument("-o", "--output", help="write the schema to this file instead of stdout")
    args = ap.parse_args(argv)
    attrs = read_attrs(os.path.join(ROOT, "vm", "attrs.def"))
    ops = read_ops(os.path.join(ROOT, "vm", "ops.def"), {a[0] for a in attrs})
    text = json.dumps(build(ops, attrs), indent=2, ensure_ascii=True) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
