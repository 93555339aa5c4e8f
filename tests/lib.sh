# lib.sh - what the tests/run_*.sh scripts share: a scratch directory $T, pass/fail accounting,
# the reference training run that plans are compared with, and finding a Python with the modules a
# check needs.
# Source it after setting BIN (FEDVM for fedvm_rounds); it creates $T (removed on exit) and counts in
# $pass and $fail.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect RC DESCRIPTION -- CMD...: runs CMD, stdout to $T/out, stderr to $T/err.
expect() {
    local want=$1 what=$2; shift 3
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ "$rc" -ne "$want" ]; then bad "$what: exit $rc, expected $want"; sed 's/^/  | /' "$T/err" | head -5; return 1; fi
    if grep -qE "AddressSanitizer|LeakSanitizer|ThreadSanitizer|runtime error:" "$T/err"; then bad "$what: sanitizer report"; return 1; fi
    ok
}
has() { # has FILE TEXT DESCRIPTION
    if grep -qF -- "$2" "$1"; then ok; else bad "$3: '$2' not in output"; sed 's/^/  | /' "$1" | head -8; fi
}
lacks() { # lacks FILE TEXT DESCRIPTION
    if grep -qF -- "$2" "$1"; then bad "$3: '$2' in output"; else ok; fi
}
same() { # same A B DESCRIPTION
    if cmp -s "$1" "$2"; then ok; else bad "$3: outputs differ"; diff "$1" "$2" | head -5; fi
}
check() { # check DESCRIPTION -- CMD...: CMD must succeed
    local what=$1; shift 2
    if "$@" >"$T/check" 2>&1; then ok; else bad "$what"; sed 's/^/  | /' "$T/check" | head -8; fi
}
# fedvm_rounds NAME PROGRAM BIND=DATA R K DIR: $FEDVM run PROGRAM for R rounds of K clients, seed 3,
# checkpoints in DIR/run (DIR is made); BIND is the parameter DATA is bound to, as an argument when
# DATA is a .json file, else as the dataset. Checked by expect as "NAME: fedvm run" (metrics in $T/out).
fedvm_rounds() {
    local name=$1 prog=$2 data=$3 r=$4 k=$5 dir=$6 bind
    case ${data#*=} in *.json) bind=(--arg "${data%%=*}=@${data#*=}") ;; *) bind=(--data "$data") ;; esac
    mkdir -p "$dir"
    expect 0 "$name: fedvm run" -- "$FEDVM" run "$prog" "${bind[@]}" --rounds "$r" --clients-per-round "$k" --seed 3 \
        --checkpoint-dir "$dir/run"
}
same_state() { # same_state A B DESCRIPTION: two safetensors checkpoints hold the same tensors, bit for bit
    check "$3" -- "${PYTHON:-python3}" - "$1" "$2" <<'EOF'
import json, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    head.pop("__metadata__", None)
    data = raw[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
if a != b:
    sys.exit("checkpoints differ: %s" % sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))
if not a:
    sys.exit("no tensors")
EOF
}
# python_with MODULE...: prints the first Python that imports every MODULE, $PYTHON (else
# python3 on PATH) before the system's /usr/bin/python3 (Debian's python3-numpy and
# python3-msgpack install there); prints nothing and fails when neither does.
python_with() {
    local p mods
    mods=$(IFS=,; echo "$*")
    for p in "${PYTHON:-python3}" /usr/bin/python3; do
        if "$p" -c "import $mods" 2>/dev/null; then echo "$p"; return 0; fi
    done
    return 1
}
# mpi_setup NAME BIN: sets MPI to the mpirun command line the tests use, or to "" (with a message
# naming NAME) when mpirun is missing or BIN was built without MPI. As root mpirun needs
# --allow-run-as-root; --oversubscribe lets 3 ranks share 2 cores.
# Open MPI is told to use its own shared-memory and loopback transports only (pml ob1 with btl
# self,vader,tcp on lo: no network device and no UCX/InfiniBand hardware needed), and vader to
# copy through shared memory rather than across processes (containers often forbid
# process_vm_readv, Open MPI's default single-copy mechanism).
# Under ASan, LeakSanitizer is given tests/lsan_openmpi.supp: leaks in Open MPI's own
# libraries (allocations it keeps until exit), never in fedvm's code.
mpi_setup() {
    MPI=""
    if ! command -v mpirun >/dev/null; then
        echo "$1: mpirun not found (make deps installs openmpi-bin); mpi cases skipped"
    elif "$2" run tests/backends/client_fails.json --arg 'index=[0]' --backend mpi 2>&1 | grep -q "built without MPI"; then
        echo "$1: $2 was built without MPI; mpi cases skipped"
    else
        MPI="mpirun --oversubscribe"
        [ "$(id -u)" -eq 0 ] && MPI="$MPI --allow-run-as-root"
        export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
            OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none \
            OMPI_MCA_btl_base_warn_component_unused=0
        # (Full stacks, not the fast unwinder's, for the processes that start MPI: Open MPI unloads
        # its components at the end, so only the stack's frames in its main libraries tell that an
        # allocation was its.)
        export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$PWD/tests/lsan_openmpi.supp:print_suppressions=0"
        MPI_ENV="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
        MPI="$MPI_ENV $MPI"
    fi
}
