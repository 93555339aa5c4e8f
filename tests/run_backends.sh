#!/usr/bin/env bash
# run_backends.sh BIN TEST_GOLDEN - backend conformance: every golden program and a training run give
# the same bits on seq, threads (1, 2, 4) and mpi (1, 2, 3 ranks under mpirun, and a singleton);
# rank 0 alone prints and writes files; a client failing on another rank gives seq's error report
# on rank 0 and a non-zero exit on every rank, never a hang. The mpi cases are skipped, with a
# message, when mpirun is missing or fedvm was built without MPI.
set -u
BIN=${1:?usage: tests/run_backends.sh path/to/fedvm path/to/test_golden}
GOLDEN=${2:?usage: tests/run_backends.sh path/to/fedvm path/to/test_golden}
. "$(dirname "$0")/lib.sh"

PY=$(python_with numpy)
if [ -z "$PY" ]; then echo "run_backends: no python3 with numpy (make deps)"; exit 1; fi

mpi_setup run_backends "$BIN"
# mpirun's own lines (its job summary on a failure) are not fedvm's: drop them from $T/err.
fedvm_lines() { grep -vE '^(-{10,}|Primary job|a non-zero exit code|mpirun |the job to be terminated|  Process name|  Exit code|$)' "$1"; }

# -- every golden program: test_golden compares each case's bits on mpi (fused and unfused)
# with seq's, on 1, 2 and 3 ranks (seq and threads are compared by 'make test' itself)
if [ -n "$MPI" ]; then
    for np in 1 2 3; do
        expect 0 "golden programs on $np ranks" -- timeout 120 $MPI -np "$np" "$GOLDEN" --mpi &&
            check "every case ran on $np ranks" -- test "$(grep -c "mpi ranks (rank 0): ok" "$T/out")" -ge 6
    done
fi

# -- a training run: FedAvg on Synthetic(1,1) with 40 clients of 20-60 examples, 20 sampled per
# round (two blocks of the reduction tree: 2 ranks take a block each, 3 ranks share the
# clients), evaluation after every round, a checkpoint per round
D="$T/syn.sqlite"
"$BIN" data synthetic --kind fedprox --alpha 1 --beta 1 --clients 40 --min-examples 20 --max-examples 60 --seed 5 \
    -o "$D" >/dev/null 2>&1 || { echo "run_backends: cannot make data"; exit 1; }
P=tests/train/softmax.json
RUN="$P --data train=$D --data test=$D:test --rounds 3 --clients-per-round 20 --seed 7 --eval-every 1"

# train NAME LAUNCHER... -- ARGS: a run into $T/NAME.{out,jsonl} and $T/NAME.ck/
train() {
    local name=$1; shift
    local launch=()
    while [ "$1" != -- ]; do launch+=("$1"); shift; done
    shift
    rm -rf "$T/$name.ck" "$T/$name.jsonl"
    expect 0 "train on $name" -- timeout 120 "${launch[@]}" "$BIN" run $RUN --metrics "$T/$name.jsonl" \
        --checkpoint-dir "$T/$name.ck" "$@" && cp "$T/out" "$T/$name.out" && cp "$T/err" "$T/$name.err"
}
# compare NAME: NAME's run against seq's: stdout and the metrics file byte for byte (less each
# line's timings), every checkpoint tensor by tensor
compare() {
    same "$T/seq.out" "$T/$1.out" "$1: printed rounds"
    check "$1: metrics file" -- "$PY" - "$T/seq.jsonl" "$T/$1.jsonl" <<'PY'
import re, sys
a, b = (re.sub(r'"(eval_|cpu_)?seconds": [0-9.e+-]+, ', '', open(p).read()) for p in sys.argv[1:])
assert a.count("\n") == 4 and a.startswith('{"run": ') and '"sampled"' in a, a
assert a == b, (a, b)
PY
    check "$1: checkpoints tensor by tensor" -- "$PY" - "$T/seq.ck" "$T/$1.ck" <<'PY'
import os, sys
sys.path.insert(0, "tests")
from reflib import read_safetensors
names = sorted(os.listdir(sys.argv[1]))
assert names == sorted(os.listdir(sys.argv[2])) and len(names) == 3, names
for n in names:
    (ta, ma), (tb, mb) = (read_safetensors(os.path.join(d, n)) for d in sys.argv[1:])
    assert ma == mb and sorted(ta) == sorted(tb) == ["b", "w"], (n, ma, mb, sorted(ta), sorted(tb))
    for k in ta:
        assert ta[k].dtype == tb[k].dtype and ta[k].shape == tb[k].shape, (n, k)
        assert ta[k].tobytes() == tb[k].tobytes(), "%s: tensor %s differs" % (n, k)
PY
}

train seq -- --backend seq
check "the run learns" -- "$PY" -c '
import json, sys
l = [json.loads(x) for x in open(sys.argv[1])]
assert l[-1]["eval"]["accuracy"] > 0.3 and l[-1]["eval"]["loss"] < l[0]["train"]["loss"], l' "$T/seq.out"
for t in 1 2 4; do
    train "threads$t" -- --threads "$t" && compare "threads$t"
done
if [ -n "$MPI" ]; then
    for np in 1 2 3; do
        train "mpi$np" $MPI -np "$np" -- --backend mpi && compare "mpi$np"
        check "mpi$np: one summary line, from rank 0" -- test "$(grep -c "rounds in" "$T/mpi$np.err")" -eq 1
    done
    train singleton $MPI_ENV -- --backend mpi && compare singleton
    # mpi is the default under mpirun
    train default $MPI -np 2 -- && compare default
    # resumed under mpirun after round 2 of a sequential run: the same last checkpoint
    rm -rf "$T/resume.ck"
    expect 0 "2 rounds in sequence" -- "$BIN" run $RUN --rounds 2 --backend seq --checkpoint-dir "$T/resume.ck"
    expect 0 "resume on 3 ranks" -- timeout 120 $MPI -np 3 "$BIN" run $RUN --backend mpi --resume "$T/resume.ck" &&
        has "$T/err" "resuming after round 2" "resume note"
    check "one resume note" -- test "$(grep -c "resuming after round" "$T/err")" -eq 1
    same "$T/seq.ck/round-000003.safetensors" "$T/resume.ck/round-000003.safetensors" "resumed on 3 ranks"

    # -- errors: a client of rank 2 (clients 8-11 of 12 on 3 ranks) fails; then one of rank 1 too,
    # whose error is the lowest-numbered and so the one reported. Each rank's exit code is
    # written down (mpirun is told not to end the job at the first non-zero exit, and then
    # exits with 0 itself).
    CF=tests/backends/client_fails.json
    for idx in "[0,1,2,3,0,1,2,3,0,1,9,3]" "[0,1,2,3,0,7,2,3,0,1,9,3]"; do
        expect 1 "failing client in sequence" -- "$BIN" run $CF --arg "index=$idx" --backend seq && cp "$T/err" "$T/seq.err"
        expect 1 "failing client on 3 threads" -- "$BIN" run $CF --arg "index=$idx" --threads 3 && same "$T/seq.err" "$T/err" "threads"
        rm -f "$T"/rc.*
        expect 0 "failing client on 3 ranks (mpirun waits for all)" -- env OMPI_MCA_orte_abort_on_non_zero_status=0 timeout 120 $MPI -np 3 \
            sh -c '"$0" "$@"; rc=$?; echo $rc >"'"$T"'/rc.$OMPI_COMM_WORLD_RANK"; exit $rc' \
            "$BIN" run $CF --arg "index=$idx" --backend mpi &&
            fedvm_lines "$T/err" >"$T/err.fedvm" && same "$T/seq.err" "$T/err.fedvm" "error report on 3 ranks"
        check "every rank exits with 1" -- test "$(cat "$T"/rc.0 "$T"/rc.1 "$T"/rc.2 | tr '\n' ' ')" = "1 1 1 "
    done
    has "$T/seq.err" "client 5's" "the lowest failing client is reported"

    # -- a file only rank 0 writes: every rank stops, the error is printed once
    expect 1 "metrics into a missing directory on 3 ranks" -- timeout 120 $MPI -np 3 "$BIN" run $RUN --backend mpi \
        --metrics "$T/no/such/dir/m.jsonl" && check "one error line" -- test "$(grep -c "cannot open the metrics file" "$T/err")" -eq 1
    # a program file missing: the same error from every rank, printed once
    expect 1 "missing program on 3 ranks" -- timeout 120 $MPI -np 3 "$BIN" run "$T/none.json" --backend mpi &&
        check "one error line" -- test "$(grep -c "none.json" "$T/err")" -eq 1
    # a value printed once, on a run without client data
    expect 0 "a result on 3 ranks" -- timeout 120 $MPI -np 3 "$BIN" run $CF --arg "index=[0,1,2,3,0,1,2,3,0,1,2,3]" --backend mpi &&
        check "printed once" -- test "$(cat "$T/out")" = "48.0"
fi
expect 2 "unknown backend" -- "$BIN" run $P --backend gpu && has "$T/err" "--backend is seq, threads or mpi" "backend name"
expect 2 "--threads with mpi" -- "$BIN" run $P --backend mpi --threads 2 && has "$T/err" "--threads is for --backend threads" "threads option"

echo "run_backends: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
