#!/usr/bin/env bash
# measure_data_memory.sh BIN [CLIENTS...] - peak memory of 'fedvm data' as the number of clients grows.
#
# For each count (default 1000 10000 100000) generates a synthetic LEAF dataset
# (--min-examples 5 --max-examples 20), then decodes every client of both splits
# ('fedvm data info --verify') and reads the last client alone ('fedvm data head').
# Prints the file size, the wall time and the peak resident memory of each step. Reading opens only the client index, and
# for FedJAX files with contiguous rowids that takes no memory per client, so the
# peak RSS of the reads should stay flat as the clients grow. Not part of
# 'make test' (it takes a minute and a few hundred MB of disk).
set -eu
BIN=${1:?usage: tests/measure_data_memory.sh path/to/fedvm [CLIENTS...]}
shift
COUNTS=${*:-1000 10000 100000}
PY=${PYTHON:-python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# run CMD...: prints "seconds peak_kib" of CMD (its output discarded). GNU time when present
# (/usr/bin/time, Debian's 'time'); else getrusage from Python, whose figure is an upper
# bound: a child's peak includes the Python launcher it was forked from (about 13 MB).
run() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f "%e %M" -o "$T/time" "$@" >/dev/null 2>&1
        cat "$T/time"
        return
    fi
    "$PY" - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("%.1f %d" % (time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
PY
}

printf '%-8s %10s %10s | %-22s | %-22s | %-22s\n' clients examples "file MB" "generate: s, peak MB" "info --verify: s, MB" "head last: s, MB"
for n in $COUNTS; do
    f="$T/synthetic_$n.sqlite"
    read -r gt gm < <(run "$BIN" data synthetic --kind leaf --clients "$n" --min-examples 5 --max-examples 20 -o "$f")
    read -r vt vm < <(run "$BIN" data info "$f" --verify)
    read -r ht hm < <(run "$BIN" data head "$f" "$((n - 1))" -n 1)
    examples=$("$BIN" data info "$f" | "$PY" -c 'import re, sys; print(sum(int(x) for x in re.findall(r"clients?, (\d+) examples", sys.stdin.read())))')
    size=$(( $(stat -c %s "$f") / 1048576 ))
    mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
    printf '%-8s %10s %10s | %8s %12s | %8s %12s | %8s %12s\n' "$n" "$examples" "$size" \
        "$gt" "$(mb "$gm")" "$vt" "$(mb "$vm")" "$ht" "$(mb "$hm")"
    rm -f "$f"
done
