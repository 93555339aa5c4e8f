#!/usr/bin/env python3
"""check_beam_plan.py PIPELINE.js CROSS_DEVICE_PLAN.json TEMPLATE.js - a Beam pipeline written by
'fedplan --to beam', read apart without fedvm: it must be a header of comments and fixed statements,
one string literal holding the plan, and the driver template, and nothing else. The literal, read
as JSON (the writer uses JSON's escapes only, in ASCII), must give the cross-device plan byte for
byte, so no string of the program is anywhere outside it. Prints the header (the same for every
program; run_plan.sh compares them)."""
import json
import re
import sys


def main():
    pipeline, plan_path, template_path = sys.argv[1:4]
    text = open(pipeline, "rb").read()
    plan = open(plan_path, "rb").read()
    template = open(template_path, "rb").read()
    assert text.isascii(), "the pipeline is not ASCII"
    text = text.decode("ascii")
    head, sep, rest = text.partition("const PLAN_TEXT =\n    ")
    assert sep, "no PLAN_TEXT"
    for line in head.splitlines():
        assert line == "" or line.startswith("//") or line in ('#!/usr/bin/env node', '"use strict";'), \
            "unexpected header line %r" % line
    m = re.match(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-f]{4})*"', rest)
    assert m, "PLAN_TEXT is not one JSON-style string literal"
    literal = m.group(0)
    after = rest[len(literal):]
    assert after == ";\n\n" + template.decode("utf-8"), "the text after the plan is not the template"
    decoded = json.loads(literal)
    assert decoded.encode("utf-8") == plan, "the literal is not the cross-device plan"
    print(head, end="")


if __name__ == "__main__":
    main()
