#!/usr/bin/env bash
# run_invalid.sh - runs the invalid-input corpus through fedvm and checks each error.
#
# usage: tests/run_invalid.sh BIN        (BIN: the fedvm binary, e.g. bin/fedvm)
#
# tests/invalid/NAME.json|.yaml|.yml   checked with 'BIN check FILE'
# tests/invalid/run/NAME.json          run with 'BIN run FILE ARGS...', ARGS from NAME.args
#                                      (one line, split at whitespace, no quoting)
# NAME.expect, two lines:
#   1. the location prefix, 'FILE:LINE:COL: POINTER' (or 'fedvm:' for errors without a file)
#   2. a substring of the message
# A case passes when fedvm exits with status 1, some stderr line starts with
# line 1 and contains line 2 (both compared as fixed strings), and stderr has
# no sanitizer report. Files under tests/invalid/inc/ are only included by
# others; files under tests/invalid/run/data/ are argument values.
# Exit status: 0 all passed, 1 some failed, 2 usage error.
set -u
export LC_ALL=C

MIN_CHECK=50
MIN_RUN=8
TIMEOUT=20

if [ $# -ne 1 ]; then
    echo "usage: $0 BIN" >&2
    exit 2
fi
bin=$1
case $bin in
    /*) ;;
    */*) bin=$PWD/$bin ;;
esac
if [ ! -x "$bin" ]; then
    echo "$0: $1 is not an executable file" >&2
    exit 2
fi
cd "$(dirname "$0")/.." || exit 2
shopt -s nullglob
# Leaks are errors too when BIN is a sanitizer build.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

passed=0
failed=0
ncheck=0
nrun=0
err=$(mktemp) || exit 2
trap 'rm -f "$err"' EXIT

fail() {
    echo "FAIL $1: $2"
    failed=$((failed + 1))
}

# Reads NAME.expect into want_loc and want_msg; false (after reporting) when malformed.
read_expect() {
    local input=$1 expect=$2 lines
    if [ ! -f "$expect" ]; then
        fail "$input" "no $expect"
        return 1
    fi
    mapfile -t lines < "$expect"
    want_loc=${lines[0]-}
    want_msg=${lines[1]-}
    if [ "${#lines[@]}" -ne 2 ] || [ -z "$want_loc" ] || [ -z "$want_msg" ]; then
        fail "$input" "$expect must have exactly two non-empty lines (location, message)"
        return 1
    fi
    return 0
}

# Runs the command in "$@" and judges its exit status and stderr against the expectation.
judge() {
    local input=$1 status line first=""
    shift
    # In a subshell, so the shell's own "Segmentation fault" notice stays out of the report.
    (timeout "$TIMEOUT" "$@" > /dev/null 2> "$err" < /dev/null; exit $?) 2> /dev/null
    status=$?
    if grep -qF -e AddressSanitizer -e LeakSanitizer -e 'runtime error:' "$err"; then
        fail "$input" "sanitizer report: $(grep -m1 -F -e AddressSanitizer -e LeakSanitizer -e 'runtime error:' "$err" | cut -c1-300)"
        return
    fi
    if [ "$status" -eq 124 ]; then
        fail "$input" "timed out after ${TIMEOUT}s"
        return
    fi
    if [ "$status" -gt 128 ]; then
        fail "$input" "killed by signal $((status - 128))"
        return
    fi
    if [ "$status" -ne 1 ]; then
        fail "$input" "exit status $status, expected 1"
        return
    fi
    while IFS= read -r line || [ -n "$line" ]; do
        [ -z "$first" ] && first=$line
        if [[ $line == "$want_loc"* && $line == *"$want_msg"* ]]; then
            passed=$((passed + 1))
            return
        fi
    done < "$err"
    fail "$input" "no stderr line starts with '$want_loc' and contains '$want_msg'; first line: ${first:0:300}"
}

# ---- fedvm check -------------------------------------------------------------
for input in tests/invalid/*.json tests/invalid/*.yaml tests/invalid/*.yml; do
    ncheck=$((ncheck + 1))
    read_expect "$input" "${input%.*}.expect" || continue
    judge "$input" "$bin" check "$input"
done

# ---- fedvm run ---------------------------------------------------------------
for input in tests/invalid/run/*.json; do
    nrun=$((nrun + 1))
    read_expect "$input" "${input%.json}.expect" || continue
    argsfile=${input%.json}.args
    if [ ! -f "$argsfile" ]; then
        fail "$input" "no $argsfile"
        continue
    fi
    args=()
    read -r -a args < "$argsfile"
    judge "$input" "$bin" run "$input" "${args[@]}"
done

# ---- files without a partner -----------------------------------------------------
for expect in tests/invalid/*.expect; do
    base=${expect%.expect}
    if [ ! -f "$base.json" ] && [ ! -f "$base.yaml" ] && [ ! -f "$base.yml" ]; then
        fail "$expect" "no input $base.json or $base.yaml"
    fi
done
for extra in tests/invalid/run/*.expect tests/invalid/run/*.args; do
    base=${extra%.*}
    [ -f "$base.json" ] || fail "$extra" "no input $base.json"
done

if [ "$ncheck" -lt "$MIN_CHECK" ]; then
    fail tests/invalid "only $ncheck check cases; the corpus needs at least $MIN_CHECK"
fi
if [ "$nrun" -lt "$MIN_RUN" ]; then
    fail tests/invalid/run "only $nrun run cases; the corpus needs at least $MIN_RUN"
fi

echo "invalid inputs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
