#!/usr/bin/env bash
# run_memory.sh BIN - peak memory of a round does not grow with its clients: clients stream
# through the aggregations, block partials are merged as blocks finish, client keys are made
# when read. Each program runs one round over few and over many clients, and the growth of
# the peak resident memory between the two must stay under a bound the old behaviour (every
# block's partial held to the end, a key value per client) exceeds several times over.
# Under a sanitizer the runs are checked but not their memory (its allocator keeps freed
# memory for a while).
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

# grows PROGRAM FEW MANY BOUND_MB DESCRIPTION: the peak of MANY clients minus that of FEW is
# under BOUND_MB, on two threads; the result of MANY is the same on the seq backend.
grows() {
    local prog=$1 few=$2 many=$3 bound=$4 what=$5 a b
    if $sanitized; then
        expect 0 "$what: $few clients" -- "$BIN" run "$prog" --clients "$few" --rounds 1 --threads 2
        return
    fi
    a=$(OUT="$T/few" peak_kib "$BIN" run "$prog" --clients "$few" --rounds 1 --threads 2) || { bad "$what: $few clients"; return; }
    b=$(OUT="$T/many" peak_kib "$BIN" run "$prog" --clients "$many" --rounds 1 --threads 2) || { bad "$what: $many clients"; return; }
    echo "memory: $what: $((a / 1024)) MB with $few clients, $((b / 1024)) MB with $many"
    if [ $(( (b - a) / 1024 )) -lt "$bound" ]; then ok; else
        bad "$what: peak memory $((a / 1024)) MB with $few clients, $((b / 1024)) MB with $many (growth bound $bound MB)"; fi
    expect 0 "$what: seq" -- "$BIN" run "$prog" --clients "$many" --rounds 1 --backend seq && same "$T/out" "$T/many" "$what: seq and threads"
}

# A 1 MiB model from 2,000 clients (125 blocks): holding every block's partial takes 125 MB
# more than 100 clients; merging as blocks finish holds a chunk of 8 blocks per thread and the
# merge tree's 7 partials.
grows tests/memory/wide.json 100 2000 48 "block partials merged as they finish"
# 200,000 clients of a scalar model: a key value per client takes about 50 MB; made when read,
# the round holds a few bytes per client (the sampled indices, the keys' copy of them).
grows tests/memory/many.json 100 200000 16 "client keys made when read"

$sanitized && echo "memory: peak memory not measured under a sanitizer"
echo "memory: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
