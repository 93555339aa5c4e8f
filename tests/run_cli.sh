#!/usr/bin/env bash
# run_cli.sh BIN - the fedvm command's behaviour: help, exit codes, run, check formats, fmt.
set -u
BIN=${1:?usage: tests/run_cli.sh path/to/fedvm}
PY=${PYTHON:-python3}
. "$(dirname "$0")/lib.sh"

SENSOR="programs/sensor_threshold.json --arg readings=@programs/data/readings_0_99.json --arg threshold=24"

# -- help, version, usage errors
expect 0 "--help" -- "$BIN" --help && has "$T/out" "usage: fedvm COMMAND" "--help"
expect 0 "--version" -- "$BIN" --version && has "$T/out" "fedvm 0." "--version"
expect 2 "no arguments" -- "$BIN"
expect 2 "unknown command" -- "$BIN" frobnicate && has "$T/err" "unknown command 'frobnicate'" "unknown command"
for c in run check fmt; do
    expect 0 "$c --help" -- "$BIN" $c --help && has "$T/out" "usage: fedvm $c" "$c --help"
    expect 0 "help $c" -- "$BIN" help $c && has "$T/out" "usage: fedvm $c" "help $c"
done
expect 2 "run without a file" -- "$BIN" run
expect 2 "run with an unknown option" -- "$BIN" run programs/histogram.json --bogus && has "$T/err" "unknown option '--bogus'" "unknown option"
expect 2 "run --clients not a number" -- "$BIN" run programs/histogram.json --clients many
expect 2 "run --arg without =" -- "$BIN" run programs/histogram.json --arg values
expect 2 "check without files" -- "$BIN" check
expect 2 "check with a bad format" -- "$BIN" check --format xml programs/histogram.json
expect 2 "fmt --to bad" -- "$BIN" fmt --to toml programs/histogram.json

# -- run
expect 0 "run sensor" -- "$BIN" run $SENSOR && has "$T/out" "0.75" "sensor result"
expect 0 "shorthand: fedvm FILE" -- "$BIN" $SENSOR && has "$T/out" "0.75" "shorthand result"
expect 0 "run --fn" -- "$BIN" run programs/sensor_threshold.json --fn above --arg reading=5 --arg threshold=3 &&
    has "$T/out" "1.0" "--fn result"
expect 1 "run: missing --arg" -- "$BIN" run programs/histogram.json && has "$T/err" "missing --arg values=VALUE" "missing arg"
expect 1 "run: unknown --arg name" -- "$BIN" run programs/histogram.json --arg valeus=[] && has "$T/err" "did you mean 'values'" "arg suggestion"
expect 1 "run: no such function" -- "$BIN" run programs/histogram.json --fn nope && has "$T/err" "no function 'nope'" "no such fn"
expect 1 "run: missing file" -- "$BIN" run /nonexistent/p.json && has "$T/err" "cannot open" "missing file"
expect 0 "run: rounds" -- "$BIN" run programs/fedsgd_linear.json --arg data=@programs/data/linear_clients.json --rounds 2
if "$PY" -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]; assert len(open(sys.argv[1]).readlines()) == 2' "$T/out"; then ok; else bad "round lines are not JSON"; fi

# seeds: a parameter named key gets the seed's key
cat > "$T/draw.json" <<'J'
{"fedvm": 1, "functions": {"main": {"params": {"key": "u32[2]"},
  "body": [["u", "random_uniform", {"shape": [3]}, "key"]], "result": "u"}}}
J
expect 0 "seed 1" -- "$BIN" run "$T/draw.json" --seed 1 && cp "$T/out" "$T/s1a"
expect 0 "seed 1 again" -- "$BIN" run "$T/draw.json" --seed 1 && same "$T/out" "$T/s1a" "same seed, same draws"
expect 0 "seed 2" -- "$BIN" run "$T/draw.json" --seed 2
if cmp -s "$T/out" "$T/s1a"; then bad "different seeds gave the same draws"; else ok; fi

# -- check
expect 0 "check every program" -- "$BIN" check programs/*.json programs/*.yaml programs/lib/*.json
# every program written back by fmt, as JSON and as YAML, beside a copy of it (its includes resolve
# alike) checks again
cp -r programs "$T/programs"
for f in programs/*.json; do
    for to in json yaml; do
        out="$T/${f%.json}.fmt-check.$to"
        if "$BIN" fmt "$f" --to $to -o "$out" 2>"$T/err" && "$BIN" check "$out" >/dev/null 2>>"$T/err"; then ok; else
            bad "fmt --to $to of $f"; sed 's/^/  | /' "$T/err" | head -3
        fi
    done
done
printf '{"fedvm": 1, "functions": {"main": {"params": {"x": "f32[3]"}, "body": [["y", "ad", "x", "x"]], "result": "y"}}}' > "$T/bad.json"
expect 1 "check invalid (text)" -- "$BIN" check "$T/bad.json" && has "$T/err" "$T/bad.json:1:79: /functions/main/body/0/1: unknown op 'ad'; did you mean 'add'?" "text error"
expect 1 "check invalid (json)" -- "$BIN" check --format json "$T/bad.json"
if "$PY" - "$T/out" <<'P'
import json, sys
errs = json.load(open(sys.argv[1]))
e = errs[0]
assert (e["line"], e["col"], e["pointer"], e["code"]) == (1, 79, "/functions/main/body/0/1", "format"), e
P
then ok; else bad "check --format json output"; fi
expect 1 "check invalid (github)" -- "$BIN" check --format github "$T/bad.json" &&
    has "$T/out" "::error file=$T/bad.json,line=1,col=79::/functions/main/body/0/1: unknown op 'ad'" "github annotation"
expect 1 "check: one valid, one invalid" -- "$BIN" check programs/histogram.json "$T/bad.json" &&
    has "$T/err" "2 files checked, 1 invalid" "summary"

# -- fmt
# Format copies in place (includes resolve relative to the file): the canonical
# form must check, and formatting it again must change nothing.
cp -r programs "$T/p"
for p in "$T"/p/*.json "$T"/p/*.yaml "$T"/p/lib/*.json; do
    expect 0 "fmt $p" -- "$BIN" fmt "$p" -o "$p"
done
for p in "$T"/p/*.json "$T"/p/*.yaml "$T"/p/lib/*.json; do
    expect 0 "check formatted $p" -- "$BIN" check "$p"
    expect 0 "fmt of formatted $p" -- "$BIN" fmt "$p" && same "$T/out" "$p" "fmt fixed point $p"
done
expect 0 "fmt --to yaml" -- "$BIN" fmt programs/sensor_threshold.json --to yaml -o "$T/sensor.yaml"
expect 0 "run the YAML form" -- "$BIN" run "$T/sensor.yaml" --arg readings=@programs/data/readings_0_99.json --arg threshold=24 &&
    has "$T/out" "0.75" "YAML form result"
expect 0 "fmt is a fixed point" -- "$BIN" fmt "$T/sensor.yaml" -o "$T/sensor2.yaml" && same "$T/sensor.yaml" "$T/sensor2.yaml" "fmt fixed point"
echo "keep me" > "$T/keep.json"
expect 1 "fmt of an invalid file" -- "$BIN" fmt "$T/bad.json" -o "$T/keep.json"
if [ "$(cat "$T/keep.json")" = "keep me" ] && [ -z "$(ls "$T" | grep -F .tmp)" ]; then ok; else bad "fmt -o touched the output on error"; fi

# -- grad: the derived program is plain IR that check accepts
for g in "programs/drjax_mean_loss.json loss --wrt w" "programs/fedsgd_logistic.json loss --wrt model" \
         "programs/models/mlp_2nn.json mlp_2nn_loss --wrt model" "programs/models/cnn_mnist.json cnn_loss" \
         "programs/models/char_lstm.json char_lstm_loss --wrt model" \
         "tests/ad/federated_primitives.json sum_from_clients" "tests/ad/federated_primitives.json mean_from_clients" \
         "tests/ad/federated_primitives.json max_of_broadcast" "tests/ad/federated_primitives.json broadcast_map_sum --wrt x"; do
    expect 0 "grad $g" -- "$BIN" grad $g -o "$T/derived.json" &&
        expect 0 "check the derivative of $g" -- "$BIN" check "$T/derived.json"
done
# the derivative of a sum over clients runs and gives one 1 per client (regression: it had no clients)
expect 0 "grad sum_from_clients" -- "$BIN" grad tests/ad/federated_primitives.json sum_from_clients -o "$T/derived.json" &&
    expect 0 "run the derivative of sum_from_clients" -- "$BIN" run "$T/derived.json" --fn grad_sum --arg x=[1,2,3] &&
    same "$T/out" tests/regress/grad_sum_from_clients.expect "one 1 per client"
expect 0 "grad --to yaml" -- "$BIN" grad programs/drjax_mean_loss.json loss --to yaml && has "$T/out" "loss.vjp(w):" "yaml derivative"
expect 1 "grad of an unknown function" -- "$BIN" grad programs/drjax_mean_loss.json nope && has "$T/err" "no function 'nope'" "grad unknown fn"
expect 1 "grad with respect to an integer" -- "$BIN" grad programs/histogram.json bump --wrt value && has "$T/err" "holds no float" "grad of int"
expect 2 "grad without a function" -- "$BIN" grad programs/drjax_mean_loss.json
# with respect to a sequence: rejected as the grad op rejects it (tests/invalid/grad_wrt_sequence.json)
for g in "total" "scaled --wrt xs"; do
    expect 1 "grad $g with respect to a sequence" -- "$BIN" grad tests/ad/sequence_param.json $g &&
        has "$T/err" "differentiating with respect to a sequence ('xs', f32[]*) is not supported" "grad $g wrt a sequence"
done
expect 0 "grad scaled --wrt w (beside a sequence)" -- "$BIN" grad tests/ad/sequence_param.json scaled --wrt w

# -- regressions: tests/regress/NAME.json runs (with the arguments in NAME.args, if any) and prints NAME.expect
for p in tests/regress/*.json; do
    args=()
    [ -f "${p%.json}.args" ] && read -r -a args < "${p%.json}.args"
    expect 0 "regression $p" -- "$BIN" run "$p" "${args[@]}" && same "$T/out" "${p%.json}.expect" "regression $p"
done

# an iterative program without client data runs without --clients (regression: it asked for one)
cat > "$T/counter.json" <<'J'
{"fedvm": 1, "functions": {
  "initialize": {"params": {}, "body": [["z", "const", {"value": 0}], ["s", "federated_value", {"placement": "SERVER"}, "z"]], "result": "s"},
  "bump": {"params": {"c": "i32[]"}, "body": [["one", "const", {"value": 1}], ["n", "add", "c", "one"]], "result": "n"},
  "next": {"params": {"state": "i32[]@SERVER"}, "body": [["n", "federated_apply", {"fn": "bump"}, "state"],
    ["r", "struct", {"names": ["state", "metrics"]}, "n", "n"]], "result": "r"}}}
J
expect 0 "rounds without client data" -- "$BIN" run "$T/counter.json" --rounds 3 && has "$T/out" '{"round": 3, "train": 3}' "counter rounds"

# -- the command line's own errors: "did you mean", help pages, exit statuses
expect 2 "unknown command" -- "$BIN" rn x && has "$T/err" "fedvm: unknown command 'rn'; did you mean 'run'?" "command suggestion"
expect 2 "help for an unknown command" -- "$BIN" help bogus && has "$T/err" "unknown command 'bogus'" "help bogus"
expect 2 "unknown run option" -- "$BIN" run programs/fedavg.json --thread 2 && has "$T/err" "unknown option '--thread'; did you mean '--threads'?" "run option suggestion"
expect 2 "unknown check option" -- "$BIN" check --fromat json x && has "$T/err" "did you mean '--format'?" "check option suggestion"
expect 2 "unknown grad option" -- "$BIN" grad x f --wrtt w && has "$T/err" "did you mean '--wrt'?" "grad option suggestion"
expect 2 "unknown fedplan option" -- "$(dirname "$BIN")/fedplan" x --too dot && has "$T/err" "fedplan: unknown option '--too'; did you mean '--to'?" "fedplan option suggestion"
for c in run check fmt grad plot device server; do
    expect 0 "help $c" -- "$BIN" help "$c" && has "$T/out" "exit status:" "help $c states the exit statuses"
done
for c in import synthetic info head; do
    expect 0 "help data $c" -- "$BIN" data help "$c" && has "$T/out" "exit status:" "help data $c states the exit statuses"
done
expect 2 "unknown data command" -- "$BIN" data ifno x && has "$T/err" "unknown data command 'ifno'; did you mean 'info'?" "data command suggestion"
expect 2 "unknown data option" -- "$BIN" data info --verfy x && has "$T/err" "did you mean '--verify'?" "data option suggestion"
expect 0 "fedvm --help" -- "$BIN" --help && has "$T/out" "init, prepare, aggregate, merge" "--help lists server merge"
expect 0 "one round" -- "$BIN" run "$T/counter.json" --rounds 1 && has "$T/err" "fedvm: 1 round in" "one round, not '1 rounds'"

# -- the progress bar on a 60-column terminal: every update fits (a wrapped one leaves a stale
# line behind), and it shows this round's training loss
"$BIN" data synthetic --kind fedprox --clients 10 --seed 1 -o "$T/bar.sqlite" > /dev/null 2>&1
script -qec "stty cols 60 rows 20; '$BIN' run tests/train/softmax.json --data train='$T/bar.sqlite' --rounds 3" \
    /dev/null > "$T/bar" 2>&1 < /dev/null || true
check "the bar fits 60 columns" -- python3 -c '
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
updates = [u for u in re.split(r"[\r\n]+", text) if u.startswith("round ")]
assert len(updates) >= 3, updates
assert all(len(u) <= 59 for u in updates), [u for u in updates if len(u) > 59]
assert all(" loss " in u for u in updates), updates
' "$T/bar"

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
