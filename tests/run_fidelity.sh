#!/usr/bin/env bash
# run_fidelity.sh BIN - training runs against what they must reproduce: the demo's FedAvg 2NN
# accuracy against an independent NumPy implementation on the same partition, and FedProx's
# stability on Synthetic(1,1) with mu = 1 where mu = 0 is worse, as in Li et al.'s Figure 2, and its
# behaviour with stragglers, as in their Figure 1.
# tests/fidelity/*.py hold the criteria and the measurements behind them.
set -u
BIN=${1:?usage: tests/run_fidelity.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"

# A Python with NumPy and msgpack for the reference (Debian's python3-numpy, python3-msgpack).
PY=$(python_with numpy msgpack)

# beside OUT -- CMD...: starts CMD in the background, stdout to OUT, stderr to OUT.err, to run
# beside the next command; joined DESCRIPTION waits for it, and it must succeed.
beside() {
    beside_out=$1; shift 2
    "$@" >"$beside_out" 2>"$beside_out.err" &
    beside_pid=$!
}
joined() {
    if wait "$beside_pid"; then ok; else bad "$1"; sed 's/^/  | /' "$beside_out.err" | tail -5; fi
}
# judge DESCRIPTION -- CMD...: CMD (a criterion over the runs) must succeed; its measurements
# are shown either way.
judge() {
    local what=$1; shift 2
    if "$@" >"$T/check" 2>&1; then ok; else bad "$what"; fi
    cat "$T/check"
}

# -- FedAvg 2NN on Fashion-MNIST: 'make demo' (100 IID clients, partition seed 0, 10 a round,
# E = 1, B = 10, lr 0.05, 20 rounds) with its seed 0 and seeds 1 and 2, and
# bench/ref_fedavg_numpy.py with seeds 0-2 on the same file; test accuracy every round.
# The two runs of a seed go side by side on one thread each (fedvm gives the same bits on
# any number of threads; OpenBLAS's threads would only compete with the other run).
FASHION=${FVM_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ ! -d "$FASHION" ]; then
    echo "run_fidelity: $FASHION missing (make deps installs dataset-fashion-mnist); FedAvg 2NN against NumPy skipped"
elif [ -z "$PY" ]; then
    echo "run_fidelity: no python3 with numpy and msgpack (make deps installs python3-numpy, python3-msgpack); FedAvg 2NN against NumPy skipped"
else
    FM="$T/fashion_mnist.sqlite"
    expect 0 "import Fashion-MNIST as the demo does" -- "$BIN" data import fashion-mnist --source "$FASHION" \
        --clients 100 --partition iid --seed 0 -o "$FM"
    fedvm_runs= numpy_runs=
    for s in 0 1 2; do
        beside "$T/numpy$s.out" -- "$PY" bench/ref_fedavg_numpy.py --data "$FM" --rounds 20 --clients-per-round 10 \
            --epochs 1 --batch 10 --lr 0.05 --eval-every 1 --seed $s --threads 1
        expect 0 "FedAvg 2NN, seed $s" -- "$BIN" run programs/fedavg_2nn.json --data train="$FM" --data test="$FM:test" \
            --rounds 20 --clients-per-round 10 --eval-every 1 --seed $s --threads 1 --metrics "$T/fedvm$s.jsonl"
        joined "NumPy FedAvg 2NN, seed $s"
        fedvm_runs="$fedvm_runs $T/fedvm$s.jsonl" numpy_runs="$numpy_runs $T/numpy$s.out"
    done
    judge "FedAvg 2NN accuracy against the NumPy reference" -- \
        "$PY" tests/fidelity/fedavg_accuracy.py --fedvm $fedvm_runs --numpy $numpy_runs
fi

# -- FedProx on Synthetic(1,1) (data seed 4), 60 rounds of 10 of the 30 clients, E = 20, B = 10,
# lr 0.01: programs/fedprox.json (mu = 1) and, for mu = 0, programs/fedavg.json (FedProx's round
# with mu = 0 gives its bits, as tests/test_algorithms.c checks), run seeds 0 and 1; evaluate
# on the training split every round gives the training loss over all clients.
# The two runs of a seed go side by side on one thread each (one large client dominates a
# round, so a run does not fill two cores).
SPY=$(python_with json statistics)
if [ -z "$SPY" ]; then
    echo "run_fidelity: no python3; FedProx on Synthetic(1,1) skipped"
else
    SYN="$T/synthetic_1_1.sqlite"
    expect 0 "Synthetic(1,1)" -- "$BIN" data synthetic --kind fedprox --alpha 1 --beta 1 --seed 4 -o "$SYN"
    prox_runs= plain_runs=
    for s in 0 1; do
        RUN="--data train=$SYN --data test=$SYN --rounds 60 --clients-per-round 10 --eval-every 1 --seed $s --threads 1"
        beside "$T/prox$s.out" -- "$BIN" run programs/fedprox.json $RUN --metrics "$T/prox$s.jsonl"
        expect 0 "FedAvg (FedProx with mu = 0) on Synthetic(1,1), seed $s" -- "$BIN" run programs/fedavg.json $RUN \
            --metrics "$T/plain$s.jsonl"
        joined "FedProx (mu = 1) on Synthetic(1,1), seed $s"
        prox_runs="$prox_runs $T/prox$s.jsonl" plain_runs="$plain_runs $T/plain$s.jsonl"
    done
    judge "FedProx loss curves" -- "$SPY" tests/fidelity/fedprox_loss.py --prox $prox_runs --plain $plain_runs
fi

# -- FedProx with stragglers (Li et al.'s Figure 1) on the same data, 40 rounds: at 90%
# stragglers (seeds 0 and 1) and 50% (seed 0), FedAvg dropping the stragglers (mu = 0,
# drop_stragglers), FedProx with mu = 0 keeping their partial work, and FedProx with mu = 1.
# The metrics count the stragglers: about F of the 400 client-rounds (binomial, 5 sd).
if [ -n "$SPY" ]; then
    groups=
    for run in "0.9 0" "0.9 1" "0.5 0"; do
        set -- $run
        F=$1 S=$2 R="$T/strag$1_$2"
        RUN="--data train=$SYN --data test=$SYN --rounds 40 --clients-per-round 10 --eval-every 1 --seed $S --threads 1 --set stragglers=$F"
        beside "$R.drop.out" -- "$BIN" run programs/fedprox.json $RUN --set mu=0 --set drop_stragglers=true --metrics "$R.drop.jsonl"
        expect 0 "FedProx mu = 0 with $F stragglers' partial work, seed $S" -- "$BIN" run programs/fedprox.json $RUN \
            --set mu=0 --metrics "$R.partial.jsonl"
        joined "FedAvg dropping $F stragglers, seed $S"
        expect 0 "FedProx mu = 1 with $F stragglers, seed $S" -- "$BIN" run programs/fedprox.json $RUN --metrics "$R.prox.jsonl"
        groups="$groups --level $F --drop $R.drop.jsonl --partial $R.partial.jsonl --prox $R.prox.jsonl"
        check "$F stragglers counted, dropped only under drop_stragglers, seed $S" -- "$SPY" - "$F" "$R" <<'PY'
import json, sys
f, r = float(sys.argv[1]), sys.argv[2]
def rounds(kind):
    return [json.loads(l)["train"] for l in open("%s.%s.jsonl" % (r, kind)) if l.startswith('{"round"')]
n = 400
for kind in ("drop", "partial", "prox"):
    t = rounds(kind)
    s, d = sum(x["stragglers"] for x in t), sum(x["dropped"] for x in t)
    sd = (n * f * (1 - f)) ** 0.5
    assert len(t) == 40 and abs(s - n * f) <= 5 * sd, (kind, s)
    assert d == (s if kind == "drop" else 0), (kind, s, d)
PY
    done
    judge "FedProx with stragglers" -- "$SPY" tests/fidelity/fedprox_stragglers.py $groups
fi

echo "fidelity: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
