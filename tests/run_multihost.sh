#!/usr/bin/env bash
# run_multihost.sh BIN - Open MPI across hosts, made on this machine: each host is a network
# namespace with its own address on a private bridge (veth pairs), its own name (hN, a UTS
# namespace for each process started there), its own temporary directory and
# its own local data directory (the same path, bound to a different folder on each host). mpirun
# starts on the first host and reaches the others through an rsh agent (ip netns exec), as it
# would through ssh; ranks talk over TCP only, on the hosts' subnet.
#   1. FedAvg on 2 hosts of 2 ranks, each host holding a copy of the training data with only its
#      own ranks' clients: metrics, printed rounds and every checkpoint bit-identical to seq.
#      Copies swapped between the hosts: every rank stops with the error naming a missing client.
#   2. A rank killed with SIGKILL on the second host in the middle of a round: the job stops within
#      a bounded time with mpirun naming the lost rank and fedvm's rank 0 too (once, with its
#      host: the kill comes once rank 0 waits for it, so rank 0 is waiting when mpirun's SIGTERM
#      comes; then the round that did not finish), no fedvm process is left on any host, only
#      whole checkpoints are left; --resume on 3 other hosts (1 rank each, their own copies) ends
#      with seq's final checkpoint and metrics, bit for bit.
# Needs root (network namespaces), iproute2's ip and Open MPI; otherwise it says why it is
# skipped. Namespace names and addresses come from this shell's pid, so runs at the same time do
# not collide; everything is removed on exit, also on failure.
set -u
BIN=${1:?usage: tests/run_multihost.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"
BIN=$(realpath "$BIN")

PY=$(python_with numpy) || { echo "run_multihost: no python3 with numpy (make deps)"; exit 1; }

# -- data: Synthetic(1,1), 64 clients in 4 blocks of 16. Every client takes part in every round,
# so rank r of W reads blocks [4r/W, 4(r+1)/W). A host's copy keeps the examples of its ranks'
# clients only (the others' data empty); the test split is on the shared directory.
mkdir -p "$T/shared"
D=$T/shared/syn.sqlite
"$BIN" data synthetic --kind fedprox --alpha 1 --beta 1 --clients 64 --min-examples 20 --max-examples 40 --seed 5 \
    -o "$D" >/dev/null 2>&1 || { echo "run_multihost: cannot make data"; exit 1; }
# copy N LO HI: host N's copy, holding clients LO..HI-1
copy() {
    mkdir -p "$T/h$1/data" && "$PY" - "$D" "$T/h$1/data/train.sqlite" "$2" "$3" <<'PY'
import shutil, sqlite3, sys
src, dst, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
shutil.copyfile(src, dst)
db = sqlite3.connect(dst)
ids = [r[0] for r in db.execute("SELECT rowid FROM federated_data ORDER BY rowid")]
assert len(ids) == 64, len(ids)
db.executemany("UPDATE federated_data SET data = x'' WHERE rowid = ?", [(r,) for i, r in enumerate(ids) if not lo <= i < hi])
db.execute("DROP TABLE federated_data_test")
db.commit()
db.execute("VACUUM")
PY
}
copy 0 0 32 && copy 1 32 64 && copy 2 0 16 && copy 3 16 32 && copy 4 32 64 || { echo "run_multihost: cannot copy data"; exit 1; }

# a copy read by itself: its clients are there, the others are refused by name
C=$T/h1/data/train.sqlite
expect 0 "a client of the copy" -- "$BIN" data head "$C" 40 -n 1 && has "$T/out" '"index": 40' "client 40 read"
expect 1 "a client not in the copy" -- "$BIN" data head "$C" 3 -n 1 &&
    has "$T/err" "$C: client 'f_00003' (index 3) is not in this copy of the dataset" "the missing client named"
expect 1 "a run over the copy alone" -- "$BIN" run programs/fedavg.json --data train="$C" --rounds 1 &&
    has "$T/err" "client 'f_00000' (index 0) is not in this copy" "the first missing client named"

# skip WHY: the hosts' part cannot run here; the checks above still count
skip() { echo "run_multihost: $pass passed, $fail failed; the hosts' part skipped: $*"; [ "$fail" -eq 0 ]; exit; }
[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces are made with 'ip netns add', which needs root; CI runs as root)"
command -v ip >/dev/null || skip "iproute2's ip not found (make deps installs iproute2)"
mpi_setup run_multihost "$BIN"
[ -n "$MPI" ] || skip "no usable Open MPI (above)"

# -- the hosts. P names this run's namespaces; NET is its subnet (the bridge is in a namespace of
# its own, so nothing is added to the machine's own network).
P=fvm$$
NET=10.$((($$ >> 8) & 255)).$(($$ & 255))
HOSTS=()
cleanup() {
    local ns pid
    for ns in "${HOSTS[@]}" "${P}sw"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# ip netns mounts its namespaces under /run/netns and enters them by remounting /, which a chroot
# (whose / is not a mount point) cannot do, and would leave /run/netns mounted inside it
mountpoint -q / || skip "/ is not a mount point (a chroot?): network namespaces cannot be entered here"
ip netns add "${P}sw" 2>"$T/err" || skip "cannot make a network namespace: $(cat "$T/err")"
HOSTS+=("${P}sw")
ip netns exec "${P}sw" true 2>"$T/err" || skip "cannot enter a network namespace: $(cat "$T/err")"
ip -n "${P}sw" link add br0 type bridge && ip -n "${P}sw" link set br0 up || { echo "run_multihost: no bridge"; exit 1; }

# host N: namespace ${P}hN at $NET.(10+N), its directory $T/hN (tmp/ and data/), seen as $LOCAL
LOCAL=$T/local
mkdir -p "$LOCAL" "$T/shared"
host() {
    local n=$1 ns=${P}h$1
    ip netns add "$ns" && HOSTS+=("$ns") &&
        ip link add eth0 netns "$ns" type veth peer name "h$n" netns "${P}sw" &&
        ip -n "${P}sw" link set "h$n" master br0 && ip -n "${P}sw" link set "h$n" up &&
        ip -n "$ns" addr add "$NET.$((10 + n))/24" dev eth0 && ip -n "$ns" link set eth0 up &&
        ip -n "$ns" link set lo up && mkdir -p "$T/h$n/tmp" "$T/h$n/data"
}
for n in 0 1 2 3 4; do host $n || { echo "run_multihost: cannot make host $n"; exit 1; }; done
# on N CMD...: CMD on host N (its namespace, its directory bound at $LOCAL, its TMPDIR)
on() {
    local n=$1; shift
    ip netns exec "${P}h$n" unshare --uts sh -c 'hostname "$2" && mount --bind "$0" "$1" && shift 2 && exec "$@"' \
        "$T/h$n" "$LOCAL" "h$n" env TMPDIR="$LOCAL/tmp" "$@"
}
# the rsh agent mpirun runs as 'agent HOST COMMAND...' (as it would run ssh)
{
    echo '#!/bin/sh'
    echo 'host=$1; shift'
    echo 'case $host in'
    for n in 0 1 2 3 4; do echo "$NET.$((10 + n))) n=$n ;;"; done
    echo '*) echo "agent: no host $host" >&2; exit 1 ;;'
    echo 'esac'
    echo "exec ip netns exec ${P}h\$n unshare --uts sh -c 'hostname \"h\$2\" && mount --bind \"\$0\" \"\$1\" && export TMPDIR=\"\$1/tmp\" && shift 2 && exec sh -c \"\$*\"' \"$T/h\$n\" \"$LOCAL\" \"\$n\" \"\$@\""
} >"$T/agent"
chmod +x "$T/agent"
# Open MPI over TCP on the hosts' subnet only (no shared memory, so ranks on one host use TCP too)
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=$NET.0/24 OMPI_MCA_oob_tcp_if_include=$NET.0/24 \
    OMPI_MCA_plm_rsh_agent=$T/agent
unset OMPI_MCA_btl_vader_single_copy_mechanism
# hostfile HOST:SLOTS...
hostfile() { local h; for h in "$@"; do echo "$NET.$((10 + ${h%:*})) slots=${h#*:}"; done >"$T/hostfile"; }

P_=programs/fedavg.json
# rounds of about a second (1000 local epochs), so that the kill below comes while rank 3 is
# computing and rank 0 is waiting for it, not while a round's broadcast holds them all in MPI
# (with rounds of 50 ms, rank 3 was often stopped there: rank 0 then never waited in its poll)
RUN="$P_ --data test=$D:test --rounds 4 --seed 7 --eval-every 1 --set epochs=1000"
MPIRUN="mpirun --allow-run-as-root --hostfile $T/hostfile"
fedvm_lines() { grep -vE '^(-{10,}|Primary job|a non-zero exit code|mpirun |the job to be terminated|  Process name|  Exit code|$)' "$1"; }

# the reference: seq, on the whole file
expect 0 "seq" -- "$BIN" run $RUN --data train="$D" --backend seq --metrics "$T/seq.jsonl" \
    --checkpoint-dir "$T/seq.ck" && cp "$T/out" "$T/seq.out"
# compare NAME CK JSONL: printed rounds, metrics (less timings) and every checkpoint as seq's
compare() {
    same "$T/seq.out" "$T/out" "$1: printed rounds"
    compare_files "$@"
}
compare_files() {
    check "$1: metrics file" -- "$PY" - "$T/seq.jsonl" "$3" <<'PY'
import re, sys
a, b = (re.sub(r'"(eval_|cpu_)?seconds": [0-9.e+-]+, ', '', open(p).read()) for p in sys.argv[1:])
assert a.count("\n") == 5 and '"eval"' in a, a
assert a == b, (a, b)
PY
    check "$1: the same checkpoints" -- test "$(ls "$T/seq.ck")" = "$(ls "$2")"
    for f in "$T"/seq.ck/*; do same "$f" "$2/${f##*/}" "$1: ${f##*/}"; done
}

# -- 1. two hosts, two ranks each, each reading its own copy
hostfile 0:2 1:2
expect 0 "2 hosts x 2 ranks" -- on 0 timeout 120 $MPIRUN -np 4 sh -c \
    'echo "$OMPI_COMM_WORLD_RANK $(ip -4 -o addr show eth0 | cut -d" " -f7)" >"'"$T"'/where.$OMPI_COMM_WORLD_RANK"; exec "$@"' \
    sh "$BIN" run $RUN --data train=$LOCAL/data/train.sqlite --backend mpi --metrics "$T/a.jsonl" --checkpoint-dir "$T/a.ck" &&
    compare "2 hosts" "$T/a.ck" "$T/a.jsonl"
check "ranks 0, 1 on host 0 and 2, 3 on host 1, each in its own namespace" -- test \
    "$(cat "$T"/where.* | tr '\n' ' ')" = "0 $NET.10/24 1 $NET.10/24 2 $NET.11/24 3 $NET.11/24 "

# the copies swapped: the ranks of host 0 find their clients missing
mv "$T/h0/data/train.sqlite" "$T/swap" && mv "$T/h1/data/train.sqlite" "$T/h0/data/" && mv "$T/swap" "$T/h1/data/train.sqlite"
expect 1 "copies swapped" -- on 0 timeout 120 $MPIRUN -np 4 "$BIN" run $RUN --data train=$LOCAL/data/train.sqlite --backend mpi &&
    has "$T/err" "client 'f_00000' (index 0) is not in this copy of the dataset" "a missing client is named" &&
    check "the error once" -- test "$(fedvm_lines "$T/err" | grep -c "is not in this copy")" -eq 1
mv "$T/h0/data/train.sqlite" "$T/swap" && mv "$T/h1/data/train.sqlite" "$T/h0/data/" && mv "$T/swap" "$T/h1/data/train.sqlite"

# -- 2. rank 3 (on host 1) killed with SIGKILL in a round after round 1's checkpoint: stopped
# (SIGSTOP) at once, so that the others cannot end the round, then killed
on 0 timeout 120 $MPIRUN -np 4 "$BIN" run $RUN --data train=$LOCAL/data/train.sqlite --backend mpi \
    --metrics "$T/k.jsonl" --checkpoint-dir "$T/k.ck" >"$T/k.out" 2>"$T/k.err" &
job=$!
# rank_pid HOST RANK: the pid of the fedvm of that MPI rank on host HOST (0, 1), or nothing
rank_pid() {
    local pid
    for pid in $(ip netns pids "${P}h$1"); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = fedvm ] &&
            tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$pid"
    done
}
victim=""
while kill -0 "$job" 2>/dev/null; do
    [ -z "$victim" ] && victim=$(rank_pid 1 3)
    [ -n "$victim" ] && [ -e "$T/k.ck/round-000001.safetensors" ] && kill -STOP "$victim" && break
    sleep 0.02
done
check "rank 3 found running on host 1 after round 1" -- test -n "$victim"
# what is checked below is rank 0 waiting for rank 3: on a loaded machine rank 0 may still be
# computing its own clients, so wait (at most 60 s) until it is in its poll's sleep, seen
# three times in a row (its main thread's wchan), before the kill
rank0=$(rank_pid 0 0)
asleep=0
for _ in $(seq 1200); do
    case $(cat "/proc/$rank0/wchan" 2>/dev/null) in *nanosleep*) asleep=$((asleep + 1)) ;; *) asleep=0 ;; esac
    [ $asleep -ge 3 ] && break
    sleep 0.05
done
check "rank 0 found waiting for the others on host 0" -- test -n "$rank0" -a $asleep -ge 3
ls "$T/k.ck" >"$T/k.before"
t0=$(date +%s%N)
kill -9 "$victim"
wait "$job"
rc=$? t1=$(date +%s%N)
echo "run_multihost: the job stopped $(((t1 - t0) / 1000000)) ms after rank 3 was killed, in round $(($(wc -l <"$T/k.before") + 1))"
check "mpirun fails (not its timeout)" -- test "$rc" -ne 0 -a "$rc" -ne 124
check "the job stops within 30 s" -- test $((t1 - t0)) -lt 30000000000
sed -n 's/^mpirun noticed that /run_multihost: mpirun: /p' "$T/k.err"
has "$T/k.err" "process rank 3 with PID $victim on node $NET.11 exited on signal 9" "mpirun names the lost rank"
fedvm_lines "$T/k.err" | sed 's/^/run_multihost: rank 0: /'
has "$T/k.err" "lost rank 3 (host h1): mpirun stopped the job while rank 0 waited for it" "fedvm's rank 0 names the lost rank"
check "fedvm's error once, from rank 0 alone" -- test "$(fedvm_lines "$T/k.err" | grep -c "lost rank")" -eq 1
has "$T/k.err" "fedvm: round $(($(wc -l <"$T/k.before") + 1)) of 4 did not finish" "fedvm names the round"
check "no fedvm left on any host" -- sh -c 'for ns in "$@"; do for p in $(ip netns pids "$ns"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" != fedvm ] || exit 1; done; done' sh "${HOSTS[@]}"
check "the checkpoints of before the kill, no more, and not the last" -- test "$(ls "$T/k.ck")" = "$(cat "$T/k.before")" -a \
    ! -e "$T/k.ck/round-000004.safetensors"
for f in "$T"/k.ck/round-*; do same "$T/seq.ck/${f##*/}" "$f" "left by the killed job: ${f##*/}"; done
check "its metrics lines are seq's first ones" -- "$PY" - "$T/seq.jsonl" "$T/k.jsonl" <<'PY'
import re, sys
a, b = (re.sub(r'"(eval_|cpu_)?seconds": [0-9.e+-]+, ', '', open(p).read()).splitlines(True) for p in sys.argv[1:])
assert 2 <= len(b) < len(a) and b == a[:len(b)], (a, b)
PY

# ... resumed on three other hosts, one rank each, with their own copies
hostfile 2:1 3:1 4:1
expect 0 "resumed on 3 hosts x 1 rank" -- on 2 timeout 120 $MPIRUN -np 3 "$BIN" run $RUN \
    --data train=$LOCAL/data/train.sqlite --backend mpi --metrics "$T/k.jsonl" --resume "$T/k.ck" &&
    has "$T/err" "resuming after round" "resume note"
compare_files "resumed" "$T/k.ck" "$T/k.jsonl"

echo "run_multihost: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
