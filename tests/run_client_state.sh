#!/usr/bin/env bash
# run_client_state.sh BIN - programs that keep a state on each client (initialize_client, next's
# client_states): the state a client gets in each round is the one its last round gave it (or
# its first), checked round by round; SCAFFOLD and FedDyn against NumPy references written from
# their papers (tests/client_state/reference.py); the same bits on seq, threads and mpi; a run
# killed with SIGKILL resumes to the bits of one never stopped, states included; 100,000
# clients in flat memory; and the errors a user meets.
set -u
BIN=${1:?usage: tests/run_client_state.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"
PY=$(python_with numpy)
if [ -z "$PY" ]; then echo "run_client_state: no python3 with numpy (make deps)"; exit 1; fi
mpi_setup run_client_state "$BIN"
sanitized=false
if ldd "$BIN" 2>/dev/null | grep -qE 'lib(a|t)san'; then sanitized=true; fi
# Open MPI's TCP transport takes its own locks in an order ThreadSanitizer reports as an
# inversion (mca_btl_tcp_add_procs against mca_btl_tcp_proc_remove, not fedvm's): no ranks under it.
if [ -n "$MPI" ] && ldd "$BIN" 2>/dev/null | grep -q libtsan; then
    echo "run_client_state: mpi cases skipped under ThreadSanitizer"
    MPI=""
fi
C=tests/client_state/counter.json

# dump STORE OUT: every client's latest state in a store, one line each (client, round, bytes' digest)
dump() {
    "$PY" - "$1" >"$2" <<'EOF'
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for c, r, s in db.execute("SELECT client, max(round), state FROM client_state GROUP BY client ORDER BY client"):
    print(c, r, hashlib.sha256(s).hexdigest())
EOF
}

# -- the bookkeeping, round by round: a client's count is the number of its earlier rounds, the
# indices and the number of clients are given, on every backend
RUN="$C --clients 40 --clients-per-round 7 --rounds 12 --seed 5"
expect 0 "counter: seq" -- "$BIN" run $RUN --backend seq --metrics "$T/counter.jsonl" --checkpoint-dir "$T/counter" &&
    cp "$T/out" "$T/counter.out"
check "counter: each round sees its clients' earlier rounds, indices and the population" -- "$PY" - "$T/counter.jsonl" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])][1:]
times = {}
assert len(lines) == 12, len(lines)
for l in lines:
    picked, m = l["sampled"], l["train"]
    assert m["seen"] == sum(times.get(c, 0) for c in picked), (l["round"], m, picked)
    assert m["index_sum"] == sum(picked) and m["num_clients"] == 40 and m["rounds"] == l["round"], m
    for c in picked:
        times[c] = times.get(c, 0) + 1
assert max(times.values()) > 1, times
EOF
dump "$T/counter/client_states.sqlite" "$T/counter.dump"
check "counter: the store holds every client that took part, at its last round" -- "$PY" - "$T/counter.jsonl" "$T/counter.dump" <<'EOF'
import json, sys
last = {}
for l in [json.loads(l) for l in open(sys.argv[1])][1:]:
    for c in l["sampled"]:
        last[c] = l["round"]
got = {int(a): int(b) for a, b, _ in (l.split() for l in open(sys.argv[2]))}
assert got == last, (got, last)
EOF
for b in "--threads 1" "--threads 2"; do
    expect 0 "counter: $b" -- "$BIN" run $RUN $b --checkpoint-dir "$T/c${b// /}" && same "$T/out" "$T/counter.out" "counter: $b and seq"
    dump "$T/c${b// /}/client_states.sqlite" "$T/c.dump" && same "$T/c.dump" "$T/counter.dump" "counter store: $b and seq"
done
if [ -n "$MPI" ]; then
    for np in 2 3; do
        expect 0 "counter: $np ranks" -- timeout 120 $MPI -np $np "$BIN" run $RUN --backend mpi --checkpoint-dir "$T/cmpi$np" &&
            same "$T/out" "$T/counter.out" "counter: $np ranks and seq"
        dump "$T/cmpi$np/client_states.sqlite" "$T/c.dump" && same "$T/c.dump" "$T/counter.dump" "counter store: $np ranks and seq"
    done
fi
# Without a checkpoint directory the states live in a temporary store: same rounds, nothing left behind.
expect 0 "counter: no checkpoints" -- "$BIN" run $RUN --threads 2 && same "$T/out" "$T/counter.out" "counter: temporary store"

# -- SCAFFOLD and FedDyn against NumPy, replaying the clients each round sampled (full-batch
# local steps, so the reference need not replay the shuffles)
"$PY" tests/client_state/reference.py data "$T/small.json" --clients 8 --seed 3
SMALL="--arg train=@$T/small.json --rounds 5 --clients-per-round 3 --set epochs=3 --set batch_size=100 --set client_lr=0.1 --seed 2"
for a in scaffold feddyn; do
    expect 0 "$a: fedvm run" -- "$BIN" run programs/$a.json $SMALL --metrics "$T/$a.jsonl" --checkpoint-dir "$T/$a" &&
        cp "$T/out" "$T/$a.out"
    check "$a: the server state and every client's state match the reference" -- "$PY" tests/client_state/reference.py \
        check $a "$T/small.json" "$T/$a.jsonl" "$T/$a/round-000005.safetensors" "$T/$a/client_states.sqlite" --epochs 3 --lr 0.1
    dump "$T/$a/client_states.sqlite" "$T/$a.dump"
    if [ -n "$MPI" ]; then
        expect 0 "$a: 2 ranks" -- timeout 120 $MPI -np 2 "$BIN" run programs/$a.json $SMALL --backend mpi --checkpoint-dir "$T/${a}mpi" &&
            same "$T/out" "$T/$a.out" "$a: 2 ranks and seq"
        same_state "$T/$a/round-000005.safetensors" "$T/${a}mpi/round-000005.safetensors" "$a: final state on 2 ranks"
        dump "$T/${a}mpi/client_states.sqlite" "$T/m.dump" && same "$T/m.dump" "$T/$a.dump" "$a store: 2 ranks and seq"
    fi
done
# the reference check can fail: another learning rate than the run's
if "$PY" tests/client_state/reference.py check scaffold "$T/small.json" "$T/scaffold.jsonl" "$T/scaffold/round-000005.safetensors" \
    "$T/scaffold/client_states.sqlite" --epochs 3 --lr 0.11 >/dev/null 2>&1; then bad "the reference accepts another learning rate"; else ok; fi

# -- SIGKILL and resume: SCAFFOLD on Synthetic(1,1), a checkpoint every 3 rounds, so the store
# holds rounds after the last checkpoint when the run dies
D="$T/syn.sqlite"
expect 0 "Synthetic(1,1)" -- "$BIN" data synthetic --kind fedprox --alpha 1 --beta 1 --clients 12 --seed 4 -o "$D"
R="programs/scaffold.json --data train=$D --rounds 300 --clients-per-round 4 --seed 9 --set epochs=2 --checkpoint-every 3"
expect 0 "scaffold: uninterrupted" -- "$BIN" run $R --checkpoint-dir "$T/full" --threads 2 && dump "$T/full/client_states.sqlite" "$T/full.dump"
"$BIN" run $R --checkpoint-dir "$T/killed" --threads 2 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 400); do [ -e "$T/killed/round-000006.safetensors" ] && break; sleep 0.02; done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
n=$(ls "$T/killed" | grep -c '^round-.*safetensors$')
if [ "$n" -ge 1 ] && [ "$n" -lt 100 ]; then ok; else bad "the killed run left $n checkpoints"; fi
cp -r "$T/killed" "$T/src"
expect 0 "scaffold: resume after SIGKILL" -- "$BIN" run $R --resume "$T/killed" --threads 2 && has "$T/err" "resuming after round" "resume note"
same_state "$T/full/round-000300.safetensors" "$T/killed/round-000300.safetensors" "scaffold: final state after SIGKILL and resume"
dump "$T/killed/client_states.sqlite" "$T/killed.dump" && same "$T/killed.dump" "$T/full.dump" "scaffold: client states after SIGKILL and resume"
# resuming into another directory copies the states; the original is left as it was
dump "$T/src/client_states.sqlite" "$T/src.before"
expect 0 "scaffold: resume into another directory" -- "$BIN" run $R --resume "$T/src" --checkpoint-dir "$T/moved" &&
    same_state "$T/full/round-000300.safetensors" "$T/moved/round-000300.safetensors" "scaffold: resumed elsewhere"
dump "$T/moved/client_states.sqlite" "$T/moved.dump" && same "$T/moved.dump" "$T/full.dump" "scaffold: states resumed elsewhere"
dump "$T/src/client_states.sqlite" "$T/src.after" && same "$T/src.after" "$T/src.before" "scaffold: the resumed-from store unchanged"
# the store keeps what its last checkpoint needs: an earlier checkpoint cannot be resumed
cp -r "$T/full" "$T/early" && rm "$T/early/round-000300.safetensors"
expect 1 "resume from an earlier checkpoint than the states'" -- "$BIN" run $R --resume "$T/early" &&
    has "$T/err" "holds the clients' states as of the checkpoint of round 300, not of round 297" "earlier checkpoint"

# -- learning: on Synthetic(1,1) (30 clients, 10 a round, FedProx's settings: E = 20, B = 10, lr
# 0.01), SCAFFOLD and FedDyn end with a lower training loss over all clients than FedAvg, as both
# papers find on heterogeneous clients: the mean of rounds 31-40, for seeds 0 and 1
if ! $sanitized; then
    S30="$T/syn30.sqlite"
    expect 0 "Synthetic(1,1), 30 clients" -- "$BIN" data synthetic --kind fedprox --alpha 1 --beta 1 --seed 4 -o "$S30"
    for s in 0 1; do
        for a in fedavg scaffold feddyn; do
            expect 0 "$a on Synthetic(1,1), seed $s" -- "$BIN" run programs/$a.json --data train=$S30 --data test=$S30 \
                --rounds 40 --clients-per-round 10 --eval-every 1 --seed $s --threads 2 --metrics "$T/learn_$a$s.jsonl"
        done
        check "seed $s: SCAFFOLD and FedDyn below 0.8 x FedAvg's training loss" -- "$PY" - "$T"/learn_{fedavg,scaffold,feddyn}$s.jsonl <<'EOF'
import json, sys
def tail(path):
    losses = [json.loads(l)["eval"]["loss"] for l in open(path) if '"round"' in l]
    assert len(losses) == 40, path
    return sum(losses[30:]) / 10
avg, sca, dyn = (tail(p) for p in sys.argv[1:])
print("training loss, rounds 31-40: FedAvg %.3f, SCAFFOLD %.3f, FedDyn %.3f" % (avg, sca, dyn))
assert sca < 0.8 * avg and dyn < 0.8 * avg
EOF
        sed 's/^/  /' "$T/check"
    done
fi

# -- errors
mkdir -p "$T/nostates" && cp "$T/full/round-000003.safetensors" "$T/nostates/"
expect 1 "resume without the states" -- "$BIN" run $R --resume "$T/nostates" &&
    has "$T/err" "this checkpoint directory has none (client_states.sqlite)" "missing store"
mkdir -p "$T/other" && cp "$T/full/round-000003.safetensors" "$T/other/" && cp "$T/counter/client_states.sqlite" "$T/other/"
expect 1 "resume with another program's states" -- "$BIN" run $R --resume "$T/other" &&
    has "$T/err" "holds client states of type <count=i32[],noise=f32[1000]>, not <w=f32[60,10],b=f32[10]>" "store type"
mkdir -p "$T/fifo" && cp "$T/full/round-000003.safetensors" "$T/fifo/" && mkfifo "$T/fifo/client_states.sqlite"
expect 1 "resume: the store is a FIFO" -- timeout 20 "$BIN" run $R --resume "$T/fifo" && has "$T/err" "not a regular file" "FIFO store"
printf 'not a database, not at all, no' >"$T/junk.sqlite"
mkdir -p "$T/junk" && cp "$T/full/round-000003.safetensors" "$T/junk/" && cp "$T/junk.sqlite" "$T/junk/client_states.sqlite"
expect 1 "resume: the store is not SQLite" -- "$BIN" run $R --resume "$T/junk" && has "$T/err" "client_states.sqlite" "junk store named"
expect 1 "client_states outside a training run" -- "$BIN" run $C --fn next --arg state=0 --clients 3 &&
    has "$T/err" "'client_states' is given by a training run" "plain call"

# -- 100,000 clients, 10,000 a round: the states of the clients that took part are on disk, not
# in memory (a table of every client's 4 KB state would be 400 MB)
if $sanitized; then
    expect 0 "100,000 clients" -- "$BIN" run $C --clients 100000 --clients-per-round 2000 --rounds 2 --threads 2
else
    peak=$(OUT="$T/big.out" "$PY" - "$BIN" run $C --clients 100000 --clients-per-round 10000 --rounds 5 --threads 2 \
        --checkpoint-dir "$T/big" <<'EOF'
import os, resource, subprocess, sys
with open(os.environ["OUT"], "w") as out:
    rc = subprocess.run(sys.argv[1:], stdout=out, stderr=subprocess.DEVNULL).returncode
if rc:
    sys.exit("exit %d" % rc)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
EOF
    ) || bad "100,000 clients: the run failed"
    echo "memory: 100,000 clients, 5 rounds of 10,000 with 4 KB states: ${peak:-?} MB peak"
    if [ -n "$peak" ] && [ "$peak" -lt 256 ]; then ok; else bad "100,000 clients: ${peak:-?} MB peak (bound 256)"; fi
fi

echo "client state: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
