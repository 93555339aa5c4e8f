#!/usr/bin/env bash
# run_xdev.sh BINDIR - cross-device plans (fedplan --to cross-device) run as a deployment would run them:
# every client a separate 'fedvm device' process, the server a 'fedvm server' process per step, every
# checkpoint and update a file. For every program of programs/ with rounds (initialize/next), and for
# FedAvg over sampled clients, the rounds through the plan end with the checkpoint tensors of
# 'fedvm run' bit for bit and print the same metrics; programs without a plan are refused with the
# exact located reason; bad plans, checkpoints and updates are clear errors (exit 1); an update's
# header is read back by Python alone (tests/check_xdev_update.py). The aggregation in stages (one
# 'fedvm device --partial' per block of 16 clients, 'fedvm server merge') gives the same bits, over
# several blocks and merge levels, and its bad partials are clear errors too. Programs that keep a state
# on each client (SCAFFOLD, FedDyn, tests/client_state/counter.json) run through their plans with each
# device keeping its client's state file, one process per client, in batches and in stages: the final
# server state and every client's final state are those of 'fedvm run', bit for bit, also when a device
# is killed in the middle of its update or between its update and its state; bad state files are clear
# errors.
set -u
BINDIR=${1:?usage: tests/run_xdev.sh BINDIR}
FEDVM=$BINDIR/fedvm PLAN=$BINDIR/fedplan
. "$(dirname "$0")/lib.sh"
PY=$(python_with numpy) || PY=

SYN=$T/synthetic.sqlite
"$FEDVM" data synthetic --kind fedprox --alpha 1 --beta 1 --seed 5 -o "$SYN" >/dev/null 2>&1 || bad "synthetic data"
# the EMNIST stand-in, for programs/fedavg_emnist.json: 6 writers, about 200 images each
EMNIST=$T/emnist.sqlite
"$FEDVM" data synthetic --kind emnist --clients 6 -o "$EMNIST" >/dev/null 2>&1 || bad "EMNIST stand-in"
# the Shakespeare stand-in, preprocessed, for programs/fedavg_shakespeare.json: one role of 2 sequences
SHAKESPEARE=$T/shakespeare.sqlite
{ "$FEDVM" data synthetic --kind shakespeare --clients 1 --seed 3 -o "$T/snippets.sqlite" &&
    "$FEDVM" data preprocess shakespeare "$T/snippets.sqlite" -o "$SHAKESPEARE"; } >/dev/null 2>&1 || bad "Shakespeare stand-in"
# the Stack Overflow stand-in, tokenized, for programs/fedavg_stackoverflow.json: one user of 117 sentences
STACKOVERFLOW=$T/stackoverflow.sqlite
{ "$FEDVM" data synthetic --kind stackoverflow --clients 1 --seed 1 -o "$T/sentences.sqlite" &&
    "$FEDVM" data preprocess stackoverflow "$T/sentences.sqlite" -o "$STACKOVERFLOW"; } >/dev/null 2>&1 || bad "Stack Overflow stand-in"
FASHION=${FVM_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}

# rounds PLAN NAME=DATA R N K SEED DIR [batch|staged]: R rounds through the plan, K of N clients a
# round; one device process per client (with 'batch', one per round for all its clients; with
# 'staged', one per block of 16 clients writing its partial, merged by 'fedvm server merge').
# Metrics lines go to DIR/metrics, the state after round r to DIR/s<r>.safetensors. A plan that
# keeps a state on each client: each client's state file is DIR/dev/client-K.safetensors (--state,
# or --state-dir DIR/dev for several clients), and DIR/runs lists the clients of every round. DATA
# may be empty (a plan without data inputs).
rounds() {
    local plan=$1 data=$2 r=$3 n=$4 k=$5 seed=$6 dir=$7 batch=${8:-} round clients c din=() st=() std=()
    [ -n "$data" ] && din=(--data "$data")
    grep -q '"kind": "client_state"' "$plan" && std=(--state-dir "$dir/dev")
    mkdir -p "$dir" && : >"$dir/metrics" && : >"$dir/runs"
    "$FEDVM" server "$plan" init --seed "$seed" --out "$dir/s0.safetensors" || return 1
    for round in $(seq 1 "$r"); do
        clients=$("$FEDVM" server "$plan" prepare --state "$dir/s$((round - 1)).safetensors" --clients "$n" \
            --clients-per-round "$k" --out "$dir/b$round.safetensors") || return 1
        echo $clients >>"$dir/runs"
        if [ "$batch" = staged ]; then
            mkdir -p "$dir/p$round"
            echo "$clients" | split -l 16 - "$dir/p$round/block-" || return 1
            for c in "$dir/p$round"/block-??; do
                "$FEDVM" device "$plan" --checkpoint "$dir/b$round.safetensors" "${din[@]}" \
                    $(printf -- '--index %s ' $(cat "$c")) --partial "$c.safetensors" "${std[@]}" >/dev/null || return 1
            done
            "$FEDVM" server "$plan" merge --state "$dir/s$((round - 1)).safetensors" \
                --broadcast "$dir/b$round.safetensors" "$dir/p$round" --out "$dir/s$round.safetensors" \
                >>"$dir/metrics" || return 1
            continue
        elif [ -n "$batch" ]; then
            "$FEDVM" device "$plan" --checkpoint "$dir/b$round.safetensors" "${din[@]}" \
                $(printf -- '--index %s ' $clients) --out-dir "$dir/u$round" "${std[@]}" >/dev/null || return 1
        else
            mkdir -p "$dir/u$round" "$dir/dev"
            for c in $clients; do
                [ ${#std[@]} -gt 0 ] && st=(--state "$dir/dev/client-$c.safetensors")
                "$FEDVM" device "$plan" --checkpoint "$dir/b$round.safetensors" "${din[@]}" --index "$c" \
                    --out "$dir/u$round/client-$c.safetensors" "${st[@]}" >/dev/null || return 1
            done
        fi
        "$FEDVM" server "$plan" aggregate --state "$dir/s$((round - 1)).safetensors" \
            --broadcast "$dir/b$round.safetensors" "$dir/u$round" --out "$dir/s$round.safetensors" \
            >>"$dir/metrics" || return 1
    done
}

# proven PROGRAM NAME=DATA R N K [batch|staged]: fedvm run and the plan, R rounds of K of N clients,
# seed 3: the same metrics lines and the same final tensors.
proven() {
    local prog=$1 data=$2 r=$3 n=$4 k=$5 batch=${6:-} name dir
    name=$(basename "$prog" .json)
    [ "$batch" = staged ] && name=$name.staged
    dir=$T/$name
    fedvm_rounds "$name" "$prog" "$data" "$r" "$k" "$dir" || return
    # A program that declares "privacy" gets epsilon and delta in fedvm run's lines and in fedvm
    # server's, from the same accountant: they are compared with them.
    cp "$T/out" "$dir.run.metrics"
    expect 0 "$name: fedplan --to cross-device" -- "$PLAN" "$prog" --to cross-device -o "$dir.plan.json" || return
    expect 0 "$name: $r rounds through the plan" -- rounds "$dir.plan.json" "$data" "$r" "$n" "$k" 3 "$dir" $batch ||
        return
    same "$dir.run.metrics" "$dir/metrics" "$name: metrics through the plan"
    same_state "$dir/run/round-$(printf %06d "$r").safetensors" "$dir/s$r.safetensors" "$name: final state through the plan"
    if grep -q '"kind": "client_state"' "$dir.plan.json"; then
        client_states "$name" "$dir"
    fi
}

# client_states NAME DIR: the clients' states the devices kept in DIR/dev are those fedvm run kept in
# DIR/run (every client's latest, bit for bit), and some client took part in several rounds (so its
# file was read back) while others skipped some.
client_states() {
    check "$1: every client's state through the plan" -- python3 tests/check_xdev_states.py \
        "$2/run/client_states.sqlite" "$2/dev" "$2.plan.json"
    check "$1: a client's state carried from one of its rounds to a later one" -- \
        sh -c "tr ' ' '\n' <'$2/runs' | sort | uniq -d | grep -q ."
}

refused() { # refused PROGRAM MESSAGE: fedplan --to cross-device refuses it with exactly this message (exit 1)
    expect 1 "$1 --to cross-device" -- "$PLAN" "$1" --to cross-device && has "$T/err" "$2" "$1 --to cross-device"
    check "$1 --to cross-device: nothing written" -- test ! -s "$T/out"
}

# -- 1. every program with rounds, through its plan: the bits of fedvm run
n=0
for prog in programs/*.json; do
    grep -q '"initialize"' "$prog" || continue
    n=$((n + 1))
    case $(basename "$prog") in
    fedavg.json) proven "$prog" "train=$SYN" 4 30 5 ;; # FedAvg training: 4 rounds of 5 sampled clients
    fedsgd_linear.json) proven "$prog" "data=programs/data/linear_clients.json" 3 3 2 ;;
    federated_evaluation.json) proven "$prog" "data=$SYN" 2 30 4 batch ;;
    fedsgd_logistic.json) # the gradient of a mean loss needs a second exchange
        refused "$prog" "programs/fedsgd_logistic.json:66:9: /functions/loss/body/2: 'value_grad/d.total' (federated_broadcast) sends a value to the clients that depends on the aggregation 'value_grad/total' (federated_sum at programs/fedsgd_logistic.json:66:9, /functions/loss/body/2): a round has one exchange" ;;
    agnostic_fedavg.json) # examples with a domain_id: 10 clients of two domains (tests/algos/reference.py)
        if [ -n "$PY" ] && "$PY" tests/algos/reference.py data "$T/domains.json" --clients 10 --seed 3; then
            proven "$prog" "train=$T/domains.json" 2 10 4
        else
            echo "run_xdev: no python3 with numpy; $prog skipped"
        fi ;;
    mime.json) # the full-batch gradient c at x is averaged before the clients train with it: two exchanges
        refused "$prog" "programs/mime.json:72:9: /functions/next/body/6: 'c_at_clients' (federated_broadcast) sends a value to the clients that depends on the aggregation 'c' (federated_weighted_mean at programs/mime.json:71:9, /functions/next/body/5): a round has one exchange" ;;
    scaffold.json | feddyn.json | ditto.json | fedavg_topk.json) # a state on each client, kept by its device: 4 rounds of 5 of 30 clients
        proven "$prog" "train=$SYN" 4 30 5 ;;
    fedavg_emnist.json) proven "$prog" "train=$EMNIST" 2 6 2 ;; # a CNN: 2 rounds of 2 of 6 writers
    fedavg_shakespeare.json) proven "$prog" "train=$SHAKESPEARE" 2 1 1 ;; # an LSTM: 2 rounds of one role
    fedavg_stackoverflow.json) proven "$prog" "train=$STACKOVERFLOW" 2 1 1 ;; # FedJAX's word LSTM: 2 rounds of one user
    fedavg_2nn.json)
        if [ -d "$FASHION" ]; then
            "$FEDVM" data import fashion-mnist --source "$FASHION" --clients 100 -o "$T/fashion.sqlite" >/dev/null 2>&1 ||
                bad "import Fashion-MNIST"
            proven "$prog" "train=$T/fashion.sqlite" 2 100 3 batch
        else
            echo "run_xdev: $FASHION missing (make deps installs dataset-fashion-mnist); $prog skipped"
        fi ;;
    *) proven "$prog" "train=$SYN" 2 30 4 ;;
    esac
done
[ "$n" -ge 11 ] && ok || bad "only $n programs with rounds in programs/"
# a secure sum (bit width 8) over readings with negative and large values, as rounds
proven tests/xdev/secure_counts.json "data=tests/xdev/counts_data.json" 3 6 4 batch
# the three secure sums (a modulus of 1000, a max_input of 16, a bit width of 4), as rounds
proven tests/xdev/secure_kinds.json "data=tests/xdev/counts_data.json" 3 6 5
# the aggregation in stages: FedAvg over 3 blocks (16, 16, 8: an odd block carried up), then all 50
# clients (4 blocks, two levels of merges); secure sums and a count over 40 clients of JSON data
SYN50=$T/synthetic50.sqlite
"$FEDVM" data synthetic --kind fedprox --alpha 1 --beta 1 --seed 6 --clients 50 -o "$SYN50" >/dev/null 2>&1 || bad "synthetic data (50)"
proven programs/fedavg.json "train=$SYN50" 3 50 40 staged
proven programs/fedavgm.json "train=$SYN50" 2 50 50 staged
"$PY" -c 'import json; print(json.dumps([[[(7 * i + 3 * j) % 601 - 300, (11 * i * j) % 97 - 40] for j in range(i % 4 + 1)] for i in range(40)]))' \
    >"$T/counts40.json" 2>/dev/null || python3 -c 'import json; print(json.dumps([[[(7 * i + 3 * j) % 601 - 300, (11 * i * j) % 97 - 40] for j in range(i % 4 + 1)] for i in range(40)]))' >"$T/counts40.json"
proven tests/xdev/secure_counts.json "data=$T/counts40.json" 2 40 37 staged
# ... the partials of a secure sum with a max_input add exactly, whatever a block's sum (up to 64 here)
proven tests/xdev/secure_kinds.json "data=$T/counts40.json" 2 40 40 staged
# a device whose input to a secure sum is outside [0, max_input] (17 readings, max_input 16) sends nothing
d=$T/secure_kinds
"$PY" -c 'import json; print(json.dumps([[[1, 2]] * 17] + [[[3, 4]]] * 39))' >"$T/counts17.json" 2>/dev/null ||
    python3 -c 'import json; print(json.dumps([[[1, 2]] * 17] + [[[3, 4]]] * 39))' >"$T/counts17.json"
expect 1 "secure_kinds: a device's count above max_input" -- "$FEDVM" device "$d.staged.plan.json" \
    --checkpoint "$d.staged/b1.safetensors" --data "$T/counts17.json" --index 0 --out "$T/over.safetensors" &&
    has "$T/err" "a client's value 17 (element 0) is outside [0, 16], the range of the secure sum (its max_input)" \
        "secure_kinds: the device's error" &&
    has "$T/err" "the error above is in the secure sum 's1' of the client's update" "secure_kinds: the device's error names s1"
check "secure_kinds: nothing written for a count above max_input" -- test ! -e "$T/over.safetensors"

# one device process for a batch of clients writes what one process per client writes
d=$T/fedavg
expect 0 "fedavg: a batch of clients in one device call" -- "$FEDVM" device "$d.plan.json" --checkpoint "$d/b2.safetensors" \
    --data "$SYN" $(for f in "$d"/u2/client-*.safetensors; do c=${f##*client-}; printf -- '--index %s ' "${c%.safetensors}"; done) \
    --out-dir "$T/batch"
for f in "$d"/u2/client-*.safetensors; do same "$f" "$T/batch/$(basename "$f")" "fedavg: $(basename "$f") of the batch"; done
has "$T/out" "$T/batch/client-" "fedavg: the batch lists its updates"
# ... and a client named by its dataset id is that client
c=$(basename "$(ls "$d"/u2/client-*.safetensors | head -1)" .safetensors); c=${c#client-}
expect 0 "fedavg: --client ID" -- "$FEDVM" device "$d.plan.json" --checkpoint "$d/b2.safetensors" --data "train=$SYN" \
    --client "$(printf 'f_%05d' "$c")" --out "$T/by_id.safetensors" && same "$d/u2/client-$c.safetensors" "$T/by_id.safetensors" "fedavg: --client ID"

# -- 1b. client state beyond SCAFFOLD and FedDyn: tests/client_state/counter.json, which has no data (its
# clients' indices, the number of clients, and a first state drawn from each client's own key), 12 rounds
# of 7 of 40 clients, one device process per client; a batch per round (--out-dir, --state-dir); in
# stages (3 blocks of 40 of 50 clients, --partial, --state-dir)
CT=tests/client_state/counter.json
counter() { # counter NAME R N K [batch|staged]: fedvm run and the counter's plan, seed 3
    local name=$1 r=$2 n=$3 k=$4 dir=$T/$1
    mkdir -p "$dir"
    expect 0 "$name: fedvm run" -- "$FEDVM" run "$CT" --clients "$n" --clients-per-round "$k" --rounds "$r" --seed 3 \
        --checkpoint-dir "$dir/run" || return
    # A program that declares "privacy" gets epsilon and delta in fedvm run's lines and in fedvm
    # server's, from the same accountant: they are compared with them.
    cp "$T/out" "$dir.run.metrics"
    expect 0 "$name: fedplan --to cross-device" -- "$PLAN" "$CT" --to cross-device -o "$dir.plan.json" || return
    expect 0 "$name: $r rounds through the plan" -- rounds "$dir.plan.json" "" "$r" "$n" "$k" 3 "$dir" ${5:-} || return
    same "$dir.run.metrics" "$dir/metrics" "$name: metrics through the plan"
    same_state "$dir/run/round-$(printf %06d "$r").safetensors" "$dir/s$r.safetensors" "$name: final state through the plan"
    client_states "$name" "$dir"
}
counter counter 12 40 7
counter counter.batch 6 40 9 batch
counter counter.staged 4 50 40 staged
check "counter: client.state in the plan" -- python3 -c '
import json, sys
plan = json.load(open(sys.argv[1]))
st, ins = plan["client"]["state"], plan["client"]["inputs"]
assert {k: st[k] for k in ("input", "output", "initialize", "type")} == {"input": "client_states", "output": "client_state",
    "initialize": "next.initialize_client", "type": "<count=i32[],noise=f32[1000]>"}, st
assert [i["kind"] for i in ins] == ["client_state", "client_index"], ins
assert [i["kind"] for i in plan["server"]["inputs"]] == ["state", "num_clients"], plan["server"]["inputs"]
assert "next.initialize_client" in plan["client"]["program"]["functions"]
' "$T/counter.plan.json"

# -- 2. an update read by Python alone: header, tensors of the plan, metadata, secure sums reduced, values by hand
if [ -n "$PY" ]; then
    d=$T/fedsgd_linear
    for f in "$d"/u2/*.safetensors; do
        check "fedsgd_linear: $(basename "$f") read by Python" -- "$PY" tests/check_xdev_update.py "$d.plan.json" \
            "$d/b2.safetensors" "$f" programs/data/linear_clients.json
    done
    for d in "$T/secure_counts" "$T/secure_kinds"; do
        for f in "$d"/u1/*.safetensors; do
            check "$(basename "$d"): $(basename "$f") read by Python" -- "$PY" tests/check_xdev_update.py \
                "$d.plan.json" "$d/b1.safetensors" "$f"
        done
    done
else
    echo "run_xdev: no Python with NumPy; the update files are not read back"
fi

# -- 3. what has no cross-device plan, refused with its place and reason
refused programs/histogram.json "programs/histogram.json:27:13: /functions/main: 'main' is not the 'next' of an iterative process (a program with 'initialize' and 'next'): a cross-device plan runs rounds that carry the server state from one to the next; plan a single round with --to mapreduce"
refused tests/forms/two_exchanges.json "tests/forms/two_exchanges.json:14:9: /functions/main/body/1: 'mean_at_clients' (federated_broadcast) sends a value to the clients that depends on the aggregation"
refused tests/xdev/server_input.json "tests/xdev/server_input.json:18:76: /functions/next/params/lr: 'lr' (f32[]@SERVER) is a server input other than the state, the round's 'key' and the number of clients 'num_clients'; the server of a cross-device plan has only these: make it part of the state"
cat >"$T/all_equal.json" <<'EOF'
{"fedvm": 1, "functions": {
  "initialize": {"params": {}, "body": [["z", "const", {"value": 0.0}], ["s", "federated_value", {"placement": "SERVER"}, "z"]], "result": "s"},
  "scale": {"params": {"x": "f32[]", "c": "f32[]"}, "body": [["y", "mul", "x", "c"]], "result": "y"},
  "next": {"params": {"state": "f32[]@SERVER", "x": "{f32[]}@CLIENTS", "c": "f32[]@CLIENTS"},
    "body": [["y", "federated_map", {"fn": "scale"}, "x", "c"], ["m", "federated_sum", "y"],
             ["r", "struct", {"names": ["state", "metrics"]}, "state", "m"]], "result": "r"}}}
EOF
refused "$T/all_equal.json" "$T/all_equal.json:4:77: /functions/next/params/c: 'c' (f32[]@CLIENTS) is one value for all clients; a device reads only its own data ({T}@CLIENTS): broadcast the value from the server state instead"
# a program that keeps a state on each client has a plan, but no Beam pipeline
expect 1 "scaffold --to beam" -- "$PLAN" programs/scaffold.json --to beam &&
    has "$T/err" "programs/scaffold.json:23:26: /functions/initialize_client: this program keeps a state on each client (initialize_client), and a Beam pipeline's workers keep nothing of a client from one round to the next" "scaffold --to beam: refused"
refused tests/xdev/sequence_update.json "tests/xdev/sequence_update.json:34:9: /functions/next/body/1: the update of 'total' (federated_aggregate) is written to safetensors files, which hold tensors only, and its part 'updates.u0' is f32[]*"

# -- 4. bad inputs: a clear error naming the file, exit 1, no crash
d=$T/fedavg P=$T/fedavg.plan.json
dev() { "$FEDVM" device "$P" --data "$SYN" "$@"; }
expect 1 "device: a state as the checkpoint" -- dev --checkpoint "$d/s1.safetensors" --index 0 --out "$T/x.safetensors" &&
    has "$T/err" "$d/s1.safetensors: this is a state file of a cross-device plan, not a broadcast (the file 'fedvm server PLAN prepare' writes)" "device: state as checkpoint"
expect 1 "device: a broadcast of another plan" -- dev --checkpoint "$T/fedadam/b1.safetensors" --index 0 --out "$T/x.safetensors" &&
    has "$T/err" "$T/fedadam/b1.safetensors: this broadcast belongs to another plan (fedvm.plan" "device: foreign broadcast"
expect 1 "device: a client the round did not select" -- dev --checkpoint "$d/b1.safetensors" --index 0 --out "$T/x.safetensors" &&
    has "$T/err" "$d/b1.safetensors: client 0 is not one of the 5 clients round 1 selected" "device: unselected client"
expect 1 "device: an unknown client id" -- dev --checkpoint "$d/b1.safetensors" --client nobody --out "$T/x.safetensors" &&
    has "$T/err" "--client nobody: no client of that id in the data" "device: unknown id"
expect 1 "device: data of another population" -- "$FEDVM" device "$P" --checkpoint "$d/b1.safetensors" --data "$T/fashion.sqlite" --index 2 --out "$T/x.safetensors"
head -c 100 "$d/b1.safetensors" >"$T/truncated.safetensors"
expect 1 "device: a truncated checkpoint" -- dev --checkpoint "$T/truncated.safetensors" --index 2 --out "$T/x.safetensors" &&
    has "$T/err" "$T/truncated.safetensors" "device: truncated checkpoint named"
check "device: nothing written on errors" -- test ! -e "$T/x.safetensors"
sed 's/"plan": 2,/"plan": 3,/' "$P" >"$T/v3.json"
expect 1 "device: a plan of another version" -- "$FEDVM" device "$T/v3.json" --checkpoint "$d/b1.safetensors" --data "$SYN" --index 2 --out "$T/x.safetensors" &&
    has "$T/err" "$T/v3.json:2:11: /plan: plan format version 3; this fedvm reads version 2 (write the plan again with this version's fedplan)" "device: plan version"
expect 1 "server: a plan of another version" -- "$FEDVM" server "$T/v3.json" init --out "$T/x.safetensors" && has "$T/err" "/plan: plan format version 3" "server: plan version"
sed 's/"federated_aggregate"/"federated_agregate"/' "$P" >"$T/typo.json"
expect 1 "server: a plan whose program does not check" -- "$FEDVM" server "$T/typo.json" init --out "$T/x.safetensors" &&
    has "$T/err" "/server/program/functions/next.aggregate/body/" "server: error located in the server program" &&
    has "$T/err" "unknown op 'federated_agregate'; did you mean 'federated_aggregate'?" "server: the typo named"
expect 1 "device: not a plan" -- "$FEDVM" device programs/fedavg.json --checkpoint "$d/b1.safetensors" --data "$SYN" --index 2 --out "$T/x.safetensors" &&
    has "$T/err" "programs/fedavg.json:1:1: /: missing \"plan\": 2 (the plan format version)" "device: a program is not a plan"
printf '{"plan": 1, "kind": "cross-device", ' >"$T/cut.json"
expect 1 "server: a plan cut short" -- "$FEDVM" server "$T/cut.json" init --out "$T/x.safetensors" && has "$T/err" "$T/cut.json:1:" "server: syntax error located"

# a client's state file: refused when it is not one of this plan's clients' states (another program's,
# not safetensors, the server's, another client's), when the device ran the round for that client
# already, when the plan keeps no client state or the call gives none; nothing written
d=$T/scaffold P=$T/scaffold.plan.json
read -r c c2 _ <"$d/runs"
sdev() { "$FEDVM" device "$P" --checkpoint "$d/b1.safetensors" --data "train=$SYN" --index "$c" --out "$T/x.safetensors" "$@"; }
cp "$T/counter/dev/$(ls "$T/counter/dev" | head -1)" "$T/other.safetensors"
expect 1 "device: a client state of another program" -- sdev --state "$T/other.safetensors" &&
    has "$T/err" "$T/other.safetensors: this is not a state of this plan's clients, <w=f32[60,10],b=f32[10]> (client.state)" "state of another type"
printf 'not a safetensors file' >"$T/junk.safetensors"
expect 1 "device: a client state that is not safetensors" -- sdev --state "$T/junk.safetensors" && has "$T/err" "$T/junk.safetensors" "junk state named"
cp "$d/s1.safetensors" "$T/server_state.safetensors"
expect 1 "device: the server's state as the client's" -- sdev --state "$T/server_state.safetensors" &&
    has "$T/err" "$T/server_state.safetensors: this is a state file of a cross-device plan, not a client_state (the file 'fedvm device --state' or '--state-dir' writes)" "server state as client state"
cp "$d/dev/client-$c2.safetensors" "$T/c2.safetensors"
expect 1 "device: another client's state" -- sdev --state "$T/c2.safetensors" &&
    has "$T/err" "$T/c2.safetensors: this is the state of client $c2, not of client $c" "another client's state"
cp "$d/dev/client-$c.safetensors" "$T/c.safetensors"
expect 1 "device: a round run again for a client" -- sdev --state "$T/c.safetensors" &&
    has "$T/err" "$T/c.safetensors: this is client $c's state after round" "round run again" &&
    has "$T/err" "the device has run round" "round run again: said"
same "$T/c.safetensors" "$d/dev/client-$c.safetensors" "refused states: untouched"
expect 1 "device: no --state for a plan with client state" -- sdev &&
    has "$T/err" "$P: this plan keeps a state on each client (its program has initialize_client): give the client's state file, --state FILE (one client) or --state-dir DIR" "no --state"
expect 1 "device: --state for a plan without client state" -- "$FEDVM" device "$T/fedavg.plan.json" --checkpoint "$T/fedavg/b1.safetensors" \
    --data "$SYN" --index "$(head -1 "$T/fedavg/runs" | cut -d' ' -f1)" --out "$T/x.safetensors" --state "$T/new.safetensors" &&
    has "$T/err" "this plan keeps no state on the clients (its program has no initialize_client)" "--state without client state"
expect 1 "device: --out is the client's state file" -- sdev --state "$T/x.safetensors" &&
    has "$T/err" "the update's file is the client's state file (--state)" "out = state"
expect 2 "device: --state for two clients" -- "$FEDVM" device "$P" --checkpoint "$d/b1.safetensors" --data "train=$SYN" \
    --index "$c" --index "$c2" --out-dir "$T/y" --state "$T/new.safetensors" &&
    has "$T/err" "--state FILE is one client's; several clients keep theirs in --state-dir DIR" "--state for two"
check "bad client states: nothing written" -- sh -c "test ! -e '$T/x.safetensors' && test ! -e '$T/new.safetensors' && ! ls '$T' | grep -q pending"
# (a client's first round run again elsewhere: a new state file, and the update the run's)
expect 0 "device: a client's first round, again" -- sdev --state "$T/first.safetensors" &&
    same "$T/x.safetensors" "$d/u1/client-$c.safetensors" "a first round again: the same update"
rm -f "$T/x.safetensors"

# the round's updates, bent one way at a time
agg() { "$FEDVM" server "$P" aggregate --state "$d/s1.safetensors" --broadcast "$d/b2.safetensors" "$T/u" --out "$T/x.safetensors"; }
fresh() { rm -rf "$T/u" && cp -r "$d/u2" "$T/u"; }
first=$(ls "$d/u2" | head -1)
fresh && cp "$d/u1/$(ls "$d/u1" | head -1)" "$T/u/stale.safetensors"
expect 1 "aggregate: an update of the round before" -- agg && has "$T/err" "$T/u/stale.safetensors: this is an update of round 1, and the round being aggregated is 2 (a stale update)" "aggregate: stale"
fresh && cp "$T/u/$first" "$T/u/again.safetensors"
expect 1 "aggregate: two updates of one client" -- agg && has "$T/err" "a second update of client" "aggregate: duplicate"
fresh && rm "$T/u/$first"
expect 1 "aggregate: a client missing" -- agg && has "$T/err" "$T/u: no update of client ${first//[^0-9]/}: round 2 selected 5 clients and 4 of them have an update here" "aggregate: missing client"
fresh && cp "$T/fedadam/u2/$(ls "$T/fedadam/u2" | head -1)" "$T/u/foreign.safetensors"
expect 1 "aggregate: an update of another plan" -- agg && has "$T/err" "$T/u/foreign.safetensors: this update belongs to another plan" "aggregate: foreign"
fresh && head -c 300 "$d/u2/$first" >"$T/u/$first"
expect 1 "aggregate: a truncated update" -- agg && has "$T/err" "$T/u/$first" "aggregate: truncated update named"
fresh && cp "$d/b2.safetensors" "$T/u/broadcast.safetensors"
expect 1 "aggregate: a broadcast among the updates" -- agg && has "$T/err" "$T/u/broadcast.safetensors: this is a broadcast file of a cross-device plan, not an update" "aggregate: not an update"
fresh
expect 1 "aggregate: the broadcast of another round" -- "$FEDVM" server "$P" aggregate --state "$d/s0.safetensors" --broadcast "$d/b2.safetensors" "$T/u" --out "$T/x.safetensors" &&
    has "$T/err" "$d/b2.safetensors: this is the broadcast of round 2, but the state $d/s0.safetensors is of round 0, whose next round is 1" "aggregate: round mismatch"
check "aggregate: nothing written on errors" -- test ! -e "$T/x.safetensors"
expect 0 "aggregate: the untouched updates" -- agg && same "$T/x.safetensors" "$d/s2.safetensors" "aggregate: same state again"
# the partials of a round, bent one way at a time (FedAvg over 50 clients: blocks 0 to 3)
d=$T/fedavgm.staged P=$T/fedavgm.staged.plan.json
mrg() { "$FEDVM" server "$P" merge --state "$d/s1.safetensors" --broadcast "$d/b2.safetensors" "$T/p" --out "$T/m.safetensors"; }
pfresh() { rm -rf "$T/p" && mkdir "$T/p" && cp "$d"/p2/*.safetensors "$T/p"; }
pdev() { "$FEDVM" device "$P" --checkpoint "$d/b2.safetensors" --data "$SYN50" "$@"; }
pfresh && rm "$T/p/block-ab.safetensors"
expect 1 "merge: a block missing" -- mrg && has "$T/err" "$T/p: no partial of block 1: round 2 has 4 blocks of its 50 clients and 3 of them have a partial here" "merge: missing block"
pfresh && cp "$T/p/block-aa.safetensors" "$T/p/again.safetensors"
expect 1 "merge: two partials of one block" -- mrg && has "$T/err" "a second partial of block 0 (the first is" "merge: duplicate"
pfresh && cp "$d/p1/block-aa.safetensors" "$T/p/stale.safetensors"
expect 1 "merge: a partial of the round before" -- mrg && has "$T/err" "$T/p/stale.safetensors: this is a partial of round 1, and the round being aggregated is 2 (a stale partial)" "merge: stale"
pfresh && cp "$T/fedavg/u1/$(ls "$T/fedavg/u1" | head -1)" "$T/p/update.safetensors"
expect 1 "merge: an update among the partials" -- mrg && has "$T/err" "/p/update.safetensors: this is an update file of a cross-device plan, not a partial (the file 'fedvm device --partial' writes)" "merge: not a partial"
pfresh && head -c 200 "$d/p2/block-ac.safetensors" >"$T/p/block-ac.safetensors"
expect 1 "merge: a truncated partial" -- mrg && has "$T/err" "$T/p/block-ac.safetensors" "merge: truncated partial named"
check "merge: nothing written on errors" -- test ! -e "$T/m.safetensors"
pfresh
expect 0 "merge: the untouched partials" -- mrg && same "$T/m.safetensors" "$d/s2.safetensors" "merge: same state again"
set -- $(cat "$d/p2/block-aa")
expect 1 "device --partial: clients of two blocks" -- pdev --index "$1" --index "$(head -1 "$d/p2/block-ab")" --partial "$T/q.safetensors" &&
    has "$T/err" "$d/b2.safetensors: client $1 is in block 0 of round 2 and client $(head -1 "$d/p2/block-ab") in block 1; a partial aggregate is of one block (16 consecutive clients of the round, in index order)" "device --partial: two blocks"
expect 1 "device --partial: part of a block" -- pdev --index "$1" --index "$2" --partial "$T/q.safetensors" &&
    has "$T/err" "$d/b2.safetensors: block 0 of round 2 is the clients $(paste -sd, "$d/p2/block-aa"); 2 of them are given (a partial aggregate is of a whole block)" "device --partial: part of a block"
expect 1 "device --partial: a client twice" -- pdev $(printf -- '--index %s ' "$@") --index "$1" --partial "$T/q.safetensors" &&
    has "$T/err" "client $1 is given twice" "device --partial: twice"
check "device --partial: nothing written on errors" -- test ! -e "$T/q.safetensors"
expect 0 "device --partial: the block's clients in another order" -- pdev $(printf -- '--index %s ' $(tac "$d/p2/block-aa")) --partial "$T/q.safetensors" &&
    same "$T/q.safetensors" "$d/p2/block-aa.safetensors" "device --partial: the order given does not matter"
expect 2 "device: --partial and --out-dir" -- pdev --index "$1" --partial "$T/y.safetensors" --out-dir "$T/y"

# killed_devices: the counter's 12 rounds of 7 of 40 clients again, with two devices killed (the hook
# stops them, SIGKILL ends them). In round KR1 a client's device is killed while it writes its update:
# its state file is as it was, no update is there, and the device run again does the round. In round
# KR2 another's is killed after its update is written and before its new state is renamed into place:
# its state file is as it was, and the server aggregates the update; the client's next round takes the
# new state left pending. The run ends with the metrics, server state and clients' states of fedvm run.
killed_devices() {
    local d=$T/killed P=$T/counter.plan.json round clients c f KR1 KC1 KR2 KC2
    read -r KR1 KC1 KR2 KC2 < <(python3 - "$T/counter/runs" <<'EOF'
import sys
rounds = [l.split() for l in open(sys.argv[1])]
def first(pred):
    return next((r + 1, c) for r, cs in enumerate(rounds) for c in cs if pred(r, c))
r1, c1 = first(lambda r, c: any(c in cs for cs in rounds[:r]))  # a client with a state already
r2, c2 = first(lambda r, c: r + 1 > r1 and c != c1 and any(c in cs for cs in rounds[:r])
               and any(c in cs for cs in rounds[r + 1:]))  # ... that takes part again later
print(r1, c1, r2, c2)
EOF
    )
    check "killed devices: a client to kill in its update and one before its new state" -- test -n "$KC2"
    echo "run_xdev: killed devices: client $KC1 in round $KR1 (in its update), client $KC2 in round $KR2 (before its new state)"
    killdev() { # killdev ROUND CLIENT VAR=VALUE: CLIENT's device in ROUND, stopped by the hook, killed
        rm -f "$T/stalled"
        env "$3" FVM_HOOK_MARK="$T/stalled" LD_PRELOAD="$HOOK" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
            "$FEDVM" device "$P" --checkpoint "$d/b$1.safetensors" --index "$2" --out "$d/u$1/client-$2.safetensors" \
            --state "$d/dev/client-$2.safetensors" >/dev/null 2>&1 &
        local pid=$!
        for _ in $(seq 1 400); do [ -e "$T/stalled" ] && break; sleep 0.05; done
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        test -e "$T/stalled"
    }
    mkdir -p "$d/dev" && : >"$d/metrics"
    "$FEDVM" server "$P" init --seed 3 --out "$d/s0.safetensors" || bad "killed devices: init"
    for round in $(seq 1 12); do
        clients=$("$FEDVM" server "$P" prepare --state "$d/s$((round - 1)).safetensors" --clients 40 \
            --clients-per-round 7 --out "$d/b$round.safetensors") || bad "killed devices: prepare $round"
        mkdir -p "$d/u$round"
        for c in $clients; do
            f=$d/dev/client-$c.safetensors
            if [ "$round" = "$KR1" ] && [ "$c" = "$KC1" ]; then
                cp "$f" "$T/before.safetensors"
                check "killed in its update (round $round, client $c): stopped there" -- \
                    killdev "$round" "$c" FVM_HOOK_STALL="u$round/client-$c.safetensors.tmp"
                same "$f" "$T/before.safetensors" "killed in its update: the client's state as it was"
                check "killed in its update: no update" -- test ! -e "$d/u$round/client-$c.safetensors"
                # ... and run again, below
            elif [ "$round" = "$KR2" ] && [ "$c" = "$KC2" ]; then
                cp "$f" "$T/before.safetensors"
                check "killed before its new state (round $round, client $c): stopped there" -- \
                    killdev "$round" "$c" FVM_HOOK_STALL_RENAME="dev/client-$c.safetensors"
                same "$f" "$T/before.safetensors" "killed before its new state: the client's state as it was"
                check "killed before its new state: the update written, the new state pending" -- \
                    sh -c "test -s '$d/u$round/client-$c.safetensors' && test -s '$f.pending'"
                continue # not run again: the server aggregates its update
            fi
            "$FEDVM" device "$P" --checkpoint "$d/b$round.safetensors" --index "$c" \
                --out "$d/u$round/client-$c.safetensors" --state "$f" >/dev/null || bad "killed devices: device $c, round $round"
        done
        "$FEDVM" server "$P" aggregate --state "$d/s$((round - 1)).safetensors" --broadcast "$d/b$round.safetensors" \
            "$d/u$round" --out "$d/s$round.safetensors" >>"$d/metrics" || bad "killed devices: aggregate $round"
    done
    same "$T/counter.run.metrics" "$d/metrics" "killed devices: the metrics of fedvm run"
    same_state "$T/counter/run/round-000012.safetensors" "$d/s12.safetensors" "killed devices: the final state of fedvm run"
    check "killed devices: every client's state that of fedvm run" -- python3 tests/check_xdev_states.py \
        "$T/counter/run/client_states.sqlite" "$d/dev" "$P"
}

# -- 5. hostile files: what is not a regular file, a file swapped while the round runs, outputs that
# are inputs, a full disk, a process killed in a save, metadata bent
d=$T/fedavg P=$T/fedavg.plan.json
rm -f "$T/x.safetensors"
HOOK=$T/hook.so
cc -shared -fPIC -o "$HOOK" tests/xdev/hook.c -ldl 2>/dev/null || HOOK=
hooked() { # hooked VAR=VALUE... -- CMD...: CMD with tests/xdev/hook.c preloaded and the variables set
    local vars=()
    while [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    env "${vars[@]}" LD_PRELOAD="$HOOK" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$@"
}
mkfifo "$T/fifo.json" "$T/fifo.safetensors"
expect 1 "device: a FIFO as the plan" -- timeout 20 "$FEDVM" device "$T/fifo.json" --checkpoint "$d/b1.safetensors" --data "$SYN" \
    --index 2 --out "$T/x.safetensors" && has "$T/err" "$T/fifo.json: is a FIFO (named pipe), not a regular file" "FIFO plan"
expect 1 "device: a FIFO as the broadcast" -- timeout 20 "$FEDVM" device "$P" --checkpoint "$T/fifo.safetensors" --data "$SYN" \
    --index 2 --out "$T/x.safetensors" && has "$T/err" "$T/fifo.safetensors: is a FIFO (named pipe), not a regular file" "FIFO broadcast"
expect 1 "device: /dev/zero as the broadcast" -- timeout 20 "$FEDVM" device "$P" --checkpoint /dev/zero --data "$SYN" --index 2 \
    --out "$T/x.safetensors" && has "$T/err" "/dev/zero: is a character device, not a regular file" "/dev/zero broadcast"
expect 1 "server: /dev/zero as --init" -- timeout 20 "$FEDVM" server "$P" init --init /dev/zero --out "$T/x.safetensors" &&
    has "$T/err" "/dev/zero: is a character device" "/dev/zero --init"
expect 1 "server: a FIFO as the state" -- timeout 20 "$FEDVM" server "$P" prepare --state "$T/fifo.safetensors" --clients 30 \
    --out "$T/x.safetensors" && has "$T/err" "is a FIFO" "FIFO state"
fresh && mkfifo "$T/u/pipe.safetensors"
expect 1 "aggregate: a FIFO among the updates" -- timeout 20 "$FEDVM" server "$P" aggregate --state "$d/s1.safetensors" \
    --broadcast "$d/b2.safetensors" "$T/u" --out "$T/x.safetensors" && has "$T/err" "$T/u/pipe.safetensors: is a FIFO" "FIFO update"
mkfifo "$T/fifo_data.json"
expect 1 "device: a FIFO as JSON data" -- timeout 20 "$FEDVM" device "$T/fedsgd_linear.plan.json" \
    --checkpoint "$T/fedsgd_linear/b1.safetensors" --data "data=$T/fifo_data.json" --index 0 --out "$T/x.safetensors" &&
    has "$T/err" "$T/fifo_data.json: is a FIFO (named pipe), not a regular file" "FIFO JSON data"
check "non-regular files: nothing written" -- test ! -e "$T/x.safetensors"

# an update replaced between its check and its use (the second open of the file, by the hook): the
# round stops, nothing is written (it was aggregated unchecked: here another client's update twice)
if [ -n "$HOOK" ]; then
    fresh && second=$(ls "$d/u2" | sed -n 2p) && cp "$d/u2/$second" "$T/swap.safetensors"
    expect 1 "aggregate: an update swapped after its check" -- hooked FVM_HOOK_SWAP="$T/u/$first:$T/swap.safetensors" -- \
        "$FEDVM" server "$P" aggregate --state "$d/s1.safetensors" --broadcast "$d/b2.safetensors" "$T/u" --out "$T/x.safetensors" &&
        has "$T/err" "$T/u/$first: changed after it was checked" "swapped update"
    check "swapped update: nothing written" -- test ! -e "$T/x.safetensors"
    # a server killed while it writes the new state: a temporary is left, and the next write of that
    # file removes it
    fresh
    # (not through hooked: $! must be fedvm itself)
    FVM_HOOK_STALL=x.safetensors.tmp FVM_HOOK_MARK="$T/stalled" LD_PRELOAD="$HOOK" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$FEDVM" server "$P" aggregate \
        --state "$d/s1.safetensors" --broadcast "$d/b2.safetensors" "$T/u" --out "$T/x.safetensors" \
        --metrics "$T/killed.jsonl" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 400); do [ -e "$T/stalled" ] && break; sleep 0.05; done
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    check "killed in a save: a temporary left, no state, no metrics line" -- sh -c \
        "ls '$T' | grep -q '^x\.safetensors\.tmp' && test ! -e '$T/x.safetensors' && test ! -s '$T/killed.jsonl'"
    expect 0 "aggregate again after the kill" -- "$FEDVM" server "$P" aggregate --state "$d/s1.safetensors" \
        --broadcast "$d/b2.safetensors" "$T/u" --out "$T/x.safetensors" --metrics "$T/killed.jsonl" &&
        same "$T/x.safetensors" "$d/s2.safetensors" "the state after the kill"
    check "the stale temporary removed" -- sh -c "! ls '$T' | grep -q '^x\.safetensors\.tmp'"
    check "one metrics line" -- test "$(wc -l <"$T/killed.jsonl")" -eq 1
    rm -f "$T/x.safetensors"
    killed_devices
else
    echo "run_xdev: no C compiler for tests/xdev/hook.c; the swapped update and the kill in a save are not tested"
fi

# outputs that are inputs: refused, the input untouched
fresh && cp "$d/s1.safetensors" "$T/s1.copy.safetensors" && cp "$d/b2.safetensors" "$T/b2.copy.safetensors"
sagg() { "$FEDVM" server "$P" aggregate --state "$T/s1.copy.safetensors" --broadcast "$d/b2.safetensors" "$T/u" "$@"; }
expect 1 "aggregate: --out is the state" -- sagg --out "$T/s1.copy.safetensors" &&
    has "$T/err" "$T/s1.copy.safetensors: the new state's file (--out) is the state (--state): writing it would overwrite an input" "out = state"
same "$T/s1.copy.safetensors" "$d/s1.safetensors" "out = state: the state untouched"
expect 1 "aggregate: --out is the state through a symbolic link" -- sh -c "ln -sf '$T/s1.copy.safetensors' '$T/s1.link' &&
    '$FEDVM' server '$P' aggregate --state '$T/s1.link' --broadcast '$d/b2.safetensors' '$T/u' --out '$T/s1.copy.safetensors'" &&
    has "$T/err" "is the state (--state) ($T/s1.link)" "out = state via a link"
expect 1 "aggregate: --out is an update" -- sagg --out "$T/u/$first" &&
    has "$T/err" "$T/u/$first: the new state's file (--out) is in the directory of updates $T/u" "out = an update"
same "$T/u/$first" "$d/u2/$first" "out = an update: the update untouched"
expect 1 "aggregate: --out a new file among the updates" -- sagg --out "$T/u/next.safetensors" &&
    has "$T/err" "where it would be taken for one of them" "out in the updates' directory"
expect 1 "aggregate: --out is the plan" -- sagg --out "$P" && has "$T/err" "is the plan" "out = plan"
expect 1 "aggregate: --metrics is --out (neither there yet)" -- sagg --out "$T/new.safetensors" --metrics "$T/./new.safetensors" &&
    has "$T/err" "the metrics file (--metrics) is the new state's file (--out)" "metrics = out"
expect 1 "aggregate: --metrics is the state" -- sagg --out "$T/new.safetensors" --metrics "$T/s1.copy.safetensors" &&
    has "$T/err" "the metrics file (--metrics) is the state (--state)" "metrics = state"
same "$T/s1.copy.safetensors" "$d/s1.safetensors" "metrics = state: the state untouched"
mkfifo "$T/metrics.fifo"
expect 1 "aggregate: --metrics a FIFO" -- timeout 20 "$FEDVM" server "$P" aggregate --state "$T/s1.copy.safetensors" \
    --broadcast "$d/b2.safetensors" "$T/u" --out "$T/new.safetensors" --metrics "$T/metrics.fifo" &&
    has "$T/err" "$T/metrics.fifo: the metrics file is not a regular file" "metrics FIFO"
check "metrics FIFO: no new state" -- test ! -e "$T/new.safetensors"
expect 1 "device: --out is the broadcast" -- "$FEDVM" device "$P" --checkpoint "$T/b2.copy.safetensors" --data "$SYN" \
    --index "${first//[^0-9]/}" --out "$T/b2.copy.safetensors" && has "$T/err" "is the broadcast (--checkpoint)" "device out = broadcast"
same "$T/b2.copy.safetensors" "$d/b2.safetensors" "device out = broadcast: untouched"
cp "$SYN" "$T/syn.copy.sqlite"
expect 1 "device: --out is the data" -- "$FEDVM" device "$P" --checkpoint "$d/b2.safetensors" --data "train=$T/syn.copy.sqlite" \
    --index "${first//[^0-9]/}" --out "$T/syn.copy.sqlite" && has "$T/err" "is a data file (--data)" "device out = data"
same "$T/syn.copy.sqlite" "$SYN" "device out = data: the data untouched"
expect 1 "prepare: --out is the state" -- "$FEDVM" server "$P" prepare --state "$T/s1.copy.safetensors" --clients 30 \
    --clients-per-round 5 --out "$T/s1.copy.safetensors" && has "$T/err" "the broadcast's file (--out) is the state" "prepare out = state"
expect 1 "init: --out is --init" -- "$FEDVM" server "$P" init --init "$T/s1.copy.safetensors" --out "$T/s1.copy.safetensors" &&
    has "$T/err" "is the initial weights (--init)" "init out = init"
same "$T/s1.copy.safetensors" "$d/s1.safetensors" "the state untouched by every refusal"
# an --out that is a symbolic link: the link is replaced by the file, its target is not written
cp "$d/s1.safetensors" "$T/s1.copy.safetensors"
printf 'keep\n' >"$T/target" && ln -s "$T/target" "$T/link.safetensors"
expect 0 "aggregate: --out a symbolic link" -- sagg --out "$T/link.safetensors" &&
    check "the link replaced, its target untouched" -- sh -c "test ! -L '$T/link.safetensors' && test \"\$(cat '$T/target')\" = keep"

# a full disk (a 64 KiB tmpfs, filled; root only): the new state and its metrics line are written
# both or neither (the state was written and the line lost)
if [ "$(id -u)" -eq 0 ] && mkdir -p "$T/full" && mount -t tmpfs -o size=64k tmpfs "$T/full" 2>/dev/null; then
    trap 'umount "$T/full" 2>/dev/null; rm -rf "$T"' EXIT
    head -c 4096 /dev/zero | tr '\0' x >"$T/full/m.jsonl"
    dd if=/dev/zero of="$T/full/filler" bs=4096 2>/dev/null
    fresh
    expect 1 "aggregate: the metrics file on a full disk" -- sagg --out "$T/new.safetensors" --metrics "$T/full/m.jsonl" &&
        has "$T/err" "$T/full/m.jsonl: cannot write the metrics file: No space left on device" "metrics on a full disk"
    check "metrics on a full disk: no new state" -- sh -c "! ls '$T' | grep -q '^new\.safetensors'"
    check "metrics on a full disk: the file as it was" -- test "$(wc -c <"$T/full/m.jsonl")" -eq 4096
    expect 1 "aggregate: a new metrics file on a full disk" -- sagg --out "$T/new.safetensors" --metrics "$T/full/new.jsonl" &&
        has "$T/err" "No space left on device" "new metrics on a full disk"
    check "new metrics on a full disk: neither file" -- sh -c "test ! -e '$T/full/new.jsonl' && test ! -e '$T/new.safetensors'"
    printf 'before\n' >"$T/m2.jsonl"
    expect 1 "aggregate: the new state on a full disk" -- sagg --out "$T/full/new.safetensors" --metrics "$T/m2.jsonl" &&
        has "$T/err" "$T/full/new.safetensors: cannot write: No space left on device" "state on a full disk"
    check "state on a full disk: no metrics line, no file, no temporary" -- sh -c \
        "test \"\$(cat '$T/m2.jsonl')\" = before && ! ls '$T/full' | grep -q '^new'"
    umount "$T/full"
else
    echo "run_xdev: not root or no tmpfs: the full-disk cases are skipped"
fi

# metadata that fedvm does not write: refused with the key named
bend_meta() { # bend_meta IN OUT KEY VALUE: IN's metadata with KEY set to VALUE, written to OUT
    python3 - "$@" <<'PY'
import json, struct, sys
src, dst, key, value = sys.argv[1:5]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
head["__metadata__"][key] = value
h = json.dumps(head, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
PY
}
c2=${first//[^0-9]/}
for bent in "fedvm.clients=9,3" "fedvm.clients=3,,9" "fedvm.clients=" "fedvm.round=02" "fedvm.round=NaN" "fedvm.round=+2" \
    "fedvm.key=1" "fedvm.population=1e2"; do
    bend_meta "$d/b2.safetensors" "$T/bent.safetensors" "${bent%%=*}" "${bent#*=}"
    expect 1 "device: a broadcast with $bent" -- "$FEDVM" device "$P" --checkpoint "$T/bent.safetensors" --data "$SYN" \
        --index "$c2" --out "$T/x.safetensors" && has "$T/err" "$T/bent.safetensors: metadata ${bent%%=*}" "broadcast $bent"
done
check "bent metadata: nothing written" -- test ! -e "$T/x.safetensors"
# a client state of another run (another seed): refused
d=$T/scaffold P=$T/scaffold.plan.json
read -r c _ <"$d/runs"
bend_meta "$d/dev/client-$c.safetensors" "$T/seed.safetensors" fedvm.seed 4
expect 1 "device: a client state of another seed" -- "$FEDVM" device "$P" --checkpoint "$d/b1.safetensors" --data "$SYN" \
    --index "$c" --out "$T/x.safetensors" --state "$T/seed.safetensors" &&
    has "$T/err" "$T/seed.safetensors: this client state is of a run with seed 4, and the broadcast $d/b1.safetensors is of seed 3" "state of another seed"
check "a state of another seed: nothing written" -- test ! -e "$T/x.safetensors"

# usage errors: exit 2
expect 2 "device: no client" -- "$FEDVM" device "$P" --checkpoint "$d/b1.safetensors" --data "$SYN" --out "$T/x.safetensors"
expect 2 "device: several clients to one file" -- "$FEDVM" device "$P" --checkpoint "$d/b1.safetensors" --data "$SYN" --index 1 --index 2 --out "$T/y.safetensors"
expect 2 "server: an unknown step" -- "$FEDVM" server "$P" finish --out "$T/x.safetensors"
expect 2 "server: merge without partials" -- "$FEDVM" server "$P" merge --state "$d/s0.safetensors" --broadcast "$d/b1.safetensors" --out "$T/x.safetensors" &&
    has "$T/err" "merge needs --broadcast BROADCAST and PARTIALS_DIR" "merge: usage"
expect 2 "server: prepare without --clients" -- "$FEDVM" server "$P" prepare --state "$d/s0.safetensors" --out "$T/x.safetensors"
expect 0 "fedvm help device" -- "$FEDVM" help device && has "$T/out" "usage: fedvm device PLAN" "help device"
expect 0 "fedvm help server" -- "$FEDVM" help server && has "$T/out" "usage: fedvm server PLAN init" "help server"

echo "run_xdev: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
