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
    expect 0 "$a: fedvm run" -- "$BIN" run programs/$a.json $SMALL --set momentum=0.9 --metrics "$T/$a.jsonl" --checkpoint-dir "$T/$a" &&
        cp "$T/out" "$T/$a.out"
    check "$a: the server state and the training losses match the reference" -- "$PY" $REF \
        check $a "$T/small.json" "$T/$a.jsonl" "$T/$a/round-000005.safetensors" --epochs 3 --lr 0.1
    expect 0 "$a: 2 threads" -- "$BIN" run programs/$a.json $SMALL --set momentum=0.9 --threads 2 --checkpoint-dir "$T/${a}t" &&
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

# HypCluster: the reference replays rounds 2-5 from fedvm's round-1 models (the first models are
# random); with seed 3 some rounds leave a cluster without clients, which keeps its model
H="--arg train=@$T/small.json --rounds 5 --clients-per-round 3 --set epochs=3 --set batch_size=100 --set client_lr=0.1 --seed 3"
expect 0 "hypcluster: fedvm run" -- "$BIN" run programs/hypcluster.json $H --metrics "$T/hc.jsonl" --checkpoint-dir "$T/hc" \
    --checkpoint-every 1 && cp "$T/out" "$T/hc.out"
check "hypcluster: rounds 2-5 match the reference" -- "$PY" $REF check hypcluster "$T/small.json" "$T/hc.jsonl" \
    "$T/hc/round-000005.safetensors" --epochs 3 --lr 0.1 --start "$T/hc/round-000001.safetensors" --start-round 1
if "$PY" $REF check hypcluster "$T/small.json" "$T/hc.jsonl" "$T/hc/round-000005.safetensors" --epochs 3 --lr 0.1 \
    --start "$T/hc/round-000002.safetensors" --start-round 1 >/dev/null 2>&1; then bad "the reference accepts another start"; else ok; fi
check "hypcluster: a round leaves a cluster without clients; the first models are init_scale * N(0, 1), b = 0, and differ" -- \
    "$PY" - "$T/hc.jsonl" "$T/hc/round-000001.safetensors" <<'PYEOF'
import json, sys
import numpy as np
sys.path.insert(0, "tests")
from reflib import parse_safetensors
rounds = [json.loads(l)["train"]["cluster_examples"] for l in open(sys.argv[1]) if '"round"' in l]
assert any(0.0 in c for c in rounds[1:]), rounds
first = rounds[0].index(0.0)  # no client picked it in round 1: it is still the initial model
t, _ = parse_safetensors(open(sys.argv[2], "rb").read())
w, b = t["w"][first], t["b"][first]
assert np.all(b == 0) and abs(w.std() / 0.13 - 1) < 0.1 and abs(w.mean()) < 0.02, (w.std(), w.mean())
assert np.max(np.abs(t["w"][0] - t["w"][1])) > 0.1
PYEOF
expect 0 "hypcluster: 2 threads" -- "$BIN" run programs/hypcluster.json $H --threads 2 && same "$T/out" "$T/hc.out" "hypcluster: 2 threads and seq"

# Ditto: the global model, every round's global and personal losses and every client's personalized
# model in the store of client states
D="--arg train=@$T/small.json --rounds 5 --clients-per-round 3 --set epochs=3 --set personal_epochs=2 --set batch_size=100 --set client_lr=0.1 --set lambda=0.5 --seed 2"
expect 0 "ditto: fedvm run" -- "$BIN" run programs/ditto.json $D --metrics "$T/ditto.jsonl" --checkpoint-dir "$T/ditto" &&
    cp "$T/out" "$T/ditto.out"
check "ditto: the global model, the losses and the personalized models match the reference" -- "$PY" $REF check ditto \
    "$T/small.json" "$T/ditto.jsonl" "$T/ditto/round-000005.safetensors" --epochs 3 --lr 0.1 --lambda 0.5 --personal-epochs 2 \
    --store "$T/ditto/client_states.sqlite"
if "$PY" $REF check ditto "$T/small.json" "$T/ditto.jsonl" "$T/ditto/round-000005.safetensors" --epochs 3 --lr 0.1 \
    --lambda 0.4 --personal-epochs 2 --store "$T/ditto/client_states.sqlite" >/dev/null 2>&1; then
    bad "the reference accepts another lambda"
else ok; fi
expect 0 "ditto: 2 threads" -- "$BIN" run programs/ditto.json $D --threads 2 && same "$T/out" "$T/ditto.out" "ditto: 2 threads and seq"

# FedNova: client i runs 1 + (i mod 3) epochs; normalized and FedAvg's averaging of the same work
N="--arg train=@$T/small.json --rounds 5 --clients-per-round 3 --set epochs=3 --set min_epochs=1 --set batch_size=100 --set client_lr=0.1 --seed 2"
for nz in true false; do
    expect 0 "fednova (normalize $nz): fedvm run" -- "$BIN" run programs/fednova.json $N --set normalize=$nz \
        --metrics "$T/nova$nz.jsonl" --checkpoint-dir "$T/nova$nz"
done
check "fednova: the model and the losses match the reference" -- "$PY" $REF check fednova "$T/small.json" "$T/novatrue.jsonl" \
    "$T/novatrue/round-000005.safetensors" --epochs 3 --min-epochs 1 --lr 0.1
check "fednova, normalize false: FedAvg's average in the reference" -- "$PY" $REF check fednova "$T/small.json" \
    "$T/novafalse.jsonl" "$T/novafalse/round-000005.safetensors" --epochs 3 --min-epochs 1 --lr 0.1 --plain
if "$PY" $REF check fednova "$T/small.json" "$T/novatrue.jsonl" "$T/novatrue/round-000005.safetensors" --epochs 3 \
    --min-epochs 1 --lr 0.1 --plain >/dev/null 2>&1; then bad "the reference accepts FedNova's run as FedAvg's"; else ok; fi
expect 0 "fednova: 2 threads" -- "$BIN" run programs/fednova.json $N --threads 2 --checkpoint-dir "$T/nova2" &&
    same_state "$T/novatrue/round-000005.safetensors" "$T/nova2/round-000005.safetensors" "fednova: final state on 2 threads"

# -- learning: on Synthetic(1,1) (30 clients, 10 a round, 30 rounds of one local epoch, batches of 10,
# client_lr 0.003, momentum 0.5), Mime and Mime-Lite end with a lower loss over all clients' training
# examples than FedAvg with the same client steps, as Karimireddy et al. find on heterogeneous clients
if ! $sanitized; then
    S30="$T/syn30.sqlite"
    expect 0 "Synthetic(1,1), 30 clients" -- "$BIN" data synthetic --kind fedprox --alpha 1 --beta 1 --seed 4 -o "$S30"
    L="--data train=$S30 --data test=$S30 --rounds 30 --clients-per-round 10 --seed 0 --threads 2 --set epochs=1 --set client_lr=0.003"
    expect 0 "fedavg on Synthetic(1,1)" -- "$BIN" run programs/fedavg.json $L --metrics "$T/learn_fedavg.jsonl"
    for a in mime mime_lite; do
        # their own defaults: one epoch, client_lr 0.003, momentum 0.5 (FedAvg's run above is given the same steps)
        expect 0 "$a on Synthetic(1,1)" -- "$BIN" run programs/$a.json ${L%% --set*} --metrics "$T/learn_$a.jsonl"
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
    # HypCluster: on LEAF's synthetic data drawn from 2 linear models (30 clients, 10 a round, 30 rounds of
    # 5 epochs, client_lr 0.05), every client under the cluster it picks ends with a lower loss than
    # under FedAvg's one model, and a higher accuracy
    L2="$T/leaf2.sqlite"
    expect 0 "LEAF synthetic, 2 clusters" -- "$BIN" data synthetic --kind leaf --clusters 2 --clients 30 --seed 4 \
        --max-examples 200 -o "$L2"
    for a in fedavg hypcluster; do
        expect 0 "$a on 2 clusters" -- "$BIN" run programs/$a.json --data train="$L2" --data test="$L2" --rounds 30 \
            --clients-per-round 10 --seed 0 --threads 2 --set epochs=5 --set client_lr=0.05 --metrics "$T/hc_$a.jsonl"
    done
    check "hypcluster: below 0.9 x FedAvg's loss, 2 points above its accuracy" -- "$PY" - "$T/hc_fedavg.jsonl" "$T/hc_hypcluster.jsonl" <<'PYEOF'
import json, sys
def final(path):
    e = [json.loads(l)["eval"] for l in open(path) if '"eval"' in l]
    assert len(e) == 1, path
    return e[0]["loss"], e[0]["accuracy"]
(al, aa), (hl, ha) = (final(p) for p in sys.argv[1:])
print("after 30 rounds, loss and accuracy over all clients: FedAvg %.3f %.3f, HypCluster %.3f %.3f" % (al, aa, hl, ha))
assert hl < 0.9 * al and ha > aa + 0.02
PYEOF
    sed 's/^/  /' "$T/check"
    # Ditto: on Synthetic(1,1) (30 clients, 10 a round, 30 rounds of 2 global and 2 personal epochs),
    # the personalized models' loss on their clients' examples is below 0.6 x the global model's (the
    # mean of rounds 21-30), and a larger lambda (10) pulls them toward the global model
    for lam in 0.1 10; do
        expect 0 "ditto on Synthetic(1,1), lambda $lam" -- "$BIN" run programs/ditto.json --data train="$S30" --rounds 30 \
            --clients-per-round 10 --seed 0 --threads 2 --set epochs=2 --set personal_epochs=2 --set lambda=$lam \
            --metrics "$T/ditto$lam.jsonl"
    done
    check "ditto: personalized models below 0.6 x the global model's loss; lambda 10 closer to it" -- "$PY" - \
        "$T/ditto0.1.jsonl" "$T/ditto10.jsonl" <<'PYEOF'
import json, sys
def tail(path):
    m = [json.loads(l)["train"] for l in open(path) if '"round"' in l]
    assert len(m) == 30, path
    return sum(l["loss"] for l in m[20:]) / 10, sum(l["personal_loss"] for l in m[20:]) / 10
(g, p), (g10, p10) = (tail(p) for p in sys.argv[1:])
print("loss, rounds 21-30: global %.3f, personalized %.3f (lambda 0.1), %.3f (lambda 10)" % (g, p, p10))
assert p < 0.6 * g and p < p10 < g10
PYEOF
    sed 's/^/  /' "$T/check"
    # FedNova: on Synthetic(1,1) with clients running 1 to 5 epochs (30 rounds of 10 clients), the loss
    # over all clients' examples ends below 0.8 x that of FedAvg's averaging of the same local work
    for nz in true false; do
        expect 0 "fednova on Synthetic(1,1), normalize $nz" -- "$BIN" run programs/fednova.json --data train="$S30" \
            --data test="$S30" --rounds 30 --clients-per-round 10 --seed 0 --threads 2 --set epochs=5 --set min_epochs=1 \
            --set normalize=$nz --metrics "$T/learn_nova$nz.jsonl"
    done
    check "fednova: below 0.8 x FedAvg's loss with the same heterogeneous local epochs" -- "$PY" - \
        "$T/learn_novatrue.jsonl" "$T/learn_novafalse.jsonl" <<'PYEOF'
import json, sys
def final(path):
    e = [json.loads(l)["eval"]["loss"] for l in open(path) if '"eval"' in l]
    assert len(e) == 1, path
    return e[0]
nova, plain = (final(p) for p in sys.argv[1:])
print("loss after 30 rounds, 1-5 local epochs: FedNova %.3f, FedAvg's averaging %.3f" % (nova, plain))
assert nova < 0.8 * plain
PYEOF
    sed 's/^/  /' "$T/check"
fi

echo "algorithms: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
