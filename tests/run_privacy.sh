#!/usr/bin/env bash
# run_privacy.sh BIN - differential privacy: the (epsilon, delta) 'fedvm privacy' prints and a training
# run reports for a program that declares "privacy", each checked against the independent accountant of
# tests/dp/accountant.py; the command's errors and a run's.
set -u
BIN=${1:?usage: tests/run_privacy.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"

PY=$(python_with numpy)
if [ -z "$PY" ]; then echo "run_privacy: no python3 with numpy (make deps)"; exit 1; fi
REF=tests/dp/accountant.py

# -- fedvm privacy
expect 0 "privacy, q given, every 25 rounds" -- "$BIN" privacy --noise-multiplier 1.0 --q 0.01 --rounds 100 --delta 1e-5 --every 25 &&
    check "4 lines (25, 50, 75, 100)" -- test "$(cut -d, -f1 "$T/out" | tr '\n' ' ')" = '{"rounds": 25 {"rounds": 50 {"rounds": 75 {"rounds": 100 '
check "they agree with the reference" -- "$PY" $REF --lines 0.01 1.0 1e-5 "$T/out"
expect 0 "privacy, q = K / N, a last partial step" -- "$BIN" privacy --noise-multiplier 0.8 --clients-per-round 16 --clients 500 --rounds 70 --delta 1e-6 --every 30 &&
    check "rounds 30, 60, 70" -- test "$(wc -l <"$T/out")" -eq 3
check "they agree with the reference" -- "$PY" $REF --lines 0.032 0.8 1e-6 "$T/out"
expect 0 "no noise" -- "$BIN" privacy --noise-multiplier 0 --q 0.5 --rounds 2 --delta 1e-5 && has "$T/out" '"epsilon": "inf"' "no noise, no privacy"
expect 0 "no rounds" -- "$BIN" privacy --noise-multiplier 1 --q 0.5 --rounds 0 --delta 1e-5 && has "$T/out" '"epsilon": 0.0' "nothing spent"
expect 0 "help" -- "$BIN" privacy --help && has "$T/out" "usage: fedvm privacy" "help text"
expect 2 "q out of range" -- "$BIN" privacy --noise-multiplier 1 --q 1.5 --rounds 2 --delta 1e-5 && has "$T/err" "not in [0, 1]" "q's message"
expect 2 "delta out of range" -- "$BIN" privacy --noise-multiplier 1 --q 0.5 --rounds 2 --delta 0 && has "$T/err" "delta is 0, not in (0, 1)" "delta's message"
expect 2 "q and clients both" -- "$BIN" privacy --noise-multiplier 1 --q 0.5 --clients 10 --clients-per-round 2 --rounds 2 --delta 1e-5 &&
    has "$T/err" "either --q or" "q or clients"
expect 2 "no rounds option" -- "$BIN" privacy --noise-multiplier 1 --q 0.5 --delta 1e-5 && has "$T/err" "--rounds is needed" "rounds needed"
expect 2 "unknown option" -- "$BIN" privacy --noise 1 && has "$T/err" "unknown option" "unknown option"

# -- a run of a program that declares "privacy": every round's line, q = 7 / 100, z = 1.25 (the default)
P=tests/dp/accounted.json
expect 0 "an accounted run, 7 of 100 clients a round" -- "$BIN" run $P --clients 100 --clients-per-round 7 --rounds 40 --metrics "$T/m.jsonl" &&
    check "40 stdout lines with epsilon" -- test "$(grep -c '"epsilon"' "$T/out")" -eq 40
check "the metrics file agrees with the reference" -- "$PY" $REF --lines 0.07 1.25 1e-5 "$T/m.jsonl"
check "stdout agrees with the reference" -- "$PY" $REF --lines 0.07 1.25 1e-5 "$T/out"
expect 0 "--set z=0.75" -- "$BIN" run $P --clients 50 --clients-per-round 5 --rounds 3 --set z=0.75
check "the hyperparameter's value is accounted" -- "$PY" $REF --lines 0.1 0.75 1e-5 "$T/out"
expect 0 "every client each round: q = 1" -- "$BIN" run $P --clients 20 --rounds 2
check "no amplification by sampling" -- "$PY" $REF --lines 1 1.25 1e-5 "$T/out"
expect 0 "the same listed clients each round: q = 1" -- "$BIN" run $P --clients 20 --client-ids 1,2,3 --rounds 2
check "no amplification for a fixed list" -- "$PY" $REF --lines 1 1.25 1e-5 "$T/out"
expect 0 "resumed: the rounds' count goes on" -- "$BIN" run $P --clients 100 --clients-per-round 7 --rounds 2 --checkpoint-dir "$T/ck" &&
    expect 0 "resume to round 4" -- "$BIN" run $P --clients 100 --clients-per-round 7 --rounds 4 --resume "$T/ck" &&
    check "rounds 3 and 4 as the reference's" -- "$PY" $REF --lines 0.07 1.25 1e-5 "$T/out"
expect 1 "a run without a number of clients" -- "$BIN" run $P --rounds 1 && has "$T/err" "privacy accounting needs the number of clients" "located refusal"

# -- DP-FedAvg (programs/dp_fedavg.json) on 100 iid clients of Synthetic(1,1)
D="$T/iid.sqlite"
"$BIN" data synthetic --kind fedprox --iid --clients 100 --seed 1 -o "$D" >/dev/null 2>&1 || { echo "run_privacy: cannot make data"; exit 1; }
DP=programs/dp_fedavg.json
S="--data train=$D --clients-per-round 20 --seed 4 --set epochs=1 --set clip=0.3 --set expected_clients=20"
# Without noise, value by value against NumPy (clipping, the sum, the fixed denominator, the server step).
expect 0 "dp_fedavg without noise, 3 rounds" -- "$BIN" run $DP $S --rounds 3 --set noise_multiplier=0 --set server_lr=1 \
    --metrics "$T/dp0.jsonl" --checkpoint-dir "$T/dp0"
check "the NumPy reference agrees" -- "$PY" tests/dp/dp_fedavg_ref.py "$D" 3 20 4 0.3 20 1 "$T/dp0.jsonl" "$T/dp0/round-000003.safetensors"
has "$T/out" '"epsilon": "inf"' "no noise: epsilon infinite"
# The noise: one round from the zero model with and without it; what differs is z C times a standard normal vector.
expect 0 "dp_fedavg, one round without noise" -- "$BIN" run $DP $S --rounds 1 --set noise_multiplier=0 --checkpoint-dir "$T/n0"
expect 0 "dp_fedavg, one round with z = 2" -- "$BIN" run $DP $S --rounds 1 --set noise_multiplier=2 --checkpoint-dir "$T/n2"
check "the noise is z C N(0, I)" -- "$PY" tests/dp/dp_fedavg_ref.py --noise 2 0.3 20 1 "$T/n0/round-000001.safetensors" "$T/n2/round-000001.safetensors"
# Learning with moderate noise (z = 0.5, C = 1, 25 of 100 clients a round), epsilon accounted; the same bits on every backend.
L="--data train=$D --data test=$D:test --clients-per-round 25 --rounds 10 --seed 2 --set epochs=1 --set clip=1 --set expected_clients=25 --set noise_multiplier=0.5 --eval-every 5"
expect 0 "dp_fedavg learns with noise" -- "$BIN" run $DP $L --metrics "$T/learn.jsonl" --checkpoint-dir "$T/lseq" && cp "$T/out" "$T/learn.out"
check "test accuracy from chance (0.1) to above 0.3, the training loss down" -- "$PY" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if "round" in l]
acc = [l["eval"]["accuracy"] for l in lines if "eval" in l]
loss = [l["train"]["loss"] for l in lines]
print("dp_fedavg: test accuracy after rounds 5 and 10:", acc, "training loss", loss[0], "->", loss[-1])
assert acc[-1] > 0.3 and acc[-1] > acc[0] - 0.05 and loss[-1] < loss[0] - 0.15, (acc, loss)' "$T/learn.jsonl"
check "its epsilon against the reference accountant (q = 25 / 100, z = 0.5)" -- "$PY" $REF --lines 0.25 0.5 1e-5 "$T/learn.jsonl"
expect 0 "dp_fedavg on 2 threads" -- "$BIN" run $DP $L --threads 2 --checkpoint-dir "$T/lthr" &&
    same "$T/out" "$T/learn.out" "threads: the same lines" &&
    same_state "$T/lseq/round-000010.safetensors" "$T/lthr/round-000010.safetensors" "threads: the same model"
mpi_setup run_privacy "$BIN"
if [ -n "$MPI" ] && [ -z "${TSAN_OPTIONS:-}" ]; then
    expect 0 "dp_fedavg on 2 ranks" -- timeout 120 $MPI -np 2 "$BIN" run $DP $L --backend mpi --checkpoint-dir "$T/lmpi" &&
        same "$T/out" "$T/learn.out" "mpi: the same lines" &&
        same_state "$T/lseq/round-000010.safetensors" "$T/lmpi/round-000010.safetensors" "mpi: the same model"
fi

# -- DP-FedAvg with adaptive clipping (programs/dp_fedavg_adaptive.json): without noise against NumPy (the clip
# norm's geometric steps towards the median), then learning with noise.
A=programs/dp_fedavg_adaptive.json
expect 0 "adaptive clipping without noise, 4 rounds" -- "$BIN" run $A ${S/--set clip=0.3/} --rounds 4 --set noise_multiplier=0 \
    --set clipped_count_stddev=0 --set initial_clip=0.3 --set target_quantile=0.5 --set clip_lr=0.2 \
    --metrics "$T/ad0.jsonl" --checkpoint-dir "$T/ad0"
check "the NumPy reference agrees (updates, clip norms)" -- "$PY" tests/dp/dp_fedavg_ref.py "$D" 4 20 4 0.3 20 1 \
    "$T/ad0.jsonl" "$T/ad0/round-000004.safetensors" --adaptive 0.5 0.2
AL="--data train=$D --data test=$D:test --clients-per-round 20 --rounds 10 --seed 2 --set epochs=1 --eval-every 10"
expect 0 "adaptive clipping learns with noise (z = 1)" -- "$BIN" run $A $AL --metrics "$T/ad.jsonl"
check "test accuracy above 0.3, the clip norm moved from C_0" -- "$PY" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if "round" in l]
acc, clips = lines[-1]["eval"]["accuracy"], [l["train"]["clip"] for l in lines]
print("dp_fedavg_adaptive: test accuracy", acc, "clip norms", clips[0], "->", clips[-1])
assert acc > 0.3 and abs(clips[-1] - clips[0]) > 0.01, (acc, clips)' "$T/ad.jsonl"
check "its epsilon against the reference accountant (q = 20 / 100, z = 1)" -- "$PY" $REF --lines 0.2 1 1e-5 "$T/ad.jsonl"

echo "privacy: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
