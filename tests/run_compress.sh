#!/usr/bin/env bash
# run_compress.sh BIN - compressed updates (programs/lib/compress.json, programs/fedavg_quantized.json,
# programs/fedavg_topk.json) and the trimmed mean (programs/lib/trimmed.json, programs/fedavg_trimmed.json):
# the bytes up and down against a hand count; rounds of each against the NumPy reference of
# tests/compress/compress_ref.py, which fails on another bits, k or beta; the same bits on two threads;
# the trimmed mean against a malicious client; and the compressed ones still learn.
set -u
BIN=${1:?usage: tests/run_compress.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"

PY=$(python_with numpy msgpack)
if [ -z "$PY" ]; then echo "run_compress: no python3 with numpy and msgpack (make deps)"; exit 1; fi
REF=tests/compress/compress_ref.py

# 20 iid clients of Synthetic(1,1), 3562 training examples.
"$BIN" data synthetic --kind fedprox --iid --clients 20 --seed 1 -o "$T/syn.sqlite" >/dev/null 2>&1 ||
    { echo "run_compress: cannot make data"; exit 1; }
D="--data train=$T/syn.sqlite --data test=$T/syn.sqlite:test --rounds 3 --seed 5 --set epochs=1"

# Hand count, a round of 20 clients: 4 bits -> w: 600 * 4 / 8 = 300 bytes + 8 (min, max), b: ceil(40 / 8)
# = 5 + 8, so 321 a client, 6420 up; top-k with k = 50: 50 * (4 + 4) = 400 a client, 8000 up; the
# float32 model down, 610 * 4 = 2440 a client, 48800.
bytes_are() { # bytes_are METRICS UP DOWN
    "$PY" -c '
import json, sys
rounds = [json.loads(l)["train"] for l in open(sys.argv[1]) if "round" in l]
got = [(r["bytes_up"], r["bytes_down"]) for r in rounds]
assert len(got) == 3 and all(g == (float(sys.argv[2]), float(sys.argv[3])) for g in got), got' "$@"
}

expect 0 "quantized FedAvg, 4 bits, 3 rounds" -- "$BIN" run programs/fedavg_quantized.json $D --set bits=4 \
    --metrics "$T/q.jsonl" --checkpoint-dir "$T/q" && cp "$T/out" "$T/q.out"
check "quantized: 6420 bytes up and 48800 down a round" -- bytes_are "$T/q.jsonl" 6420 48800
check "quantized: the NumPy reference agrees" -- "$PY" $REF quantized 4 "$T/syn.sqlite" 3 5 1 "$T/q.jsonl" \
    "$T/q/round-000003.safetensors"
if "$PY" $REF quantized 3 "$T/syn.sqlite" 3 5 1 "$T/q.jsonl" "$T/q/round-000003.safetensors" >"$T/check" 2>&1; then
    bad "quantized: the reference with 3 bits accepts the 4-bit run"
elif grep -q "model w: relative difference" "$T/check"; then ok; else bad "quantized: 3 bits fails but not on the model"; fi
expect 0 "quantized FedAvg on 2 threads" -- "$BIN" run programs/fedavg_quantized.json $D --set bits=4 --threads 2 \
    --checkpoint-dir "$T/q2" && same "$T/out" "$T/q.out" "quantized, threads: the same lines" &&
    same_state "$T/q/round-000003.safetensors" "$T/q2/round-000003.safetensors" "quantized, threads: the same model"

expect 0 "top-k FedAvg, k = 50, 3 rounds" -- "$BIN" run programs/fedavg_topk.json $D --set k=50 \
    --metrics "$T/t.jsonl" --checkpoint-dir "$T/t" && cp "$T/out" "$T/t.out"
check "top-k: 8000 bytes up and 48800 down a round" -- bytes_are "$T/t.jsonl" 8000 48800
check "top-k: the NumPy reference agrees (model and the clients' errors)" -- "$PY" $REF topk 50 "$T/syn.sqlite" 3 5 1 \
    "$T/t.jsonl" "$T/t/round-000003.safetensors" "$T/t/client_states.sqlite"
if "$PY" $REF topk 60 "$T/syn.sqlite" 3 5 1 "$T/t.jsonl" "$T/t/round-000003.safetensors" "$T/t/client_states.sqlite" \
    >"$T/check" 2>&1; then
    bad "top-k: the reference with k = 60 accepts the k = 50 run"
elif grep -q "model w: relative difference" "$T/check"; then ok; else bad "top-k: k = 60 fails but not on the model"; fi
expect 0 "top-k FedAvg on 2 threads" -- "$BIN" run programs/fedavg_topk.json $D --set k=50 --threads 2 \
    --checkpoint-dir "$T/t2" && same "$T/out" "$T/t.out" "top-k, threads: the same lines" &&
    same_state "$T/t/round-000003.safetensors" "$T/t2/round-000003.safetensors" "top-k, threads: the same model"

# The trimmed mean: 20 iid clients, client 3's features times -1e5 (tests/dp/poison.py); 5 rounds wreck
# FedAvg, the trimmed mean (beta = 2) learns; 20 clients fill a block of 16 and one of 4, so the merge counts.
"$PY" tests/dp/poison.py "$T/syn.sqlite" "$T/bad.sqlite" 3 -1e5 || { echo "run_compress: cannot make data"; exit 1; }
P="--data train=$T/bad.sqlite --data test=$T/bad.sqlite:test --rounds 5 --seed 5 --set epochs=1"
expect 0 "FedAvg with the malicious client" -- "$BIN" run programs/fedavg.json $P --metrics "$T/plain.jsonl"
expect 0 "trimmed-mean FedAvg with the malicious client" -- "$BIN" run programs/fedavg_trimmed.json $P --metrics "$T/tm.jsonl" \
    --checkpoint-dir "$T/tm" && cp "$T/out" "$T/tm.out"
check "FedAvg is wrecked (test accuracy below 0.15), the trimmed mean learns (above 0.3)" -- "$PY" -c '
import json, sys
def last(p): return [json.loads(l) for l in open(p) if "round" in l][-1]["eval"]["accuracy"]
pa, ta = last(sys.argv[1]), last(sys.argv[2])
print("test accuracy after 5 rounds: FedAvg", pa, "trimmed mean", ta)
assert pa < 0.15 and ta > 0.3, (pa, ta)' "$T/plain.jsonl" "$T/tm.jsonl"
check "trimmed: the NumPy reference agrees" -- "$PY" $REF trimmed 2 "$T/bad.sqlite" 5 5 1 "$T/tm.jsonl" "$T/tm/round-000005.safetensors"
if "$PY" $REF trimmed 1 "$T/bad.sqlite" 5 5 1 "$T/tm.jsonl" "$T/tm/round-000005.safetensors" >"$T/check" 2>&1; then
    bad "trimmed: the reference with beta = 1 accepts the beta = 2 run"
elif grep -q "model w: relative difference" "$T/check"; then ok; else bad "trimmed: beta = 1 fails but not on the model"; fi
expect 0 "trimmed-mean FedAvg on 2 threads" -- "$BIN" run programs/fedavg_trimmed.json $P --threads 2 --checkpoint-dir "$T/tm2" &&
    same "$T/out" "$T/tm.out" "trimmed, threads: the same lines" &&
    same_state "$T/tm/round-000005.safetensors" "$T/tm2/round-000005.safetensors" "trimmed, threads: the same model"
expect 0 "trimmed-mean FedAvg with 4 clients a round" -- "$BIN" run programs/fedavg_trimmed.json $P --rounds 2 --clients-per-round 4 \
    --metrics "$T/few.jsonl"
check "4 <= 2 beta clients leave the model at zero (test loss ln 10)" -- "$PY" -c '
import json, math, sys
e = [json.loads(l) for l in open(sys.argv[1]) if "round" in l][-1]["eval"]
assert abs(e["loss"] - math.log(10)) < 1e-6, e' "$T/few.jsonl"

# Learning: 10 rounds of 10 of 30 non-iid Synthetic(1,1) clients, 2 epochs; 2 bits and k = 30 (5%) still
# bring the test loss from 2.30 to below 1.4 (1.12 and 1.16; FedAvg: 1.05).
"$BIN" data synthetic --kind fedprox --alpha 1 --beta 1 --clients 30 --seed 4 -o "$T/s11.sqlite" >/dev/null 2>&1
L="--data train=$T/s11.sqlite --data test=$T/s11.sqlite:test --rounds 10 --clients-per-round 10 --seed 2 --set epochs=2"
expect 0 "quantized FedAvg learns, 2 bits" -- "$BIN" run programs/fedavg_quantized.json $L --set bits=2 --metrics "$T/ql.jsonl"
expect 0 "top-k FedAvg learns, k = 30" -- "$BIN" run programs/fedavg_topk.json $L --set k=30 --metrics "$T/tl.jsonl"
check "both bring the test loss below 1.4 in 10 rounds" -- "$PY" -c '
import json, sys
for p in sys.argv[1:]:
    e = [json.loads(l) for l in open(p) if "round" in l][-1]["eval"]
    print(p, e)
    assert e["loss"] < 1.4, e' "$T/ql.jsonl" "$T/tl.jsonl"

echo "compress: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
