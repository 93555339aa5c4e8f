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

echo "privacy: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
