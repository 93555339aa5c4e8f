#!/usr/bin/env bash
# run.sh - runs the libFuzzer targets built by 'make fuzz-build' (tests/fuzz/README.md).
#
# usage: tests/fuzz/run.sh replay OUT NAME...        every saved crash (tests/fuzz/regress/NAME/*) once
#        tests/fuzz/run.sh fuzz OUT SECONDS NAME...  each target SECONDS over its corpus (new inputs dropped)
#        tests/fuzz/run.sh long OUT SECONDS NAME...  the same, new inputs kept in OUT/corpus/NAME/
#        tests/fuzz/run.sh open OUT NAME...          the open findings (tests/fuzz/open/NAME/*): which still fail
#
# OUT holds the targets (OUT/fuzz_NAME). Each target runs as one process of one thread (OpenBLAS too);
# make fuzz starts one run.sh a target, as many at once as its -j allows. A run fails on any crash,
# sanitizer report, leak, input slower than 10 s, or memory past 1 GiB (resident, or a single allocation);
# the input is saved in OUT/crashes/NAME/ and the log in OUT/logs/NAME.log. Each fuzzing run appends a
# line (target, seconds, executions, corpus files) to OUT/fuzz-stats.tsv.
#
# A finding is known by its signature: what went wrong (every kind of running out of memory is one,
# "memory") and the first function of fedvm's (not of the diagnostics, arena, buffer or tensor helpers)
# on the stack, "heap-use-after-free xdev_meta_ints format/xdev.c".
# An open finding (tests/fuzz/open/NAME/SLUG with SLUG.sig) that is found again while fuzzing is
# reported and the run goes on (restarted for the time left; by make fuzz at most 20 times); any other
# finding fails the run.
# Exit status: 0 all passed, 1 some failed, 2 usage error.
set -u
export LC_ALL=C
mode=${1:-}
out=${2:-}
case $mode in
    replay|open) shift 2 ;;
    fuzz|long) seconds=${3:-}; shift 3 || true ;;
    *) mode= ;;
esac
if [ -z "$mode" ] || [ ! -d "$out" ]; then
    echo "usage: $0 replay|open OUT NAME... | fuzz|long OUT SECONDS NAME..." >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limits=(-timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=1024)
mkdir -p "$out/logs"
failed=0

# signature LOG: the signature of the finding a libFuzzer log reports.
signature() {
    local kind frame
    kind=$(sed -n -e 's/^SUMMARY: AddressSanitizer: \([a-z-]*\).*/\1/p' \
        -e 's/^SUMMARY: UndefinedBehaviorSanitizer: \([a-z-]*\).*/\1/p' \
        -e 's/.*ERROR: libFuzzer: out-of-memory (malloc.*/malloc-limit/p' \
        -e 's/.*ERROR: libFuzzer: out-of-memory (used.*/rss-limit/p' \
        -e 's/.*ERROR: libFuzzer: timeout.*/timeout/p' \
        -e 's/.*ERROR: LeakSanitizer: detected memory leaks.*/leak/p' \
        -e 's/^fuzz: \(tests\/fuzz\/[a-z_]*\.c\):\([0-9]*\):.*/fuzz-check \1/p' "$1" | head -n 1)
    frame=$(sed -n 's/^ *#[0-9]* 0x[0-9a-f]* in \([A-Za-z_][A-Za-z_0-9]*\) .*\/\(\(vm\|format\)\/[a-z_]*\.c\):[0-9].*/\1 \2/p' "$1" |
        grep -v -E ' vm/(status|arena|bufcache|tensor)\.c$' | head -n 1)
    case $kind in allocation-size-too-big|malloc-limit|rss-limit|out-of-memory) kind=memory ;; esac
    echo "${kind:-crash} ${frame:-?}"
}

# known NAME SIG: the open finding of target NAME with signature SIG, if any.
known() {
    local f
    for f in "$here/open/$1"/*.sig; do
        [ -f "$f" ] && [ "$(head -n 1 "$f")" = "$2" ] && { basename "${f%.sig}"; return 0; }
    done
    return 1
}

for name in "$@"; do
    bin=$out/fuzz_$name
    if [ ! -x "$bin" ]; then
        echo "FAIL $name: no target $bin"
        failed=1
        continue
    fi
    log=$out/logs/$name.log
    case $mode in
    replay|open)
        dir=$here/regress/$name
        [ "$mode" = open ] && dir=$here/open/$name
        shopt -s nullglob
        files=("$dir"/*)
        shopt -u nullglob
        [ ${#files[@]} -eq 0 ] && continue
        if [ "$mode" = replay ]; then
            if "$bin" "${limits[@]}" "${files[@]}" >"$log" 2>&1; then
                echo "replay $name: ${#files[@]} saved input(s) pass"
            else
                echo "FAIL $name: a saved input fails again (log: $log)"
                grep -m3 -E 'ERROR|SUMMARY|fuzz:|Running: ' "$log" | tail -n 3
                failed=1
            fi
            continue
        fi
        for f in "${files[@]}"; do
            case $f in *.sig) continue ;; esac
            if "$bin" "${limits[@]}" "$f" >"$log" 2>&1; then
                echo "open $name/$(basename "$f"): passes now (move it to tests/fuzz/regress/$name/, drop its .sig)"
            elif [ "$(signature "$log")" = "$(head -n 1 "$f.sig" 2>/dev/null)" ]; then
                echo "open $name/$(basename "$f"): still fails ($(signature "$log"))"
            else
                echo "open $name/$(basename "$f"): fails otherwise: $(signature "$log") (log: $log)"
                failed=1
            fi
        done
        ;;
    fuzz|long)
        seeds=$here/corpus/$name
        mkdir -p "$seeds"
        if [ "$mode" = long ]; then
            work=$out/corpus/$name
        else
            work=$out/tmp/$name
            rm -rf "$work"
        fi
        mkdir -p "$work" "$out/crashes/$name"
        opts=("${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/crashes/$name/")
        [ -f "$here/$name.dict" ] && opts+=(-dict="$here/$name.dict")
        [ "$mode" = long ] && opts+=(-use_value_profile=1)
        start=$(date +%s)
        end=$((start + seconds))
        execs=0 restarts=0
        : >"$log"
        while :; do
            left=$((end - $(date +%s)))
            [ "$left" -lt 1 ] && left=1
            opts[3]=-max_total_time=$left
            "$bin" "${opts[@]}" "$work" "$seeds" >"$log.run" 2>&1
            status=$?
            cat "$log.run" >>"$log"
            n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log.run" | tail -n 1)
            execs=$((execs + ${n:-0}))
            [ "$status" -eq 0 ] && break
            sig=$(signature "$log.run")
            slug=$(known "$name" "$sig") || break
            echo "fuzz $name: found open finding $slug again ($sig)"
            rm -f $(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$log.run")
            restarts=$((restarts + 1))
            if { [ "$mode" = fuzz ] && [ "$restarts" -ge 20 ]; } || [ "$(date +%s)" -ge "$end" ]; then
                status=0
                break
            fi
        done
        rm -f "$log.run"
        took=$(($(date +%s) - start))
        rate=$((execs / (took > 0 ? took : 1)))
        corpus=$(sed -n 's/.*\(DONE\|INITED\|REDUCE\|NEW\|pulse\).* corp: \([0-9]*\)\/\([0-9a-zA-Z]*\).*/\2 \3/p' "$log" | tail -n 1)
        printf '%s\t%s\t%s\t%s\n' "$name" "$took" "$execs" "${corpus%% *}" >>"$out/fuzz-stats.tsv"
        if [ "$status" -eq 0 ]; then
            echo "fuzz $name: ${took} s, ${execs} runs (${rate}/s), corpus ${corpus:-?}"
        else
            echo "FAIL $name: exit $status after ${took} s: $(signature "$log") (log: $log)"
            grep -m4 -E '^==[0-9]+==ERROR|SUMMARY|^fuzz:|runtime error|ERROR: libFuzzer' "$log"
            grep -m2 -E 'Test unit written to|artifact_prefix' "$log"
            failed=1
        fi
        [ "$mode" = fuzz ] && rm -rf "$work"
        ;;
    esac
done
exit $failed
