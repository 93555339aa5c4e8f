#!/usr/bin/env bash
# run_algos.sh BIN - the federated algorithms FedJAX ships beyond FedAvg and the adaptive
# optimizers, as fedvm programs: each against a NumPy reference written from its paper and
# FedJAX's definition (tests/algos/reference.py) over a few rounds on a small problem, the same
# bits on seq and threads, and a learning check on Synthetic(1,1).
set -u
BIN=${1:?usage: tests/run_algos.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"
PY=$(python_with numpy)
if [ -z "$PY" ]; then echo "run_algos: no python3 with numpy (make deps)"; exit 1; fi
sanitized=false
if ldd "$BIN" 2>/dev/null | grep -qE 'lib(a|t)san'; then sanitized=true; fi
REF=tests/algos/reference.py

# -- small problems (8 clients of 3-12 examples, 3 a round, 5 rounds) with full-batch local steps,
# so the reference need not replay the shuffles
"$PY" tests/client_state/reference.py data "$T/small.json" --clients 8 --seed 3
SMALL="--arg train=@$T/small.json --rounds 5 --clients-per-round 3 --set epochs=3 --set batch_size=100 --set client_lr=0.1 --seed 2"
for a in mime mime_lite; do
    expect 0 "$a: fedvm run" -- "$BIN" run programs/$a.json $SMALL --metrics "$T/$a.jsonl" --checkpoint-dir "$T/$a" &&
        cp "$T/out" "$T/$a.out"
    check "$a: the server state and the training losses match the reference" -- "$PY" $REF \
        check $a "$T/small.json" "$T/$a.jsonl" "$T/$a/round-000005.safetensors" --epochs 3 --lr 0.1
    expect 0 "$a: 2 threads" -- "$BIN" run programs/$a.json $SMALL --threads 2 --checkpoint-dir "$T/${a}t" &&
        same "$T/out" "$T/$a.out" "$a: 2 threads and seq"
    same_state "$T/$a/round-000005.safetensors" "$T/${a}t/round-000005.safetensors" "$a: final state on 2 threads"
done
# the reference can fail: another momentum than the run's, and Mime's correction left out
if "$PY" $REF check mime "$T/small.json" "$T/mime.jsonl" "$T/mime/round-000005.safetensors" --epochs 3 --lr 0.1 \
    --momentum 0.8 >/dev/null 2>&1; then bad "the reference accepts another momentum"; else ok; fi
if "$PY" $REF check mime_lite "$T/small.json" "$T/mime.jsonl" "$T/mime/round-000005.safetensors" --epochs 3 \
    --lr 0.1 >/dev/null 2>&1; then bad "the reference accepts Mime's run as Mime-Lite's"; else ok; fi

# Agnostic FedAvg on clients with a domain per example (two domains, some clients holding one)
"$PY" $REF data "$T/domains.json" --clients 10 --seed 3
A="--arg train=@$T/domains.json --rounds 5 --clients-per-round 4 --set epochs=3 --set batch_size=100 --set client_lr=0.1 --set domain_lr=0.5 --seed 2"
expect 0 "agnostic_fedavg: fedvm run" -- "$BIN" run programs/agnostic_fedavg.json $A --metrics "$T/afl.jsonl" --checkpoint-dir "$T/afl" &&
    cp "$T/out" "$T/afl.out"
check "agnostic_fedavg: the model, the domain weights and the window match the reference" -- "$PY" $REF \
    check agnostic_fedavg "$T/domains.json" "$T/afl.jsonl" "$T/afl/round-000005.safetensors" --epochs 3 --lr 0.1 --domain-lr 0.5
if "$PY" $REF check agnostic_fedavg "$T/domains.json" "$T/afl.jsonl" "$T/afl/round-000005.safetensors" --epochs 3 --lr 0.1 \
    --domain-lr 0.4 >/dev/null 2>&1; then bad "the reference accepts another domain_lr"; else ok; fi
expect 0 "agnostic_fedavg: 2 threads" -- "$BIN" run programs/agnostic_fedavg.json $A --threads 2 && same "$T/out" "$T/afl.out" "agnostic_fedavg: 2 threads and seq"
check "agnostic_fedavg: the weights moved off uniform" -- "$PY" -c "
import json, sys
w = [json.loads(l)['train']['domain_weights'] for l in open('$T/afl.jsonl') if '\"round\"' in l]
assert w[0] == [0.5, 0.5] and abs(w[-1][0] - 0.5) > 0.01, w"

# -- learning: on Synthetic(1,1) (30 clients, 10 a round, 30 rounds of one local epoch, batches of 10,
# client_lr 0.003, momentum 0.5), Mime and Mime-Lite end with a lower loss over all clients' training
# examples than FedAvg with the same client steps, as Karimireddy et al. find on heterogeneous clients
if ! $sanitized; then
    S30="$T/syn30.sqlite"
    expect 0 "Synthetic(1,1), 30 clients" -- "$BIN" data synthetic --kind fedprox --alpha 1 --beta 1 --seed 4 -o "$S30"
    L="--data train=$S30 --data test=$S30 --rounds 30 --clients-per-round 10 --seed 0 --threads 2 --set epochs=1 --set client_lr=0.003"
    expect 0 "fedavg on Synthetic(1,1)" -- "$BIN" run programs/fedavg.json $L --metrics "$T/learn_fedavg.jsonl"
    for a in mime mime_lite; do
        expect 0 "$a on Synthetic(1,1)" -- "$BIN" run programs/$a.json $L --set momentum=0.5 --metrics "$T/learn_$a.jsonl"
    done
    check "Mime and Mime-Lite below 0.8 x FedAvg's training loss" -- "$PY" - "$T"/learn_{fedavg,mime,mime_lite}.jsonl <<'PYEOF'
import json, sys
def final(path):
    evals = [json.loads(l)["eval"]["loss"] for l in open(path) if '"eval"' in l]
    assert len(evals) == 1, path
    return evals[0]
avg, mime, lite = (final(p) for p in sys.argv[1:])
print("training loss after 30 rounds: FedAvg %.3f, Mime %.3f, Mime-Lite %.3f" % (avg, mime, lite))
assert mime < 0.8 * avg and lite < 0.8 * avg
PYEOF
    sed 's/^/  /' "$T/check"
    # Agnostic FedAvg: on 20 clients of two domains labelled by different linear models (domain 1 a
    # fifth of the examples), the worst domain's loss over all examples, the mean of rounds 21-40, is
    # lower with the exponentiated-gradient domain weights (domain_lr 1) than with uniform ones (0)
    "$PY" $REF data "$T/dl.json" --clients 20 --seed 1 --min-examples 30 --max-examples 80
    "$PY" -c "import json; json.dump([e for c in json.load(open('$T/dl.json')) for e in c], open('$T/dl_flat.json', 'w'))"
    for eta in 0 1; do
        expect 0 "agnostic_fedavg, domain_lr $eta" -- "$BIN" run programs/agnostic_fedavg.json --arg train=@"$T/dl.json" \
            --arg test=@"$T/dl_flat.json" --rounds 40 --eval-every 1 --clients-per-round 8 --set epochs=2 --set client_lr=0.3 \
            --set domain_lr=$eta --seed 0 --threads 2 --metrics "$T/afl$eta.jsonl"
    done
    check "agnostic_fedavg: the worst domain's loss below 0.95 x that of uniform weights" -- "$PY" - "$T/afl0.jsonl" "$T/afl1.jsonl" <<'PYEOF'
import json, sys
def worst(path):
    m = [json.loads(l)["eval"]["max_domain_loss"] for l in open(path) if '"eval"' in l]
    assert len(m) == 40, path
    return sum(m[20:]) / 20
uniform, agnostic = (worst(p) for p in sys.argv[1:])
print("worst domain's loss, rounds 21-40: uniform weights %.3f, agnostic %.3f" % (uniform, agnostic))
assert agnostic < 0.95 * uniform
PYEOF
    sed 's/^/  /' "$T/check"
fi

echo "algorithms: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
