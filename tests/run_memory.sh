#!/usr/bin/env bash
# run_memory.sh BIN - peak memory of a round does not grow with its clients: clients stream
# through the aggregations, block partials are merged as blocks finish, client keys are made
# when read, and the programs aggregate their client lists where they make them. Each case
# runs one round over few and over many clients; the growth of the peak resident memory
# between the two must stay under a bound that what each fix removed exceeds several times
# over (every block's partial held to the end, a key value per client, a client list handed
# to a call). Under a sanitizer the runs are checked but not their memory (its allocator
# keeps freed memory for a while).
set -u
BIN=${1:?usage: tests/run_memory.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}

sanitized=false
if ldd "$BIN" 2>/dev/null | grep -qE 'lib(a|t)san'; then sanitized=true; fi

# peak_kib CMD...: runs CMD (its stdout to $T/out) and prints its peak resident memory in KiB
# (getrusage of the child; the Python that starts it adds the same few MB to every figure).
peak_kib() {
    "$PY" - "$@" <<'PY'
import os, resource, subprocess, sys
with open(os.environ["OUT"], "w") as out:
    rc = subprocess.run(sys.argv[1:], stdout=out, stderr=subprocess.DEVNULL).returncode
if rc:
    sys.exit("exit %d: %s" % (rc, " ".join(sys.argv[1:])))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}

# cmd_for K ARGS...: sets CMD to '$BIN run ARGS... --rounds 1', the word K replaced by the number K.
cmd_for() {
    local k=$1 w
    shift
    CMD=("$BIN" run)
    for w in "$@"; do if [ "$w" = K ]; then CMD+=("$k"); else CMD+=("$w"); fi; done
    CMD+=(--rounds 1)
}

# grows FEW MANY BOUND_MB DESCRIPTION -- ARGS...: one round of 'fedvm run ARGS...' (where the
# word K stands for the clients of the round) over MANY clients peaks under BOUND_MB above its
# peak over FEW, on two threads; with MANY, the seq backend prints the same.
grows() {
    local few=$1 many=$2 bound=$3 what=$4 a b
    shift 5
    if $sanitized; then
        cmd_for "$few" "$@"
        expect 0 "$what: $few clients" -- "${CMD[@]}" --threads 2
        return
    fi
    cmd_for "$few" "$@"
    a=$(OUT="$T/few" peak_kib "${CMD[@]}" --threads 2) || { bad "$what: $few clients"; return; }
    cmd_for "$many" "$@"
    b=$(OUT="$T/many" peak_kib "${CMD[@]}" --threads 2) || { bad "$what: $many clients"; return; }
    echo "memory: $what: $((a / 1024)) MB with $few clients, $((b / 1024)) MB with $many"
    if [ $(( (b - a) / 1024 )) -lt "$bound" ]; then ok; else
        bad "$what: peak memory $((a / 1024)) MB with $few clients, $((b / 1024)) MB with $many (growth bound $bound MB)"; fi
    expect 0 "$what: seq" -- "${CMD[@]}" --backend seq && same "$T/out" "$T/many" "$what: seq and threads"
}

# A 1 MiB model from 2,000 clients (125 blocks): holding every block's partial takes 125 MB
# more than 100 clients; merging as blocks finish holds a chunk of 8 blocks per thread and the
# merge tree's 7 partials.
grows 100 2000 48 "block partials merged as they finish" -- tests/memory/wide.json --clients K
# 200,000 clients of a scalar model: a key value per client takes about 50 MB; made when read,
# the round holds a few bytes per client (the sampled indices, the keys' copy of them).
grows 100 200000 16 "client keys made when read" -- tests/memory/many.json --clients K
# FedSGD over 20,000 of LEAF's synthetic clients: a client list handed to a call (the metric
# totals, once summed by a library function) is held whole, about 5 KB a client; summed where
# it is made, it streams.
D="$T/leaf.sqlite"
if "$BIN" data synthetic --kind leaf --clients 20000 --min-examples 2 --max-examples 5 --test-fraction 0 -o "$D" >/dev/null 2>&1; then
    ok
    grows 100 20000 32 "programs/fedsgd.json streams its clients" -- programs/fedsgd.json --data "train=$D" --clients-per-round K
else
    bad "cannot make $D"
fi

$sanitized && echo "memory: peak memory not measured under a sanitizer"
echo "memory: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
