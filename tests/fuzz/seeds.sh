#!/usr/bin/env bash
# seeds.sh - writes the seed corpora of the fuzz targets (tests/fuzz/corpus/NAME/) afresh.
#
# usage: tests/fuzz/seeds.sh BINDIR FUZZDIR    (BINDIR holds fedvm and fedplan, FUZZDIR the targets)
#
# Programs and invalid programs come from programs/ and tests/ (JSON, and YAML written by 'fedvm fmt');
# checkpoints, metrics, cross-device plans and dataset blobs from short fedvm runs; the cross-device
# round's files from the fuzz_xdev_files target itself (FUZZ_SEEDS); the rest by tests/fuzz/seeds.py.
# Files over 20 KB are left out (they slow the fuzzer for nothing).
set -eu
export LC_ALL=C
BIN=$(cd "${1:?usage: $0 BINDIR FUZZDIR}" && pwd)
FUZZ=$(cd "${2:?usage: $0 BINDIR FUZZDIR}" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
C=$REPO/tests/fuzz/corpus
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$REPO"
small() { [ "$(stat -c %s "$1")" -le 20000 ]; }
name() { echo "${1%.*}" | tr / _; }

rm -rf "$C"
mkdir -p "$C"/{ir_json,ir_yaml,safetensors,metrics,xdev_plan,xdev_files,fedjax}

# programs, JSON and YAML
for f in programs/*.json programs/*/*.json tests/golden/programs/*.json tests/invalid/*.json \
         tests/invalid/*/*.json tests/regress/*.json tests/xdev/*.json tests/ad/*.json; do
    small "$f" && cp "$f" "$C/ir_json/$(name "$f").json"
done
for f in programs/*.yaml tests/invalid/*.yaml; do cp "$f" "$C/ir_yaml/$(name "$f").yaml"; done
for f in programs/*.json tests/golden/programs/*.json tests/xdev/*.json; do
    "$BIN/fedvm" fmt "$f" --to yaml >"$T/y" 2>/dev/null && cp "$T/y" "$C/ir_yaml/$(name "$f").yaml" || true
done

# runs: checkpoints (safetensors) and metrics
"$BIN/fedvm" data synthetic --kind fedprox --alpha 1 --beta 1 --clients 4 --seed 1 -o "$T/syn.sqlite" >/dev/null
"$BIN/fedvm" run programs/fedsgd_linear.json --arg data=@programs/data/linear_clients.json --rounds 2 \
    --clients-per-round 2 --checkpoint-dir "$T/lin" --metrics "$C/metrics/fedsgd_linear.jsonl" >/dev/null
"$BIN/fedvm" run tests/xdev/secure_counts.json --arg data=@tests/xdev/counts_data.json --rounds 2 \
    --checkpoint-dir "$T/sec" --metrics "$C/metrics/secure_counts.jsonl" >/dev/null
"$BIN/fedvm" run programs/fedavg.json --data train=$T/syn.sqlite --data test=$T/syn.sqlite:test --rounds 2 \
    --clients-per-round 2 --eval-every 1 --checkpoint-dir "$T/avg" --metrics "$C/metrics/fedavg.jsonl" >/dev/null
cp "$T/lin/round-000002.safetensors" "$C/safetensors/fedsgd_linear_round2"
cp "$T/sec/round-000001.safetensors" "$C/safetensors/secure_counts_round1"
small "$T/avg/round-000002.safetensors" && cp "$T/avg/round-000002.safetensors" "$C/safetensors/fedavg_round2"

# cross-device plans, and the files of a round
for p in tests/xdev/secure_counts.json programs/fedsgd_linear.json programs/federated_evaluation.json \
    tests/client_state/counter.json; do
    "$BIN/fedplan" "$p" --to cross-device -o "$C/xdev_plan/$(basename "${p%.json}").json"
done
FUZZ_SEEDS=$C/xdev_files "$FUZZ/fuzz_xdev_files" -runs=0 >/dev/null 2>&1

# a FedJAX client as fedvm writes it (the msgpack, which the target compresses), from the synthetic file
/usr/bin/python3 - "$T/syn.sqlite" "$C/fedjax/synthetic_client" <<'EOF'
import sqlite3, sys, zlib
row = sqlite3.connect(sys.argv[1]).execute("SELECT data, num_examples FROM federated_data ORDER BY length(data) LIMIT 1").fetchone()
open(sys.argv[2], "wb").write(b"\x01" + bytes([min(row[1], 254)]) + zlib.decompress(row[0]))
EOF

/usr/bin/python3 tests/fuzz/seeds.py
echo "seeds: $(find "$C" -type f | wc -l) files, $(du -sk "$C" | cut -f1) KB in $C"
