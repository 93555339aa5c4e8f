#!/usr/bin/env bash
# run_train.sh BIN - training runs: datasets bound with --data, client sampling, client keys,
# evaluation, metrics files, determinism, and the errors of each option; one run checked
# value by value against an independent NumPy reference.
set -u
BIN=${1:?usage: tests/run_train.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"

# A Python with NumPy and msgpack (Debian's python3-numpy, python3-msgpack).
PY=$(python_with numpy msgpack)
if [ -z "$PY" ]; then echo "run_train: no python3 with numpy and msgpack (make deps)"; exit 1; fi

P=tests/train/softmax.json
D="$T/syn.sqlite"
"$BIN" data synthetic --kind fedprox --alpha 1 --beta 1 --seed 5 -o "$D" >/dev/null 2>&1 || { echo "run_train: cannot make data"; exit 1; }
TRAIN="--data train=$D --data test=$D:test"

# -- a run, against the reference
expect 0 "train 4 rounds of 5 clients" -- "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --seed 3 --metrics "$T/m.jsonl" &&
    cp "$T/out" "$T/run1" && has "$T/err" "final evaluation: accuracy" "summary line"
check "the NumPy reference agrees" -- "$PY" tests/train/reference.py "$D" 4 5 3 "$T/run1"
check "4 JSON lines" -- test "$(wc -l <"$T/run1")" -eq 4
has "$T/run1" '"eval": {"loss"' "eval after the last round"

# -- checkpoints: the state after every round, read back by the reference
expect 0 "checkpoints" -- "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --seed 3 --checkpoint-dir "$T/ck" &&
    check "a checkpoint per round" -- test "$(ls "$T/ck" | tr '\n' ' ')" = "round-000001.safetensors round-000002.safetensors round-000003.safetensors round-000004.safetensors "
check "the checkpoint holds the reference model" -- "$PY" tests/train/reference.py "$D" 4 5 3 "$T/out" "$T/ck/round-000004.safetensors"
expect 0 "checkpoint every 3" -- "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --checkpoint-dir "$T/ck3" --checkpoint-every 3 &&
    check "rounds 3 and 4 (the last)" -- test "$(ls "$T/ck3" | wc -l)" -eq 2

# -- resume: the same bits as a run never stopped, also after SIGKILL in the middle of a round
R="--rounds 120 --clients-per-round 5 --seed 9"
expect 0 "uninterrupted run" -- "$BIN" run $P $TRAIN $R --checkpoint-dir "$T/full" --checkpoint-every 40 && cp "$T/out" "$T/full.out"
"$BIN" run $P $TRAIN $R --checkpoint-dir "$T/killed" --metrics "$T/killed.jsonl" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 200); do [ -e "$T/killed/round-000003.safetensors" ] && break; sleep 0.05; done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
done_rounds=$(ls "$T/killed" | grep -c '^round-.*safetensors$')
if [ "$done_rounds" -ge 3 ] && [ "$done_rounds" -lt 120 ]; then ok; else bad "killed run left $done_rounds checkpoints"; fi
expect 0 "resume after SIGKILL" -- "$BIN" run $P $TRAIN $R --resume "$T/killed" --metrics "$T/killed.jsonl" &&
    has "$T/err" "resuming after round" "resume note"
same "$T/full/round-000120.safetensors" "$T/killed/round-000120.safetensors" "final state after SIGKILL and resume"
check "metrics: the run's header, then each round once, in order" -- "$PY" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines[0]["run"]["seed"] == 9, lines[0]
rounds = [l["round"] for l in lines[1:]]
assert rounds == list(range(1, 121)), rounds[:10]' "$T/killed.jsonl"
# A run stopped in the middle of round 3's metrics line, its last checkpoint
# round 2's: the resumed file has every round once, whole.
expect 0 "a run to cut short" -- "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --seed 9 --checkpoint-dir "$T/cut" \
    --checkpoint-every 2 --metrics "$T/cut.jsonl" && rm "$T/cut/round-000004.safetensors"
"$PY" -c '
import sys
lines = open(sys.argv[1]).read().splitlines(True)  # the header, rounds 1 and 2, part of 3
open(sys.argv[1], "w").write("".join(lines[:3]) + lines[3][:5])' "$T/cut.jsonl"
expect 0 "resume after round 2 with part of a line for 3" -- "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --seed 9 \
    --resume "$T/cut" --metrics "$T/cut.jsonl"
check "metrics: the header, rounds 1-4 once each, whole lines" -- "$PY" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert "run" in lines[0], lines[0]
rounds = [l["round"] for l in lines[1:]]
assert rounds == [1, 2, 3, 4], rounds' "$T/cut.jsonl"
expect 0 "resume when done" -- "$BIN" run $P $TRAIN $R --resume "$T/killed" && check "nothing to run" -- test ! -s "$T/out"
expect 1 "resume with another seed" -- "$BIN" run $P $TRAIN --rounds 130 --clients-per-round 5 --seed 10 --resume "$T/killed" &&
    has "$T/err" "made with --seed 9, this run has 10" "seed mismatch"
expect 1 "resume with other clients per round" -- "$BIN" run $P $TRAIN --rounds 130 --clients-per-round 6 --seed 9 --resume "$T/killed" &&
    has "$T/err" "clients per round 5, this run has 6" "per-round mismatch"
mkdir -p "$T/empty"
expect 1 "resume from an empty directory" -- "$BIN" run $P $TRAIN --resume "$T/empty" && has "$T/err" "no checkpoint" "empty dir"
# A run killed in the middle of a checkpoint's save (stalled in its fsync by tests/xdev/hook.c, then
# SIGKILL): the temporary it leaves is removed when the run resumes, and the bits are those of a run
# never stopped.
if cc -shared -fPIC -o "$T/hook.so" tests/xdev/hook.c -ldl 2>/dev/null; then
    FVM_HOOK_STALL=round-000003.safetensors.tmp FVM_HOOK_MARK="$T/stalled" LD_PRELOAD="$T/hook.so" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$BIN" run $P $TRAIN $R --checkpoint-dir "$T/midsave" --metrics "$T/midsave.jsonl" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 400); do [ -e "$T/stalled" ] && break; sleep 0.05; done
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    check "killed in a save: its temporary is there" -- sh -c "ls '$T/midsave' | grep -q '^round-000003\.safetensors\.tmp'"
    check "killed in a save: round 3 not saved" -- test ! -e "$T/midsave/round-000003.safetensors"
    expect 0 "resume after SIGKILL in a save" -- "$BIN" run $P $TRAIN $R --resume "$T/midsave" --metrics "$T/midsave.jsonl" &&
        has "$T/err" "resuming after round 2" "resumed from round 2"
    check "the stale temporary removed" -- sh -c "! ls -a '$T/midsave' | grep -q tmp"
    same "$T/full/round-000120.safetensors" "$T/midsave/round-000120.safetensors" "final state after SIGKILL in a save"
    check "metrics after SIGKILL in a save: each round once" -- "$PY" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert "run" in lines[0] and [l["round"] for l in lines[1:]] == list(range(1, 121))' "$T/midsave.jsonl"
else
    echo "run_train: no C compiler for tests/xdev/hook.c; the kill in a save is not tested"
fi
# Checkpoint names are exact: round-0000009 (7 digits, a leading zero) is no checkpoint (it was read
# as round 9 and round-000009.safetensors opened); round-1000000 is, after round-999999.
mkdir -p "$T/seven" && cp "$T/ck/round-000002.safetensors" "$T/seven/" && printf 'not a checkpoint' >"$T/seven/round-0000009.safetensors"
expect 0 "resume beside a 7-digit name with a leading zero" -- "$BIN" run $P $TRAIN --rounds 3 --clients-per-round 5 --seed 3 \
    --resume "$T/seven" && has "$T/err" "resuming after round 2" "7 digits: round 2 is the last checkpoint"
check "7 digits: round 3 written as round-000003" -- test -s "$T/seven/round-000003.safetensors"
# Files that are not regular files: refused by name, at once (a FIFO hung the resume, /dev/zero was
# read without end)
mkdir -p "$T/fifo" && cp "$T/ck/round-000002.safetensors" "$T/fifo/" && mkfifo "$T/fifo/round-000003.safetensors"
expect 1 "resume: the last checkpoint is a FIFO" -- timeout 20 "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --seed 3 \
    --resume "$T/fifo" && has "$T/err" "$T/fifo/round-000003.safetensors: is a FIFO (named pipe), not a regular file" "FIFO checkpoint"
expect 1 "--init /dev/zero" -- timeout 20 "$BIN" run $P $TRAIN --rounds 1 --init /dev/zero &&
    has "$T/err" "/dev/zero: is a character device, not a regular file" "--init /dev/zero"
mkfifo "$T/init.fifo"
expect 1 "--init a FIFO" -- timeout 20 "$BIN" run $P $TRAIN --rounds 1 --init "$T/init.fifo" && has "$T/err" "is a FIFO" "--init FIFO"
mkfifo "$T/metrics.fifo"
expect 1 "resume: the metrics file a FIFO" -- timeout 20 "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --seed 3 \
    --resume "$T/seven" --metrics "$T/metrics.fifo" && has "$T/err" "is a FIFO" "metrics FIFO on resume"

# -- --init: weights from a safetensors file written by an independent writer
"$PY" - "$T/init.safetensors" <<'PY'
import json, struct, sys
import numpy as np
w = np.full((60, 10), 0.01, np.float32); b = np.arange(10, dtype=np.float32)
header = {"w": {"dtype": "F32", "shape": [60, 10], "data_offsets": [0, w.nbytes]},
          "b": {"dtype": "F32", "shape": [10], "data_offsets": [w.nbytes, w.nbytes + b.nbytes]}}
h = json.dumps(header).encode(); h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + w.tobytes() + b.tobytes())
PY
expect 0 "--init" -- "$BIN" run $P $TRAIN --rounds 0 --init "$T/init.safetensors" --checkpoint-dir "$T/ckinit" &&
    has "$T/err" "2 tensors of the initial state" "init count"
expect 0 "--init then a round" -- "$BIN" run $P $TRAIN --rounds 1 --clients-per-round 2 --init "$T/init.safetensors" --checkpoint-dir "$T/ckinit"
check "the run started from the file" -- "$PY" -c '
import json, sys
sys.path.insert(0, "tests")
from reflib import read_safetensors
t, meta = read_safetensors(sys.argv[1])
assert abs(float(t["b"][9]) - 9.0) < 0.5, t["b"]' "$T/ckinit/round-000001.safetensors"
printf 'garbage' >"$T/bad.safetensors"
expect 1 "--init from a bad file" -- "$BIN" run $P $TRAIN --init "$T/bad.safetensors" && has "$T/err" "bad.safetensors" "bad init"
expect 2 "--init and --resume" -- "$BIN" run $P $TRAIN --init "$T/init.safetensors" --resume "$T/ck"
cp "$T/ckinit/round-000001.safetensors" "$T/ckinit1.safetensors"
expect 1 "--init a checkpoint the run writes again" -- "$BIN" run $P $TRAIN --rounds 1 --clients-per-round 2 \
    --init "$T/ckinit/round-000001.safetensors" --checkpoint-dir "$T/ckinit" &&
    has "$T/err" "--init FILE is the checkpoint of round 1 in $T/ckinit, which this run writes again" "init aliases a checkpoint"
same "$T/ckinit1.safetensors" "$T/ckinit/round-000001.safetensors" "the --init checkpoint untouched"

# -- the metrics file: the run's header, then one object per round, with the sampled clients as the
# reference draws them
check "metrics file header, rounds, clients, seconds" -- "$PY" - "$T/m.jsonl" <<'PY'
import json, sys
sys.path.insert(0, "tests/golden")
import ref_random
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines[0] == {"run": {"program": "softmax.json", "seed": 3, "hparams": {}}}, lines[0]
lines = lines[1:]
assert [l["round"] for l in lines] == [1, 2, 3, 4], lines
for l in lines:
    assert l["clients"] == 5 and l["seconds"] >= 0 and l["cpu_seconds"] >= 0, l
    assert ("eval_seconds" in l) == ("eval" in l), l
    assert 0 <= l.get("eval_seconds", 0) <= l["seconds"], l
    assert l["sampled"] == ref_random.sample_clients(3, l["round"], 30, 5), l
assert "eval" in lines[-1] and "eval" not in lines[0]
PY
expect 0 "metrics appends" -- "$BIN" run $P $TRAIN --rounds 1 --clients-per-round 5 --seed 3 --metrics "$T/m.jsonl"
check "metrics appended, with the new run's header" -- test "$(wc -l <"$T/m.jsonl")" -eq 7

# -- determinism
expect 0 "same seed" -- "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --seed 3 && same "$T/run1" "$T/out" "rerun"
expect 0 "another seed" -- "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --seed 4 &&
    if cmp -s "$T/run1" "$T/out"; then bad "seeds 3 and 4 gave the same run"; else ok; fi

# -- backends: the same bits sequentially and on 1, 2 and 3 threads, fused or not
for b in "--backend seq" "--threads 1" "--threads 2" "--threads 3"; do
    expect 0 "backend $b" -- "$BIN" run $P $TRAIN --rounds 4 --clients-per-round 5 --seed 3 $b && same "$T/run1" "$T/out" "$b"
done
expect 0 "all 30 clients on 3 threads" -- "$BIN" run $P $TRAIN --rounds 2 --threads 3 && cp "$T/out" "$T/all3"
expect 0 "all 30 clients in sequence" -- "$BIN" run $P $TRAIN --rounds 2 --backend seq && same "$T/all3" "$T/out" "30 clients"
expect 2 "unknown backend" -- "$BIN" run $P $TRAIN --backend gpu && has "$T/err" "--backend is seq, threads or mpi" "backend name"
expect 2 "--threads with seq" -- "$BIN" run $P $TRAIN --backend seq --threads 2

# -- a model with real matmuls (the demo's 2NN on Fashion-MNIST): BLAS is called from every
# worker thread at once, and the bits must not change
FASHION=${FVM_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ -d "$FASHION" ]; then
    "$BIN" data import fashion-mnist --clients 40 --partition iid -o "$T/fm.sqlite" >/dev/null 2>&1
    FM="programs/fedavg_2nn.json --data train=$T/fm.sqlite --rounds 2 --clients-per-round 4"
    expect 0 "2NN in sequence" -- "$BIN" run $FM --backend seq && cp "$T/out" "$T/fm_seq"
    for b in "--threads 2" "--threads 4"; do
        expect 0 "2NN $b" -- "$BIN" run $FM $b && same "$T/fm_seq" "$T/out" "2NN $b"
    done
else
    echo "run_train: $FASHION missing (make deps installs dataset-fashion-mnist); 2NN checks skipped"
fi

# -- participation: every client, a fixed list, evaluation cadence
expect 0 "every client" -- "$BIN" run $P $TRAIN --rounds 1 --metrics "$T/all.jsonl" && has "$T/all.jsonl" '"clients": 30' "all clients"
lacks "$T/all.jsonl" '"sampled"' "no sample listed for full participation"
expect 0 "fixed client ids" -- "$BIN" run $P $TRAIN --rounds 2 --client-ids f_00007,f_00002 --metrics "$T/ids.jsonl" &&
    has "$T/ids.jsonl" '"clients": 2' "fixed ids"
printf 'f_00002\nf_00007\n' >"$T/ids.txt"
expect 0 "fixed client ids from a file" -- "$BIN" run $P $TRAIN --rounds 2 --client-ids "@$T/ids.txt" &&
    cp "$T/out" "$T/ids_file" && expect 0 "ids again" -- "$BIN" run $P $TRAIN --rounds 2 --client-ids f_00002,f_00007 &&
    same "$T/ids_file" "$T/out" "ids from a file or the command line, in any order"
expect 0 "eval every 2" -- "$BIN" run $P $TRAIN --rounds 5 --clients-per-round 3 --eval-every 2 &&
    check "eval in rounds 2, 4, 5" -- test "$(grep -c '"eval"' "$T/out")" -eq 3
expect 0 "training without evaluation data" -- "$BIN" run $P --data train="$D" --rounds 1 --clients-per-round 2 &&
    lacks "$T/out" '"eval"' "no eval without test data"
expect 0 "zero rounds" -- "$BIN" run $P $TRAIN --rounds 0 && check "no lines" -- test ! -s "$T/out"

# -- an optimizer of programs/lib/optim.json on the clients: FedAvg with client Adam learns
# (on IID synthetic data; on Synthetic(1,1) its clients drift apart, as the program's doc says)
"$BIN" data synthetic --kind fedprox --iid --clients 10 --seed 2 -o "$T/iid.sqlite" >/dev/null 2>&1
expect 0 "FedAvg with Adam on the clients" -- "$BIN" run tests/train/fedavg_client_adam.json --data train="$T/iid.sqlite" \
    --data test="$T/iid.sqlite:test" --rounds 5 --metrics "$T/adam.jsonl"
check "client Adam: the loss falls every round, accuracy above 0.9" -- "$PY" - "$T/adam.jsonl" <<'PY'
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])][1:]  # after the run's header
loss = [l["train"]["loss"] for l in lines]
assert abs(loss[0] - math.log(10)) < 1e-5, loss  # the zero model
assert all(b < a for a, b in zip(loss, loss[1:])), loss
assert loss[-1] < 0.2 * loss[0], loss
assert lines[-1]["eval"]["accuracy"] > 0.9, lines[-1]
PY

# -- keys: initialize's is round 0's, random_fold_in(random_key(S), 0), no round's key; the state
# holds it and, after round r, round r's key (by the independent Threefry of tests/golden)
cat >"$T/keys.json" <<'J'
{"fedvm": 1, "functions": {
  "pair": {"params": {"init": "u32[2]", "round": "u32[2]"}, "body": [
    ["k", "struct", {"names": ["init", "round"]}, "init", "round"]], "result": "k"},
  "initialize": {"params": {"key": "u32[2]@SERVER"}, "body": [
    ["s", "federated_apply", {"fn": "pair"}, "key", "key"]], "result": "s"},
  "next_state": {"params": {"state": "<init=u32[2],round=u32[2]>", "key": "u32[2]"}, "body": [
    ["i", "field", {"name": "init"}, "state"], ["k", "call", {"fn": "pair"}, "i", "key"]], "result": "k"},
  "next": {"params": {"state": "<init=u32[2],round=u32[2]>@SERVER", "key": "u32[2]@SERVER"}, "body": [
    ["s", "federated_apply", {"fn": "next_state"}, "state", "key"],
    ["r", "struct", {"names": ["state", "metrics"]}, "s", "key"]], "result": "r"}}}
J
expect 0 "keys of initialize and rounds" -- "$BIN" run "$T/keys.json" --rounds 2 --seed 7 --checkpoint-dir "$T/keys"
check "initialize's key is round 0's, then round r's" -- "$PY" - "$T/keys" <<'PY'
import sys
sys.path.insert(0, "tests/golden"); sys.path.insert(0, "tests")
import ref_random
from reflib import read_safetensors
for r in (1, 2):
    t, _ = read_safetensors("%s/round-%06d.safetensors" % (sys.argv[1], r))
    assert [int(v) for v in t["init"]] == list(ref_random.round_key(7, 0)), (t["init"], ref_random.round_key(7, 0))
    assert [int(v) for v in t["round"]] == list(ref_random.round_key(7, r)), (r, t["round"])
assert ref_random.round_key(7, 0) not in [ref_random.round_key(7, r) for r in range(1, 1000)]
PY
# -- clients given with --arg (held in memory) are sampled the same way
expect 0 "sampling clients given as JSON" -- "$BIN" run programs/fedsgd_linear.json --arg data=@programs/data/linear_clients.json \
    --rounds 2 --clients-per-round 2 --metrics "$T/lin.jsonl" && has "$T/lin.jsonl" '"clients": 2, "sampled": [' "JSON clients sampled"

# -- --data binding errors: the message names the parameter, the field and the column
cat >"$T/wrong.json" <<'J'
{"fedvm": 1, "functions": {
  "initialize": {"params": {}, "body": [["z", "const", {"value": 0.0}], ["s", "federated_value", {"placement": "SERVER"}, "z"]], "result": "s"},
  "n": {"params": {"d": "<x=f64[60],y=i32[]>*"}, "body": [["c", "sequence_length", "d"], ["f", "cast", {"dtype": "f32"}, "c"]], "result": "f"},
  "next": {"params": {"state": "f32[]@SERVER", "train": "{<x=f64[60],y=i32[]>*}@CLIENTS"}, "body": [
    ["c", "federated_map", {"fn": "n"}, "train"], ["s", "federated_sum", "c"], ["r", "struct", {"names": ["state", "metrics"]}, "s", "s"]], "result": "r"}}}
J
expect 1 "column of another dtype" -- "$BIN" run "$T/wrong.json" --data train="$D" &&
    has "$T/err" "parameter 'train': field 'x' is f64[60], but column 'x' holds f32[60] per example" "dtype mismatch"
sed 's/<x=f64\[60\],y=i32\[\]>/<z=f32[60],y=i32[]>/g' "$T/wrong.json" >"$T/nocol.json"
expect 1 "missing column" -- "$BIN" run "$T/nocol.json" --data train="$D" &&
    has "$T/err" "the file has no column 'z' (it has x f32[60], y i32[])" "missing column"
sed 's/<x=f64\[60\],y=i32\[\]>/<y=i32[]>/g' "$T/wrong.json" >"$T/subset.json"
expect 0 "a subset of the columns" -- "$BIN" run "$T/subset.json" --data train="$D" &&
    check "subset: every example counted" -- grep -qE '^\{"round": 1, "train": [1-9][0-9]*\.0\}$' "$T/out"
sed 's/<x=f64\[60\],y=i32\[\]>/f32[60]/g' "$T/wrong.json" >"$T/nostruct.json"
expect 1 "examples not a struct" -- "$BIN" run "$T/nostruct.json" --data train="$D" &&
    has "$T/err" "the examples must be a struct of named fields" "not a struct"
expect 1 "unknown split" -- "$BIN" run $P --data train="$D:validation" && has "$T/err" "validation" "unknown split"
expect 1 "no such file" -- "$BIN" run $P --data train="$T/none.sqlite" && has "$T/err" "none.sqlite" "no file"
printf 'not a database, just text\n' >"$T/text.sqlite"
expect 1 "not a dataset" -- "$BIN" run $P --data train="$T/text.sqlite" && has "$T/err" "text.sqlite" "not a dataset"
expect 1 "data for a tensor parameter" -- "$BIN" run programs/sensor_threshold.json --data threshold="$D" \
    --arg readings=@programs/data/readings_0_19.json &&
    has "$T/err" "a dataset binds {T*}@CLIENTS" "tensor parameter"

# -- option errors
expect 2 "--data without =" -- "$BIN" run $P --data "$D" && has "$T/err" "--data needs NAME=FILE[:SPLIT]" "--data syntax"
expect 1 "more clients per round than clients" -- "$BIN" run $P $TRAIN --clients-per-round 31 &&
    has "$T/err" "the data has 30 clients" "too many per round"
expect 2 "--clients-per-round 0" -- "$BIN" run $P $TRAIN --clients-per-round 0
expect 1 "unknown client id" -- "$BIN" run $P $TRAIN --client-ids f_00002,nobody && has "$T/err" "no client 'nobody'" "unknown id"
expect 1 "client id twice" -- "$BIN" run $P $TRAIN --client-ids f_00002,f_00002 && has "$T/err" "given twice" "duplicate id"
expect 1 "an argument no function takes" -- "$BIN" run $P $TRAIN --arg bogus=1 &&
    has "$T/err" "neither next nor evaluate has a parameter 'bogus'" "unused arg"
expect 2 "training options for a function" -- "$BIN" run programs/histogram.json --arg values=[1] --clients-per-round 1
expect 2 "--eval-every without evaluation data" -- "$BIN" run $P --data train="$D" --eval-every 2 &&
    has "$T/err" "evaluate needs" "eval without data"

echo "train: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
