#!/usr/bin/env bash
# run_beam.sh BINDIR CACHE - Beam pipelines written by 'fedplan --to beam', run on Beam's direct runner
# (npm package apache-beam 2.49.0, installed once into CACHE/node_modules). For every program of
# programs/ with rounds that has a plan, and for FedAvg training over sampled clients in several
# blocks, the pipeline prints the metrics lines of 'fedvm run' and ends with its checkpoint tensors,
# bit for bit; names that would be code if they were pasted into the pipeline stay data; fedvm's
# errors inside the pipeline fail it with fedvm's message; README.md's transcripts, with the
# pipeline's own lines run (tests/check_readme.py --beam), print what the README shows. Run by
# 'make test-beam'.
set -u
BINDIR=${1:?usage: tests/run_beam.sh BINDIR CACHE}
CACHE=${2:?usage: tests/run_beam.sh BINDIR CACHE}
BINDIR=$(cd "$BINDIR" && pwd)
FEDVM=$BINDIR/fedvm PLAN=$BINDIR/fedplan
. "$(dirname "$0")/lib.sh"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "run_beam: node and npm are missing ('make test-beam' installs Debian's nodejs and npm); skipped"
    exit 0
fi
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
if [ ! -f "$CACHE/node_modules/apache-beam/package.json" ]; then
    echo "run_beam: npm install apache-beam@2.49.0 into $CACHE"
    [ -f "$CACHE/package.json" ] || echo '{"name": "fedvm-beam-tests", "private": true}' >"$CACHE/package.json"
    (cd "$CACHE" && npm install apache-beam@2.49.0 --no-audit --no-fund >npm.log 2>&1) ||
        { sed 's/^/  | /' "$CACHE/npm.log" | tail -20; echo "run_beam: npm install failed"; exit 1; }
fi
export NODE_PATH=$CACHE/node_modules

# proven PROGRAM NAME=DATA R N K: fedvm run and the program's Beam pipeline, R rounds of K of N
# clients, seed 3: the same metrics lines and the same final tensors.
proven() {
    local prog=$1 data=$2 r=$3 n=$4 k=$5 name dir
    name=$(basename "$prog" .json)
    dir=$T/$name
    fedvm_rounds "$name" "$prog" "$data" "$r" "$k" "$dir" || return
    # A program that declares "privacy" gets epsilon and delta in fedvm run's lines and in the
    # pipeline's (its server steps account them as fedvm run does): they are compared with them.
    cp "$T/out" "$dir/run.metrics"
    expect 0 "$name: fedplan --to beam" -- "$PLAN" "$prog" --to beam -o "$dir/pipeline.js" || return
    expect 0 "$name: $r rounds of $k of $n clients through Beam" -- node "$dir/pipeline.js" --fedvm "$FEDVM" \
        --data "$data" --clients "$n" --clients-per-round "$k" --rounds "$r" --seed 3 --work-dir "$dir/work" \
        --out "$dir/final.safetensors" --metrics "$dir/metrics.jsonl" || return
    same "$dir/run.metrics" "$T/out" "$name: metrics through Beam"
    same_state "$dir/run/round-$(printf %06d "$r").safetensors" "$dir/final.safetensors" "$name: final state through Beam"
    check "$name: --metrics has a line per round" -- test "$(wc -l <"$dir/metrics.jsonl")" -eq "$r"
}

SYN=$T/synthetic.sqlite
"$FEDVM" data synthetic --kind fedprox --alpha 1 --beta 1 --seed 5 --clients 50 -o "$SYN" >/dev/null 2>&1 || bad "synthetic data"
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

# -- 1. every program with rounds: the pipeline gives the bits of fedvm run, or is refused as
# cross-device refuses; a program that keeps a state on each client has a cross-device plan but no
# pipeline (Beam's workers keep nothing of a client between rounds), refused with that reason
n=0
for prog in programs/*.json; do
    grep -q '"initialize"' "$prog" || continue
    n=$((n + 1))
    if ! "$PLAN" "$prog" --to cross-device >/dev/null 2>"$T/want"; then
        expect 1 "$prog: refused" -- "$PLAN" "$prog" --to beam && same "$T/want" "$T/err" "$prog: refused as cross-device refuses"
        continue
    fi
    if grep -q '"initialize_client"' "$prog"; then
        expect 1 "$prog: refused (client state)" -- "$PLAN" "$prog" --to beam &&
            has "$T/err" "/functions/initialize_client: this program keeps a state on each client (initialize_client), and a Beam pipeline's workers keep nothing of a client from one round to the next" "$prog: client state refused"
        check "$prog: no pipeline written" -- test ! -s "$T/out"
        continue
    fi
    case $(basename "$prog") in
    fedavg.json) proven "$prog" "train=$SYN" 3 50 40 ;; # 3 blocks a round: 16, 16, 8
    fedsgd_linear.json) proven "$prog" "data=programs/data/linear_clients.json" 3 3 2 ;;
    agnostic_fedavg.json) # examples with a domain_id: 10 clients of two domains (tests/algos/reference.py)
        if PYN=$(python_with numpy) && "$PYN" tests/algos/reference.py data "$T/domains.json" --clients 10 --seed 3; then
            proven "$prog" "train=$T/domains.json" 2 10 4
        else
            echo "run_beam: no python3 with numpy; $prog skipped"
        fi ;;
    federated_evaluation.json) proven "$prog" "data=$SYN" 2 50 20 ;;
    fedavgm.json) proven "$prog" "train=$SYN" 2 50 50 ;; # 4 blocks: two levels of merges
    fedavg_emnist.json) proven "$prog" "train=$EMNIST" 2 6 2 ;; # a CNN: 2 rounds of 2 of 6 writers
    fedavg_shakespeare.json) proven "$prog" "train=$SHAKESPEARE" 2 1 1 ;; # an LSTM: 2 rounds of one role
    fedavg_stackoverflow.json) proven "$prog" "train=$STACKOVERFLOW" 2 1 1 ;; # FedJAX's word LSTM: 2 rounds of one user
    fedavg_2nn.json)
        if [ -d "$FASHION" ]; then
            "$FEDVM" data import fashion-mnist --source "$FASHION" --clients 100 -o "$T/fashion.sqlite" >/dev/null 2>&1 ||
                bad "import Fashion-MNIST"
            proven "$prog" "train=$T/fashion.sqlite" 2 100 3
        else
            echo "run_beam: $FASHION missing (make deps installs dataset-fashion-mnist); $prog skipped"
        fi ;;
    *) proven "$prog" "train=$SYN" 2 50 20 ;;
    esac
done
[ "$n" -ge 11 ] && ok || bad "only $n programs with rounds in programs/"
# secure sums and a count over 40 clients, 3 blocks a round
python3 -c 'import json; print(json.dumps([[[(7 * i + 3 * j) % 601 - 300, (11 * i * j) % 97 - 40] for j in range(i % 4 + 1)] for i in range(40)]))' >"$T/counts40.json"
proven tests/xdev/secure_counts.json "data=$T/counts40.json" 2 40 37

# -- 2. names that would run as code if they were pasted into the pipeline: the same bits, no code run
python3 -c 'import json; print(json.dumps([[(7 * i + 3 * j) % 23 / 4 - 2.75 for j in range(i % 5 + 1)] for i in range(40)]))' >"$T/inject.json"
ROOT=$(pwd)
mkdir -p "$T/inject.cwd" && cd "$T/inject.cwd" &&
    proven "$ROOT/tests/beam/inject.json" "\"+process.exit(7)+\"=$T/inject.json" 2 40 20
cd "$ROOT" && check "inject: no code of the program ran" -- test -z "$(ls -A "$T/inject.cwd")"

# -- 3. errors: fedvm's inside the pipeline fail it with fedvm's message; usage errors exit 2
P=$T/fedavg/pipeline.js
beam() { node "$P" --fedvm "$FEDVM" --work-dir "$T/err.work" "$@"; }
expect 1 "a client's data missing (fedvm device fails in a DoFn)" -- beam --data "train=$T/nonexistent.sqlite" --clients 50 &&
    has "$T/err" "$FEDVM device $T/err.work/plan.json" "DoFn error: the command" &&
    has "$T/err" "failed (exit status 1):" "DoFn error: the exit status" &&
    has "$T/err" "$T/nonexistent.sqlite" "DoFn error: fedvm's message"
"$FEDVM" data synthetic --kind fedprox --seed 5 --clients 30 -o "$T/syn30.sqlite" >/dev/null 2>&1
expect 1 "data of another population" -- beam --data "train=$T/syn30.sqlite" --clients 50 --clients-per-round 20 &&
    has "$T/err" "the data has 30 clients, but round 1 selected its clients from 50" "population: fedvm's message"
expect 1 "the initial weights missing (fedvm server fails in the driver)" -- beam --data "train=$SYN" --clients 50 --init "$T/none.safetensors" &&
    has "$T/err" "$FEDVM server $T/err.work/plan.json init" "driver error: the command"
expect 1 "no fedvm" -- node "$P" --fedvm "$T/no/fedvm" --data "train=$SYN" --clients 50 --work-dir "$T/err.work" &&
    has "$T/err" "cannot run $T/no/fedvm server" "no fedvm: said"
expect 1 "no Beam SDK" -- env NODE_PATH= node "$P" --data "train=$SYN" --clients 50 --work-dir "$T/err.work" &&
    has "$T/err" "cannot load Beam's TypeScript SDK" "no SDK: said"
expect 1 "an unknown runner" -- beam --data "train=$SYN" --clients 50 --runner nosuch && has "$T/err" "Unknown runner: nosuch" "runner: Beam's message"
expect 2 "no --clients" -- beam --data "train=$SYN" && has "$T/err" "--clients N is required" "usage: --clients"
expect 2 "no --data" -- beam --clients 5 && has "$T/err" "--data is required" "usage: --data"
expect 2 "an unknown option" -- beam --data "train=$SYN" --clients 5 --round 3 && has "$T/err" "unknown option '--round'" "usage: unknown"
expect 2 "a bad number" -- beam --data "train=$SYN" --clients 5 --rounds=two && has "$T/err" "--rounds needs a whole number >= 1, found 'two'" "usage: number"
expect 2 "more clients a round than in all" -- beam --data "train=$SYN" --clients 5 --clients-per-round 6 &&
    has "$T/err" "cannot select 6 of 5 clients a round" "usage: K > N"
expect 0 "--help" -- node "$P" --help && has "$T/out" "--runner NAME" "--help: the runner" && has "$T/out" "'next' of programs/fedavg.json" "--help: the program"
check "errors leave no final state" -- test ! -e "$T/err.work/state-1.safetensors"

# -- 4. README.md's transcripts, the pipeline's 'node' lines run too: the README shows what the
# pipeline prints (and, in the same block, 'fedvm run' the same lines)
if python3 tests/check_readme.py --beam "$CACHE" "$BINDIR" >"$T/readme.log" 2>&1 &&
    grep -q "skipped.*npm install" "$T/readme.log" && ! grep -q "skipped.*: node " "$T/readme.log"; then
    ok
else
    sed 's/^/  | /' "$T/readme.log" | tail -40
    bad "README.md's transcripts with the Beam pipeline (tests/check_readme.py --beam)"
fi

echo "run_beam: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
