#!/usr/bin/env bash
# run_hostile.sh - runs the hostile-input corpus (tests/hostile/*.case) and checks each error.
#
# usage: tests/run_hostile.sh BINDIR      (BINDIR holds fedvm and fedplan, e.g. bin)
#
# The case format is in tests/hostile/README.md. A case passes when its run ends
# with the expected exit status within its time limit (and, outside sanitizer
# builds, within 1 GiB of address space), with no sanitizer report, and some
# stderr line starts with its 'where' and contains its 'says'.
# Exit status: 0 all passed, 1 some failed, 2 usage error.
set -u
export LC_ALL=C
if [ $# -ne 1 ] || [ ! -x "$1/fedvm" ] || [ ! -x "$1/fedplan" ]; then
    echo "usage: $0 BINDIR (holding fedvm and fedplan)" >&2
    exit 2
fi
BINDIR=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
export REPO
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
sanitized=no
if nm "$BINDIR/fedvm" 2>/dev/null | grep -q -e __asan_init -e __tsan_init; then sanitized=yes; fi
fedvm() { "$BINDIR/fedvm" "$@"; }
fedplan() { "$BINDIR/fedplan" "$@"; }
export -f fedvm fedplan
export BINDIR

passed=0 failed=0
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

shopt -s nullglob
for case in "$REPO"/tests/hostile/*.case; do
    name=tests/hostile/$(basename "$case")
    setups=() run="" want_exit=1 where="" says="" limit=20 nrun=0
    while IFS= read -r line || [ -n "$line" ]; do
        case $line in
            '#'*|'') ;;
            setup:*) setups+=("${line#setup:}") ;;
            run:*) run=${line#run:}; nrun=$((nrun + 1)) ;;
            exit:*) want_exit=$(echo ${line#exit:}) ;;
            where:*) where=${line#where: } ;;
            says:*) says=${line#says: } ;;
            limit:*) limit=$(echo ${line#limit:}) ;;
            *) fail "$name" "unknown line: $line"; continue 2 ;;
        esac
    done < "$case"
    if [ "$nrun" -ne 1 ] || [ -z "$where" ] || [ -z "$says" ]; then
        fail "$name" "needs one 'run:', a 'where:' and a 'says:'"
        continue
    fi
    T=$(mktemp -d)
    export T
    where=${where//\$T/$T}; where=${where//\$REPO/$REPO}
    for s in "${setups[@]}"; do
        if ! (cd "$T" && bash -c "$s") > "$T/.setup" 2>&1; then
            fail "$name" "setup failed: $s: $(head -c 300 "$T/.setup")"
            rm -rf "$T"
            continue 2
        fi
    done
    (
        cd "$T" || exit 99
        if [ "$sanitized" = no ]; then ulimit -v $((1024 * 1024)); fi
        exec timeout -k 5 "$limit" bash -c "$run" > "$T/.out" 2> "$T/.err" < /dev/null
    ) 2> /dev/null
    status=$?
    if grep -qE 'AddressSanitizer|LeakSanitizer|ThreadSanitizer|runtime error:' "$T/.err"; then
        fail "$name" "sanitizer report: $(grep -m1 -E 'AddressSanitizer|LeakSanitizer|ThreadSanitizer|runtime error:' "$T/.err" | cut -c1-300)"
    elif [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        fail "$name" "ran past its ${limit} s limit"
    elif grep -q -i -e 'out of memory' -e 'cannot allocate' "$T/.err" && [ "$want_exit" != "$status" ]; then
        fail "$name" "ran out of memory (exit $status)"
    elif [ "$status" -ne "$want_exit" ]; then
        fail "$name" "exit status $status, expected $want_exit; stderr: $(head -c 300 "$T/.err")"
    else
        found=no
        while IFS= read -r line || [ -n "$line" ]; do
            if [[ $line == "$where"* && $line == *"$says"* ]]; then found=yes; break; fi
        done < "$T/.err"
        if [ "$found" = yes ]; then
            passed=$((passed + 1))
        else
            fail "$name" "no stderr line starts with '$where' and contains '$says'; stderr: $(head -c 300 "$T/.err")"
        fi
    fi
    rm -rf "$T"
done
echo "hostile inputs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
