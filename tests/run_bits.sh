#!/usr/bin/env bash
# run_bits.sh [--no-blas] REF BIN [RUNNER...] - two builds of fedvm give the same bits: REF (this
# machine's build) and BIN (a build without BLAS, or a cross build run through RUNNER, e.g.
# qemu-aarch64) each run every golden program, write Synthetic(1,1) and Fashion-MNIST datasets,
# train FedAvg on Synthetic(1,1) (3 rounds of 20 clients on 2 threads, evaluation after each) and
# FedAvg with the 2NN on Fashion-MNIST (2 rounds of 3 clients, then evaluation on the 10,000 test
# images) and a device's round of its cross-device plan, each into its own directory; every file must be the same bytes: printed
# results and metrics (their wall and CPU times left out), datasets and checkpoints. None of these
# depends on BLAS or the C math library's last bits (format/SPEC.md, reproducibility), so the bits
# are those of fedvm's own kernels: its f32 product kernel on AVX-512 against its scalar fallback,
# and, on a big-endian machine, the file formats' byte order. With --no-blas BIN has no BLAS
# (make NO_BLAS=1): its CNN run (conv2d's products) on the cpu kernels must then equal its run on
# the portable ones, bit for bit. Fashion-MNIST comes from Debian's dataset-fashion-mnist; without
# it the 2NN runs are skipped with a message.
set -u
NOBLAS=
if [ "${1:-}" = --no-blas ]; then NOBLAS=1; shift; fi
REF=${1:?usage: tests/run_bits.sh [--no-blas] REF_FEDVM FEDVM [RUNNER...]}
BIN=${2:?usage: tests/run_bits.sh [--no-blas] REF_FEDVM FEDVM [RUNNER...]}
shift 2
RUNNER=("$@")
. "$(dirname "$0")/lib.sh"
mkdir -p "$T/ref" "$T/bin"

# both NAME ARGS...: 'fedvm ARGS' with REF in $T/ref and with BIN in $T/bin, @D@ in ARGS standing
# for that directory; stdout to D/NAME.out. Both must exit 0.
both() {
    local name=$1 side rc; shift
    for side in ref bin; do
        local d="$T/$side" cmd
        if [ $side = ref ]; then cmd=("$REF"); else cmd=("${RUNNER[@]}" "$BIN"); fi
        timeout 900 "${cmd[@]}" "${@//@D@/$d}" >"$d/$name.out" 2>"$T/err"
        rc=$?
        if [ $rc -ne 0 ]; then
            bad "$name ($side): exit $rc"; sed 's/^/  | /' "$T/err" | head -5; return 1
        fi
    done
    ok
}

# -- every golden program (tests/golden/*.json), its result or its rounds' metrics and checkpoints
while IFS= read -r -d '' line; do
    eval "args=($line)"
    both "${args[@]}"
done < <(/usr/bin/python3 - <<'PY'
import glob, json, os, shlex, sys
for f in sorted(glob.glob("tests/golden/*.json")):
    c = json.load(open(f))
    name = "golden_" + os.path.basename(f)[:-5]
    a = [name, "run", c["program"]]
    for k, v in (c.get("args") or {}).items():
        a += ["--arg", "%s=%s" % (k, v)]
    if "rounds" in c:
        a += ["--rounds", str(c["rounds"]), "--checkpoint-dir", "@D@/%s.ck" % name]
    sys.stdout.write(" ".join(shlex.quote(x) for x in a) + "\0")
PY
)

# -- FedAvg on Synthetic(1,1)
both syn_data data synthetic --kind fedprox --alpha 1 --beta 1 --clients 40 --min-examples 20 --max-examples 60 \
    --seed 5 -o @D@/syn.sqlite
both syn_train run tests/train/softmax.json --data train=@D@/syn.sqlite --data test=@D@/syn.sqlite:test --rounds 3 \
    --clients-per-round 20 --seed 7 --eval-every 1 --threads 2 --metrics @D@/syn.jsonl --checkpoint-dir @D@/syn.ck

# -- FedAvg with the 2NN on Fashion-MNIST, with evaluation; the portable kernels too
FASHION=${FVM_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ -d "$FASHION" ]; then
    both fm_data data import fashion-mnist --clients 100 --partition iid --seed 0 -o @D@/fm.sqlite
    both 2nn run programs/fedavg_2nn.json --data train=@D@/fm.sqlite --data test=@D@/fm.sqlite:test --rounds 2 \
        --clients-per-round 3 --seed 0 --metrics @D@/2nn.jsonl --checkpoint-dir @D@/2nn.ck
    # the client phase of the 2NN's cross-device plan: a round's broadcast, then one device's update
    # (each side's own files, the plan written once by REF's fedplan)
    "$(dirname "$REF")/fedplan" programs/fedavg_2nn.json --to cross-device -o "$T/2nn.plan.json" >/dev/null 2>&1 ||
        bad "fedplan --to cross-device"
    both xdev_init server "$T/2nn.plan.json" init --seed 3 --out @D@/xdev_s0.safetensors &&
        both xdev_prepare server "$T/2nn.plan.json" prepare --state @D@/xdev_s0.safetensors --clients 100 \
            --clients-per-round 2 --out @D@/xdev_b1.safetensors &&
        both xdev_device device "$T/2nn.plan.json" --checkpoint @D@/xdev_b1.safetensors --data @D@/fm.sqlite \
            --index "$(head -n 1 "$T/ref/xdev_prepare.out")" --out-dir @D@/xdev_u1
else
    echo "run_bits: $FASHION missing (make deps installs dataset-fashion-mnist); the 2NN runs skipped"
fi

# -- every file the same bytes, wall and CPU times and the directories' names left out of results
# and metrics
for side in ref bin; do
    for f in "$T/$side"/*.out "$T/$side"/*.jsonl; do
        [ -e "$f" ] || continue
        sed -i -E -e 's/"[a-z_]*seconds": [0-9.e+-]+(, )?//g' -e "s|$T/$side/||g" "$f"
    done
done
(cd "$T/ref" && find . -type f | sort) >"$T/files.ref"
(cd "$T/bin" && find . -type f | sort) >"$T/files.bin"
same "$T/files.ref" "$T/files.bin" "the files written"
while IFS= read -r f; do
    same "$T/ref/$f" "$T/bin/$f" "${f#./}"
done <"$T/files.ref"
check "some checkpoints compared" -- test "$(grep -c '\.safetensors$' "$T/files.ref")" -ge 10

# -- without BLAS: conv2d's products are the portable provider's chains, on the cpu kernels too
# (a round of 2 clients of 10 examples)
if [ -n "$NOBLAS" ] && [ -d "$FASHION" ]; then
    "${RUNNER[@]}" "$BIN" data import fashion-mnist --clients 6000 --partition iid -o "$T/fm6000.sqlite" >/dev/null 2>&1 ||
        bad "import Fashion-MNIST into 6000 clients"
    for k in cpu portable; do
        expect 0 "CNN, $k kernels" -- timeout 900 "${RUNNER[@]}" "$BIN" run bench/fedavg_cnn.json \
            --data train="$T/fm6000.sqlite" --rounds 1 --clients-per-round 2 --seed 3 --kernels $k \
            --checkpoint-dir "$T/cnn_$k.ck" && sed -E 's/"[a-z_]*seconds": [0-9.e+-]+(, )?//g' "$T/out" >"$T/cnn_$k.out"
    done
    same "$T/cnn_cpu.out" "$T/cnn_portable.out" "CNN metrics without BLAS, cpu against portable kernels"
    same "$T/cnn_cpu.ck/round-000001.safetensors" "$T/cnn_portable.ck/round-000001.safetensors" \
        "CNN checkpoint without BLAS, cpu against portable kernels"
fi

echo "run_bits: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
