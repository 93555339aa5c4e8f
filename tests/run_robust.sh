#!/usr/bin/env bash
# run_robust.sh BIN - robust aggregation (programs/lib/robust.json, programs/fedavg_robust.json): one
# malicious client with a huge update wrecks FedAvg and is neutralized by zeroing; the robust rounds
# against the NumPy reference of tests/dp/robust_ref.py; the same bits on two threads.
set -u
BIN=${1:?usage: tests/run_robust.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"

PY=$(python_with numpy msgpack)
if [ -z "$PY" ]; then echo "run_robust: no python3 with numpy and msgpack (make deps)"; exit 1; fi

# 20 iid clients of Synthetic(1,1); client 3 (199 examples) has its features times -1e5.
"$BIN" data synthetic --kind fedprox --iid --clients 20 --seed 1 -o "$T/clean.sqlite" >/dev/null 2>&1 &&
    "$PY" tests/dp/poison.py "$T/clean.sqlite" "$T/bad.sqlite" 3 -1e5 || { echo "run_robust: cannot make data"; exit 1; }
D="--data train=$T/bad.sqlite --data test=$T/bad.sqlite:test --rounds 5 --seed 5 --set epochs=1"

expect 0 "FedAvg with the malicious client" -- "$BIN" run programs/fedavg.json $D --metrics "$T/fedavg.jsonl"
expect 0 "robust FedAvg with the malicious client" -- "$BIN" run programs/fedavg_robust.json $D --set zeroing_norm=10 \
    --set clipping_norm=0.3 --metrics "$T/robust.jsonl" && cp "$T/out" "$T/robust.out"
check "FedAvg is wrecked (test accuracy below 0.15), the robust one learns (above 0.3) with the client zeroed each round" -- "$PY" -c '
import json, sys
def lines(p): return [json.loads(l) for l in open(p) if "round" in l]
plain, robust = lines(sys.argv[1]), lines(sys.argv[2])
pa, ra = plain[-1]["eval"]["accuracy"], robust[-1]["eval"]["accuracy"]
print("test accuracy after 5 rounds: FedAvg", pa, "(loss", plain[-1]["eval"]["loss"], "), robust", ra,
      "(loss", robust[-1]["eval"]["loss"], ")")
assert pa < 0.15 and ra > 0.3 and all(l["train"]["zeroed"] == 1 for l in robust), (pa, ra)' "$T/fedavg.jsonl" "$T/robust.jsonl"
expect 0 "robust FedAvg, 3 rounds, with checkpoints" -- "$BIN" run programs/fedavg_robust.json $D --rounds 3 --set zeroing_norm=10 \
    --set clipping_norm=0.3 --metrics "$T/r3.jsonl" --checkpoint-dir "$T/r3"
check "the NumPy reference agrees (zeroing, clipping, the weighted mean)" -- "$PY" tests/dp/robust_ref.py "$T/bad.sqlite" 3 5 10 0.3 \
    "$T/r3.jsonl" "$T/r3/round-000003.safetensors"
expect 0 "robust FedAvg on 2 threads" -- "$BIN" run programs/fedavg_robust.json $D --set zeroing_norm=10 --set clipping_norm=0.3 --threads 2 &&
    same "$T/out" "$T/robust.out" "threads: the same lines"

echo "robust: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
