#!/usr/bin/env bash
# run_hparams.sh BIN - hyperparameters (format/SPEC.md, "Hyperparameters") and include directories:
# defaults and --set overrides against values computed here, attributes that reference them, the
# errors of each kind, the metrics header and checkpoint metadata of a training run and resuming
# with other values, plans carrying them, fmt keeping them, -I and FEDVM_PATH.
set -u
BIN=${1:?usage: tests/run_hparams.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"
PLAN=$(dirname "$BIN")/fedplan
PY=${PYTHON:-python3}

# x <- x - lr * d/dx (x - 3)^2, steps times from x = 0: in closed form 3 - 3 (1 - 2 lr)^steps (exact
# in f32 for these step sizes), printed as the shortest f32 that reads back.
cat >"$T/gd.json" <<'EOF'
{
  "fedvm": 1,
  "hparams": {
    "lr": {"doc": "the step size", "type": "f32[]", "default": 0.25},
    "steps": {"type": "i32[]", "default": 2},
    "target": {"type": "f64[2]", "default": [3, -1]}
  },
  "functions": {
    "loss": {"params": {"x": "f32[]"},
             "body": [["three", "const", {"value": 3.0}], ["d", "sub", "x", "three"], ["l", "mul", "d", "d"]],
             "result": "l"},
    "step": {"params": {"i": "i32[]", "x": "f32[]"},
             "body": [["g", "grad", {"fn": "loss"}, "x"], ["lr", "hparam", {"name": "lr"}],
                      ["s", "mul", "lr", "g"], ["next", "sub", "x", "s"]],
             "result": "next"},
    "main": {"params": {"x": "f32[]"},
             "body": [["r", "fori", {"fn": "step", "n": {"hparam": "steps"}}, "x"]], "result": "r"},
    "target": {"body": [["t", "hparam", {"name": "target"}]], "result": "t"}
  }
}
EOF
NPY=$(python_with numpy) || { echo "run_hparams: needs NumPy"; exit 1; }
gd() { "$NPY" -c "import sys, numpy as np; lr, n = float(sys.argv[1]), int(sys.argv[2]); print(np.float32(3 - 3 * (1 - 2 * lr) ** n))" "$@"; }
expect 0 "defaults" -- "$BIN" run "$T/gd.json" --arg x=0 && has "$T/out" "$(gd 0.25 2)" "lr 0.25, 2 steps"
expect 0 "--set lr" -- "$BIN" run "$T/gd.json" --arg x=0 --set lr=0.125 && has "$T/out" "$(gd 0.125 2)" "lr 0.125"
expect 0 "--set both, = form" -- "$BIN" run "$T/gd.json" --arg x=0 --set=steps=5 --set lr=0.125 &&
    has "$T/out" "$(gd 0.125 5)" "lr 0.125, 5 steps"
expect 0 "the last --set wins" -- "$BIN" run "$T/gd.json" --arg x=0 --set steps=9 --set steps=0 && has "$T/out" "0.0" "0 steps"
expect 0 "a vector" -- "$BIN" run "$T/gd.json" --fn target --set 'target=[0.5, 2]' && has "$T/out" "[0.5, 2.0]" "f64[2]"

# errors, each at its place
expect 1 "unknown name" -- "$BIN" run "$T/gd.json" --arg x=0 --set lrr=1 &&
    has "$T/err" "--set lrr=1: the program has no hyperparameter 'lrr'; did you mean 'lr'?" "suggestion"
expect 1 "wrong dtype" -- "$BIN" run "$T/gd.json" --arg x=0 --set steps=0.5 &&
    has "$T/err" "--set steps=0.5: expected an integer for dtype i32 (a value of i32[] as JSON)" "dtype"
expect 1 "wrong shape" -- "$BIN" run "$T/gd.json" --arg x=0 --set 'target=[1]' && has "$T/err" "--set target=[1]:" "shape"
expect 1 "not JSON" -- "$BIN" check "$T/gd.json" --set lr=fast && has "$T/err" "--set lr=fast: invalid JSON" "JSON"
expect 2 "no =" -- "$BIN" run "$T/gd.json" --set lr && has "$T/err" "--set needs NAME=VALUE, found 'lr'" "usage"
expect 1 "a trip count out of its domain" -- "$BIN" run "$T/gd.json" --arg x=0 --set steps=-1 &&
    has "$T/err" "/functions/main/body/0/2/n: fori: attribute 'n' must be an integer from 0 to 2147483647; hyperparameter 'steps' is -1" "domain"
expect 1 "no hyperparameters at all" -- "$BIN" run tests/train/softmax.json --set lr=1 && has "$T/err" "it declares none" "none"

bad_program() { # bad_program NAME HPARAMS BODY EXPECTED: a program that fedvm check refuses with EXPECTED
    printf '{"fedvm": 1, "hparams": %s, "functions": {"main": {"body": %s, "result": "r"}}}\n' "$2" "$3" >"$T/$1.json"
    expect 1 "$1" -- "$BIN" check "$T/$1.json" && has "$T/err" "$4" "$1"
}
bad_program no_type '{"a": {"default": 1}}' '[["r", "hparam", {"name": "a"}]]' "hyperparameter 'a' has no \"type\", so it sets a new default, but no included file declares 'a'"
bad_program no_default '{"a": {"type": "i32[]"}}' '[["r", "hparam", {"name": "a"}]]' "hyperparameter 'a' needs a \"default\""
bad_program dynamic '{"a": {"type": "f32[?]", "default": [1]}}' '[["r", "hparam", {"name": "a"}]]' "must have a tensor type with a static shape"
bad_program struct '{"a": {"type": "<x=f32[]>", "default": 1}}' '[["r", "hparam", {"name": "a"}]]' "must have a tensor type"
bad_program bad_default '{"a": {"type": "i32[]", "default": "x"}}' '[["r", "hparam", {"name": "a"}]]' "/hparams/a/default"
bad_program unknown_key '{"a": {"type": "i32[]", "default": 1, "min": 0}}' '[["r", "hparam", {"name": "a"}]]' "/hparams/a/min"
bad_program bad_name '{"1a": {"type": "i32[]", "default": 1}}' '[["r", "const", {"value": 1}]]' "a hyperparameter name"
bad_program undeclared '{"alpha": {"type": "f32[]", "default": 1}}' '[["r", "hparam", {"name": "alpah"}]]' "hparam names an undeclared hyperparameter 'alpah'; did you mean 'alpha'?"
bad_program ref_undeclared '{"n": {"type": "i32[]", "default": 1}}' '[["r", "iota", {"shape": [{"hparam": "m"}]}]]' "attribute 'shape' must be"
bad_program ref_float '{"n": {"type": "f32[]", "default": 1}}' '[["k", "random_key", {"n": 0}], ["r", "random_split", {"n": {"hparam": "n"}}, "k"]]' "hyperparameter 'n' is f32[]; attribute 'n' needs an integer scalar"
bad_program ref_vector '{"n": {"type": "i32[2]", "default": [1, 2]}}' '[["k", "const", {"value": [0, 0], "dtype": "u32"}], ["r", "random_split", {"n": {"hparam": "n"}}, "k"]]' "hyperparameter 'n' is i32[2]"
cat >"$T/lib_a.json" <<'EOF'
{"fedvm": 1, "hparams": {"lr": {"type": "f32[]", "default": 1}}}
EOF
printf '{"fedvm": 1, "include": ["lib_a.json"], "hparams": {"lr": {"type": "f32[]", "default": 2}}, "functions": {"main": {"body": [["r", "hparam", {"name": "lr"}]], "result": "r"}}}\n' >"$T/twice.json"
expect 1 "declared twice" -- "$BIN" check "$T/twice.json" && has "$T/err" "hyperparameter 'lr' is also declared at" "twice"
# a new default for an included declaration: the program's own file gives only "default"; --set still wins;
# the value is checked against the declared type where it is written; an included file may not do it
printf '{"fedvm": 1, "include": ["lib_a.json"], "hparams": {"lr": {"doc": "smaller", "default": 0.25}}, "functions": {"main": {"body": [["r", "hparam", {"name": "lr"}]], "result": "r"}}}\n' >"$T/new_default.json"
expect 0 "a new default" -- "$BIN" run "$T/new_default.json" && has "$T/out" "0.25" "the new default"
expect 0 "a new default, --set" -- "$BIN" run "$T/new_default.json" --set lr=4 && has "$T/out" "4.0" "--set over the new default"
for to in json yaml; do
    expect 0 "fmt --to $to keeps a new default" -- "$BIN" fmt "$T/new_default.json" --to $to -o "$T/new_default_fmt.$to" &&
        expect 0 "fmt --to $to: runs alike" -- "$BIN" run "$T/new_default_fmt.$to" && has "$T/out" "0.25" "fmt --to $to"
done
check "fmt writes the new default without a type" -- "$PY" -c '
import json, sys
assert json.load(open(sys.argv[1]))["hparams"] == {"lr": {"doc": "smaller", "default": 0.25}}' "$T/new_default_fmt.json"
sed 's/"default": 0.25/"default": "x"/' "$T/new_default.json" >"$T/new_default_bad.json"
expect 1 "a new default of the wrong type" -- "$BIN" check "$T/new_default_bad.json" &&
    has "$T/err" "new_default_bad.json:1:" "located in the program's file" && has "$T/err" "/hparams/lr/default" "its pointer"
printf '{"fedvm": 1, "include": ["lib_a.json"], "hparams": {"lr": {"default": 3}}}\n' >"$T/lib_b.json"
printf '{"fedvm": 1, "include": ["lib_b.json"], "functions": {"main": {"body": [["r", "hparam", {"name": "lr"}]], "result": "r"}}}\n' >"$T/deep.json"
expect 1 "a new default in an included file" -- "$BIN" check "$T/deep.json" &&
    has "$T/err" "lib_b.json:1:" "located in the included file" &&
    has "$T/err" "only the program's own file may give an included hyperparameter a new default" "included file"

# fmt keeps them; the plan forms carry the bound values
expect 0 "fmt" -- "$BIN" fmt "$T/gd.json" && cp "$T/out" "$T/gd_fmt.json" && has "$T/out" '"steps": {"type": "i32[]", "default": 2}' "fmt"
has "$T/gd_fmt.json" '["r", "fori", {"fn": "step", "n": {"hparam": "steps"}}, "x"]' "fmt keeps the reference"
expect 0 "fmt output runs alike" -- "$BIN" run "$T/gd_fmt.json" --arg x=0 --set lr=0.125 && has "$T/out" "$(gd 0.125 2)" "fmt run"
cat >"$T/fed.json" <<'EOF'
{"fedvm": 1,
 "hparams": {"scale": {"type": "f32[]", "default": 2}, "rounds_inner": {"type": "i32[]", "default": 1}},
 "functions": {
   "times": {"params": {"x": "f32[]"}, "body": [["s", "hparam", {"name": "scale"}], ["y", "mul", "x", "s"]], "result": "y"},
   "main": {"params": {"xs": "{f32[]}@CLIENTS"},
            "body": [["ys", "federated_map", {"fn": "times"}, "xs"], ["t", "federated_sum", "ys"]], "result": "t"}}}
EOF
expect 0 "federated, --set" -- "$BIN" run "$T/fed.json" --arg 'xs=[1, 2, 4]' --set scale=0.5 && has "$T/out" "3.5" "federated sum"
expect 0 "fedplan --set" -- "$PLAN" "$T/fed.json" --to mapreduce --fn main --set scale=0.5 -o "$T/form.json" &&
    has "$T/form.json" '"scale": {"type": "f32[]", "default": 0.5}' "the form's default is the bound value"
expect 0 "the form checks" -- "$BIN" check "$T/form.json"
expect 1 "fedplan --set unknown" -- "$PLAN" "$T/fed.json" --to mapreduce --fn main --set scal=1 && has "$T/err" "did you mean 'scale'?" "fedplan"
expect 0 "fedplan cross-device carries them" -- "$PLAN" programs/fedavg_2nn.json --to cross-device --set epochs=2 -o "$T/plan.json" &&
    check "the client program's hparams" -- "$PY" -c '
import json, sys
p = json.load(open(sys.argv[1]))
h = p["client"]["program"]["hparams"]
assert h["epochs"]["default"] == 2 and h["client_lr"]["default"] == 0.05, h' "$T/plan.json"

# a training run: the header line, the checkpoints' metadata, resuming with other values refused
D="$T/syn.sqlite"
"$BIN" data synthetic --kind fedprox --seed 5 --clients 8 -o "$D" >/dev/null 2>&1 || bad "synthetic data"
TRAIN="programs/fedprox.json --data train=$D --rounds 2 --clients-per-round 3"
if "$BIN" check programs/fedprox.json --set mu=0.5 >/dev/null 2>&1; then
    expect 0 "train with --set" -- "$BIN" run $TRAIN --set mu=0.5 --metrics "$T/m.jsonl" --checkpoint-dir "$T/ck"
    check "metrics header" -- "$PY" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
run = lines[0]["run"]
assert run["program"] == "fedprox.json" and run["seed"] == 0 and run["hparams"]["mu"] == 0.5, run
assert [l["round"] for l in lines[1:]] == [1, 2], lines' "$T/m.jsonl"
    check "checkpoint metadata" -- "$PY" -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
meta = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
assert json.loads(meta["fedvm.hparams"])["mu"] == 0.5, meta' "$T/ck/round-000002.safetensors"
    expect 1 "resume with other values" -- "$BIN" run ${TRAIN/--rounds 2/--rounds 3} --resume "$T/ck" &&
        has "$T/err" "this checkpoint was made with the hyperparameters" "resume refused"
    expect 0 "resume with the same values" -- "$BIN" run ${TRAIN/--rounds 2/--rounds 3} --resume "$T/ck" --set mu=0.5 --metrics "$T/m.jsonl"
    check "resumed: no second header" -- test "$(grep -c '"run"' "$T/m.jsonl")" -eq 1
    expect 0 "the metrics file plots" -- "$BIN" plot "$T/m.jsonl" -o "$T/m.svg"
else
    bad "programs/fedprox.json declares no hyperparameter mu"
fi

# include directories: a copy elsewhere finds programs/lib with -I and FEDVM_PATH
mkdir -p "$T/elsewhere"
cp programs/fedavg.json "$T/elsewhere/"
expect 1 "a copy without -I" -- "$BIN" check "$T/elsewhere/fedavg.json" && has "$T/err" "cannot include" "not found"
expect 0 "-I programs" -- "$BIN" check -I programs "$T/elsewhere/fedavg.json"
expect 0 "-Iprograms" -- "$BIN" check -Iprograms "$T/elsewhere/fedavg.json"
expect 0 "FEDVM_PATH" -- env FEDVM_PATH="$T/none:$PWD/programs" "$BIN" check "$T/elsewhere/fedavg.json"
expect 1 "-I elsewhere still missing" -- "$BIN" check -I "$T/none" "$T/elsewhere/fedavg.json" &&
    has "$T/err" "(nor found in the 1 include directory)" "searched"
expect 0 "fedplan -I" -- "$PLAN" "$T/elsewhere/fedavg.json" --to dot -I programs
expect 2 "-I without a directory" -- "$BIN" check "$T/gd.json" -I && has "$T/err" "-I needs a directory" "usage"

echo "hparams: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
