#!/usr/bin/env bash
# run_plan.sh BIN - the fedplan command: help, exact usage errors and located program errors,
# -o; the dot plan of every program in programs/ through Graphviz (dot
# -Tsvg and dot -Tjson) and compared with the program read independently (check_plan_dot.py
# verify), node and cluster counts of three programs against counts made by hand, and names that
# would break DOT if they were not escaped.
set -u
BIN=${1:?usage: tests/run_plan.sh path/to/fedplan}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") # absolute: one test runs it elsewhere
PY=${PYTHON:-python3}
. "$(dirname "$0")/lib.sh"
CHECK="$(dirname "$0")/check_plan_dot.py"
if ! command -v dot >/dev/null; then echo "run_plan: Graphviz's dot is missing (make deps)"; exit 1; fi

# render NAME: $T/NAME.dot through dot into $T/NAME.svg and $T/NAME.json; dot must not complain.
render() {
    if dot -Tsvg "$T/$1.dot" -o "$T/$1.svg" 2>"$T/$1.doterr" && [ ! -s "$T/$1.doterr" ] &&
        dot -Tjson "$T/$1.dot" -o "$T/$1.json" 2>>"$T/$1.doterr" && [ ! -s "$T/$1.doterr" ] &&
        "$PY" -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$T/$1.svg" 2>>"$T/$1.doterr"; then
        ok
    else
        bad "dot rejects the plan $1"; sed 's/^/  | /' "$T/$1.doterr" | head -5; return 1
    fi
}
summary() { "$PY" "$CHECK" summary "$T/$1.json"; }
members() { "$PY" "$CHECK" members "$T/$1.json" "$2" | tr '\n' ' '; }
is() { # is ACTUAL EXPECTED DESCRIPTION
    if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi
}

# -- help, version, usage errors (exit 2)
FORMATS="dot, mapreduce, distribute-aggregate, cross-device, beam"
expect 0 "--help" -- "$BIN" --help && has "$T/out" "usage: fedplan PROGRAM --to FORMAT [-o OUT] [--fn NAME]" "--help"
check "--help: nothing on stderr" -- test ! -s "$T/err"
has "$T/out" "  dot                    a Graphviz picture of a function's dataflow" "--help: dot, available"
cp "$T/out" "$T/help"
expect 0 "-h" -- "$BIN" -h && same "$T/out" "$T/help" "-h is --help"
expect 0 "--version" -- "$BIN" --version && is "$(cat "$T/out")" "fedplan 0.1.0 (IR format version 1)" "--version"
# usage_error DESCRIPTION MESSAGE -- ARGS...: exit 2, stderr is "fedplan: MESSAGE", a blank line and the help.
usage_error() {
    local what=$1 msg=$2; shift 3
    expect 2 "$what" -- "$BIN" "$@" || return
    { echo "fedplan: $msg"; echo; cat "$T/help"; } >"$T/want"
    same "$T/err" "$T/want" "$what: message and help"
    check "$what: nothing on stdout" -- test ! -s "$T/out"
}
usage_error "no arguments" "no PROGRAM given" --
usage_error "--to without a value" "--to needs a format" -- programs/histogram.json --to
usage_error "-o without a value" "-o needs a file name" -- programs/histogram.json --to dot -o
usage_error "--fn without a value" "--fn needs a function name" -- programs/histogram.json --to dot --fn=
usage_error "unknown option" "unknown option '--bogus'" -- programs/histogram.json --to dot --bogus
usage_error "two programs" "one program at a time; unexpected 'programs/secure_sum.json'" -- \
    programs/histogram.json programs/secure_sum.json --to dot
expect 2 "no --to" -- "$BIN" programs/histogram.json &&
    is "$(cat "$T/err")" "fedplan: --to FORMAT is required; formats: $FORMATS" "no --to"
expect 2 "unknown format" -- "$BIN" programs/histogram.json --to svg &&
    is "$(cat "$T/err")" "fedplan: unknown format 'svg'; formats: $FORMATS" "unknown format"
check "unknown format: nothing on stdout" -- test ! -s "$T/out"

# -- invalid programs and functions (exit 1): every error located, nothing on stdout
cat >"$T/broken.json" <<'J'
{
  "fedvm": 1,
  "functions": {
    "main": {
      "params": {"x": "{f32[]}@CLIENTS"},
      "body": [
        ["y", "ad", "x", "x"],
        ["m", "federated_mean", "z"]
      ],
      "result": "m"
    }
  }
}
J
# errors DESCRIPTION LINE... -- ARGS...: exit 1, stderr is exactly LINE..., stdout empty.
errors() {
    local what=$1 want=()
    shift
    while [ "$1" != -- ]; do want+=("$1"); shift; done
    shift
    expect 1 "$what" -- "$BIN" "$@" || return
    printf '%s\n' "${want[@]}" >"$T/want"
    same "$T/err" "$T/want" "$what: the errors"
    check "$what: nothing on stdout" -- test ! -s "$T/out"
}
errors "invalid program" \
    "$T/broken.json:7:15: /functions/main/body/0/1: unknown op 'ad'; did you mean 'add'?" \
    "$T/broken.json:8:33: /functions/main/body/1/2: undefined name 'z' in an argument; did you mean 'x'?" -- "$T/broken.json" --to dot
errors "missing file" "/nonexistent/p.json: cannot open: No such file or directory" -- /nonexistent/p.json --to dot
errors "--fn unknown" \
    "programs/histogram.json:7:16: /functions: no function 'nope'; expected one of the program's functions: bump, client_histogram, main" \
    -- programs/histogram.json --to dot --fn nope
errors "--fn misspelt" "programs/histogram.json:7:16: /functions: no function 'mian'; did you mean 'main'?" \
    -- programs/histogram.json --to dot --fn mian
cat >"$T/lib_only.json" <<'J'
{"fedvm": 1,
 "functions": {"twice": {"params": {"x": "f32[]"}, "body": [["y", "add", "x", "x"]], "result": "y"}}}
J
errors "no next or main" \
    "$T/lib_only.json:2:15: /functions: no function 'next' or 'main' to make the plan of; name one of the program's functions: twice" \
    "fedplan: choose the function with --fn NAME" -- "$T/lib_only.json" --to dot
expect 0 "--fn on a local function" -- "$BIN" "$T/lib_only.json" --to dot --fn twice && cp "$T/out" "$T/twice.dot" &&
    render twice && is "$(summary twice)" "nodes=3 edges=3 outside=3 crossing=0 hexagons=0 intrinsics=0" "local function: no clusters"

# -- every program with next or main: dot accepts the picture; the output is deterministic
n=0
for f in $(find programs -name '*.json' -o -name '*.yaml' | grep -v '^programs/data/' | sort); do
    name=$(basename "$f"); name=${name%.*}
    "$BIN" "$f" --to dot >"$T/$name.dot" 2>"$T/err"
    rc=$?
    if [ $rc -eq 1 ] && grep -q "no function 'next' or 'main'" "$T/err"; then continue; fi # models and libraries
    if [ $rc -ne 0 ]; then bad "fedplan $f: exit $rc"; sed 's/^/  | /' "$T/err" | head -3; continue; fi
    n=$((n + 1))
    render "$name" && case $f in *.json) check "$f: nodes, edges and clusters against the program" -- \
        "$PY" "$CHECK" verify "$T/$name.json" "$f" ;; esac
    "$BIN" "$f" --to dot >"$T/again.dot" 2>/dev/null
    same "$T/$name.dot" "$T/again.dot" "$f: a second run"
    has "$T/$name.dot" "subgraph cluster_server {" "$f: a SERVER cluster"
    has "$T/$name.dot" "subgraph cluster_clients {" "$f: a CLIENTS cluster"
done
# the programs that define next or main (JSON's functions at four spaces, YAML's at two), counted apart
drawable=$(find programs -name '*.json' -o -name '*.yaml' | grep -v '^programs/data/' |
    xargs grep -lE '^    "(next|main)": \{|^  (next|main):$' | wc -l)
check "every program with next or main drawn (drew $n of $drawable)" -- test "$n" -eq "$drawable" -a "$drawable" -ge 30
# the comparison itself finds a lost edge, a node in the wrong cluster and an intrinsic drawn plain
sed -e '/p1 -> i0/d' "$T/sensor_threshold.dot" >"$T/lost.dot"
sed -e 's/^    \(i2 \[.*\)$/  }\n  subgraph cluster_clients {\n\1/' "$T/sensor_threshold.dot" >"$T/moved.dot"
sed -e 's/shape=hexagon, style="filled,bold"/style=filled/' "$T/sensor_threshold.dot" >"$T/plain.dot"
for m in lost moved plain; do
    dot -Tjson "$T/$m.dot" -o "$T/$m.json" 2>/dev/null
    if "$PY" "$CHECK" verify "$T/$m.json" programs/sensor_threshold.json >"$T/verify" 2>&1; then
        bad "verify accepts the altered picture $m"
    else ok; fi
done
has "$T/verify" "node average (federated_mean): bold=False hexagon=False" "verify: the intrinsic drawn plain"
(cd programs && "$BIN" fedavg_2nn.json --to dot) >"$T/cwd.dot" 2>/dev/null
same "$T/fedavg_2nn.dot" "$T/cwd.dot" "the picture does not depend on the directory"

# -- counted by hand
# sensor_threshold main: parameters readings (clients), threshold (server); instructions
# threshold_at_clients (broadcast, clients), fractions (map, clients), average (mean, server);
# the result (server). Edges: threshold->bcast, readings->map, bcast->map, map->mean, mean->result;
# crossing: threshold->bcast and map->mean.
is "$(summary sensor_threshold)" \
    "nodes=6 edges=5 cluster_server=3 cluster_clients=3 outside=0 crossing=2 hexagons=2 intrinsics=3" "sensor_threshold counts"
is "$(members sensor_threshold cluster_server)" "threshold average returns " "sensor_threshold: SERVER"
is "$(members sensor_threshold cluster_clients)" "readings threshold_at_clients fractions " "sensor_threshold: CLIENTS"
# fedavg_2nn next: 3 parameters, 10 instructions, the result. SERVER: state, model (a field of the
# state), pseudo_grad (weighted mean), metrics (a call aggregating the clients' totals), new_state
# (apply), result (a struct of two server values), the result node. CLIENTS: train, client_keys,
# model_at_clients (broadcast), outs (map), grads, weights, totals (fields of outs). 16 edges
# (1+1+3+1+1+1+2+1+2+2 instruction arguments and the result); 4 crossing: the broadcast's argument,
# both arguments of the weighted mean, and the totals into metrics. 6 intrinsics: the broadcast, the
# map, the weighted mean, the sum, metrics' and new_state's applies (the fields are drawn plain).
is "$(summary fedavg_2nn)" \
    "nodes=15 edges=17 cluster_server=8 cluster_clients=7 outside=0 crossing=4 hexagons=3 intrinsics=6" "fedavg_2nn counts"
is "$(members fedavg_2nn cluster_server)" "state model pseudo_grad totals_sum metrics new_state result returns " "fedavg_2nn: SERVER"
is "$(members fedavg_2nn cluster_clients)" "train client_keys model_at_clients outs grads weights totals " "fedavg_2nn: CLIENTS"
"$PY" "$CHECK" texts "$T/fedavg_2nn.json" >"$T/texts"
has "$T/texts" "fedavg_2nn.json: next" "title"
has "$T/texts" "federated_map(client_update)" "the mapped function"
has "$T/texts" "federated_apply(metrics_from_totals)" "the applied function"
has "$T/texts" "{FashionExample*}@CLIENTS" "a type on an edge"
# mean_variance main: measurements (clients), zero (an unplaced call, outside the clusters),
# stats (federated_aggregate, server), the result (server).
is "$(summary mean_variance)" \
    "nodes=4 edges=3 cluster_server=2 cluster_clients=1 outside=1 crossing=1 hexagons=1 intrinsics=1" "mean_variance counts"
"$PY" "$CHECK" texts "$T/mean_variance.json" >"$T/texts"
has "$T/texts" "accumulate=moments_add" "aggregate's functions"
# --fn draws another function: evaluate (federated_value of the unplaced test data)
expect 0 "--fn evaluate" -- "$BIN" programs/fedavg_2nn.json --to dot --fn evaluate && cp "$T/out" "$T/evaluate.dot" &&
    render evaluate && has "$T/evaluate.dot" "federated_value(SERVER)" "placement shown" &&
    check "--fn evaluate against the program" -- "$PY" "$CHECK" verify "$T/evaluate.json" programs/fedavg_2nn.json evaluate
# a function with literal arguments (each a const node named <instruction>#<argument>) and a destructuring
# (a node per name bound)
for fn in client server_step main; do
    expect 0 "--fn $fn of literals_fields" -- "$BIN" tests/golden/programs/literals_fields.json --to dot --fn $fn &&
        cp "$T/out" "$T/lf_$fn.dot" && render lf_$fn &&
        check "literals_fields --fn $fn against the program" -- "$PY" "$CHECK" verify "$T/lf_$fn.json" \
            tests/golden/programs/literals_fields.json $fn
done
has "$T/lf_client.dot" "half#2" "a literal's const drawn"

# -- names that would break DOT: quotes, backslashes, braces, angle brackets, bars, and escapes
# of DOT's own (\n, \l, \N) that must stay literal text; a file name with a quote.
cat >"$T/we\"ird.json" <<'J'
{
  "fedvm": 1,
  "functions": {
    "clip \"x\" {<a|b>}\\": {
      "params": {"v": "f32[]"},
      "body": [["r", "neg", "v"]],
      "result": "r"
    },
    "main": {
      "params": {"x \"q\"\\n": "{f32[]}@CLIENTS", "s{<>}": "f32[]@SERVER"},
      "body": [
        ["b\\l\\N<br/>", "federated_broadcast", "s{<>}"],
        ["m}\"{ température", "federated_map", {"fn": "clip \"x\" {<a|b>}\\"}, "x \"q\"\\n"],
        ["end\\", "federated_mean", "m}\"{ température"]
      ],
      "result": "end\\"
    }
  }
}
J
expect 0 "escaping: fedplan" -- "$BIN" "$T/we\"ird.json" --to dot && cp "$T/out" "$T/weird.dot" && render weird &&
    check "escaping: nodes, edges and clusters against the program" -- "$PY" "$CHECK" verify "$T/weird.json" "$T/we\"ird.json" &&
    is "$(summary weird)" "nodes=6 edges=4 cluster_server=3 cluster_clients=3 outside=0 crossing=2 hexagons=2 intrinsics=3" \
        "escaping: no name broke a node"
"$PY" "$CHECK" texts "$T/weird.json" >"$T/texts"
for want in 'we"ird.json: main' 'x "q"\n' 's{<>}' 'b\l\N<br/>' 'm}"{ température' 'end\' \
    'federated_map(clip "x" {<a|b>}\)' 'federated_broadcast'; do
    if grep -qxF -- "$want" "$T/texts"; then ok; else bad "escaping: no line '$want' drawn"; sed 's/^/  | /' "$T/texts"; fi
done
expect 0 "escaping: --fn with quotes" -- "$BIN" "$T/we\"ird.json" --to dot --fn 'clip "x" {<a|b>}\' &&
    cp "$T/out" "$T/clip.dot" && render clip && "$PY" "$CHECK" texts "$T/clip.json" >"$T/texts" &&
    has "$T/texts" 'we"ird.json: clip "x" {<a|b>}\' "escaping: the title"

# -- -o: written atomically, the same bytes as stdout; an old file survives a failure
expect 0 "-o" -- "$BIN" programs/sensor_threshold.json --to dot -o "$T/plan.dot" && check "-o: nothing on stdout" -- test ! -s "$T/out"
same "$T/plan.dot" "$T/sensor_threshold.dot" "-o and stdout"
echo old >"$T/keep.dot"
expect 0 "-o replaces a file" -- "$BIN" programs/sensor_threshold.json --to dot -o "$T/keep.dot"
same "$T/keep.dot" "$T/sensor_threshold.dot" "-o replaced"
echo old >"$T/keep.dot"
expect 1 "-o with an invalid program" -- "$BIN" "$T/broken.json" --to dot -o "$T/keep.dot"
check "-o: the old file stays" -- test "$(cat "$T/keep.dot")" = old
expect 2 "-o with an unknown format" -- "$BIN" programs/fedavg.json --to svg -o "$T/keep.dot"
check "-o: the old file stays (format)" -- test "$(cat "$T/keep.dot")" = old
check "-o: no temporary files left" -- test -z "$(ls "$T" | grep '\.tmp')"
if [ -w /dev/full ]; then
    "$BIN" programs/sensor_threshold.json --to dot >/dev/full 2>"$T/err"
    is "$? $(cat "$T/err")" "1 fedplan: cannot write standard output: No space left on device" "a full standard output"
fi
expect 1 "-o into a missing directory" -- "$BIN" programs/sensor_threshold.json --to dot -o "$T/no/such/dir/p.dot" &&
    is "$(cat "$T/err")" "$T/no/such/dir/p.dot: cannot write: No such file or directory" "-o error names the file"

# -- beam: the program's cross-device plan as one escaped literal, then the driver, nothing else
# (tests/check_beam_plan.py); refused exactly as cross-device refuses. Running the pipelines on
# Beam is 'make test-beam' (tests/run_beam.sh).
for prog in programs/fedavg.json programs/fedsgd_linear.json tests/xdev/secure_counts.json tests/beam/inject.json; do
    name=$(basename "$prog" .json)
    expect 0 "$name --to beam" -- "$BIN" "$prog" --to beam -o "$T/$name.beam.js" &&
        expect 0 "$name --to cross-device" -- "$BIN" "$prog" --to cross-device -o "$T/$name.xdev.json" &&
        check "$name: the pipeline holds the plan as data, then the driver" -- \
            "$PY" tests/check_beam_plan.py "$T/$name.beam.js" "$T/$name.xdev.json" format/beam_pipeline.js &&
        "$PY" tests/check_beam_plan.py "$T/$name.beam.js" "$T/$name.xdev.json" format/beam_pipeline.js >"$T/$name.head"
    if command -v node >/dev/null; then
        check "$name: node reads the pipeline" -- node --check "$T/$name.beam.js"
    fi
done
same "$T/fedavg.head" "$T/inject.head" "beam: one header for every program"
lacks "$T/inject.head" "INJECTED" "beam: no name of the program in the header"
expect 0 "beam: stdout is -o" -- "$BIN" programs/fedavg.json --to beam && same "$T/out" "$T/fedavg.beam.js" "beam: stdout and -o"
for prog in programs/histogram.json tests/forms/two_exchanges.json tests/xdev/server_input.json; do
    "$BIN" "$prog" --to cross-device >/dev/null 2>"$T/want"
    expect 1 "$prog --to beam: refused" -- "$BIN" "$prog" --to beam && check "$prog --to beam: nothing on stdout" -- test ! -s "$T/out" &&
        same "$T/want" "$T/err" "$prog --to beam: refused as cross-device refuses"
done

# -- format/PLANS.md: a section per format; its example is today's output
DOC=format/PLANS.md
for f in dot mapreduce distribute-aggregate cross-device beam; do has "$DOC" "## $f" "PLANS.md: $f"; done
"$PY" - "$DOC" "$T/doc" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
for i, m in enumerate(re.finditer(r"<!-- fedplan: (.*?) -->\n```dot\n(.*?)```\n", text, re.S)):
    open("%s.%d.args" % (sys.argv[2], i), "w").write(m.group(1))
    open("%s.%d.dot" % (sys.argv[2], i), "w", encoding="utf-8").write(m.group(2))
PY
for a in "$T"/doc.*.args; do
    [ -e "$a" ] || { bad "PLANS.md: no example"; break; }
    # shellcheck disable=SC2046
    "$BIN" $(cat "$a") >"$T/doc.out" 2>&1
    same "${a%.args}.dot" "$T/doc.out" "PLANS.md example: fedplan $(cat "$a")"
done

# -- the picture in the README is fedavg_2nn's next
if [ -f docs/fedavg_2nn.svg ]; then
    has docs/fedavg_2nn.svg "fedavg_2nn.json: next" "docs/fedavg_2nn.svg: the picture of next"
    check "docs/fedavg_2nn.svg: every node of today's plan" -- "$PY" - "$T/fedavg_2nn.json" docs/fedavg_2nn.svg <<'PY'
import json, sys, xml.dom.minidom as m
g = json.load(open(sys.argv[1]))
drawn = {t.firstChild.data for t in m.parse(sys.argv[2]).getElementsByTagName("text") if t.firstChild}
names = [op["text"] for o in g["objects"] for op in o.get("_ldraw_", []) if op.get("op") == "T"]
missing = [n for n in names if n not in drawn]
assert not missing, missing
PY
fi

echo "plan: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
