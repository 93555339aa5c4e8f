#!/usr/bin/env bash
# run_providers.sh BIN - kernel providers on whole runs: 'fedvm run --kernels portable' against the CPU kernels.
# FedAvg with the 2NN (programs/fedavg_2nn.json, every product fedvm's own f32 kernel) gives the same
# bits: printed metrics and every checkpoint, in sequence and on 2 threads. FedAvg with the CNN of
# programs/models/cnn_mnist.json (tests/providers/fedavg_cnn.json) gives the same within a bound:
# the CPU provider hands conv2d's products to BLAS, which orders their sums its own way (a few
# units in the last place per product; the bound is 1e-5 of each tensor's largest element and of
# the loss, the accuracy the same to one example). The golden programs are compared by
# test_golden, each kernel by test_providers. Needs Fashion-MNIST (make deps); skipped without it.
set -u
BIN=${1:?usage: tests/run_providers.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"

expect 2 "unknown provider" -- "$BIN" run programs/fedsgd_linear.json --kernels gpu &&
    has "$T/err" "--kernels is cpu or portable, found 'gpu'" "provider names"
L="programs/fedsgd_linear.json --arg data=@programs/data/linear_clients.json --rounds 3"
expect 0 "linear model, cpu kernels" -- "$BIN" run $L --kernels cpu && cp "$T/out" "$T/linear"
expect 0 "linear model, portable kernels" -- "$BIN" run $L --kernels portable && same "$T/linear" "$T/out" "linear model"

FASHION=${FVM_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
PY=$(python_with numpy msgpack)
if [ ! -d "$FASHION" ] || [ -z "$PY" ]; then
    echo "run_providers: $FASHION or numpy missing (make deps installs them); the 2NN and CNN runs skipped"
else
    # 6000 clients of 10 examples: a client's epoch is one batch
    "$BIN" data import fashion-mnist --clients 6000 --partition iid -o "$T/fm.sqlite" >/dev/null 2>&1 ||
        { echo "run_providers: cannot import Fashion-MNIST"; exit 1; }

    # run NAME PROGRAM ARGS...: a 2-round run into $T/NAME.out and $T/NAME.ck/
    run() {
        local name=$1 prog=$2; shift 2
        rm -rf "$T/$name.ck"
        expect 0 "$name" -- timeout 600 "$BIN" run "$prog" --data train="$T/fm.sqlite" --rounds 2 --seed 3 \
            --checkpoint-dir "$T/$name.ck" "$@" && cp "$T/out" "$T/$name.out"
    }

    run 2nn_cpu programs/fedavg_2nn.json --clients-per-round 6 --backend seq
    for k in "--backend seq" "--threads 2"; do
        run 2nn_portable programs/fedavg_2nn.json --clients-per-round 6 --kernels portable $k &&
            same "$T/2nn_cpu.out" "$T/2nn_portable.out" "2NN metrics, portable kernels, $k" &&
            for r in 1 2; do
                same_state "$T/2nn_cpu.ck/round-00000$r.safetensors" "$T/2nn_portable.ck/round-00000$r.safetensors" \
                    "2NN round $r checkpoint, portable kernels, $k"
            done
    done

    run cnn_cpu tests/providers/fedavg_cnn.json --clients-per-round 2 --backend seq
    run cnn_portable tests/providers/fedavg_cnn.json --clients-per-round 2 --kernels portable --backend seq &&
        check "CNN: the portable kernels' run within the bound of the CPU kernels'" -- "$PY" - "$T" <<'PY'
import json, os, sys
import numpy as np
sys.path.insert(0, "tests/train")
from reference import read_safetensors
t = sys.argv[1]
cpu, port = ([json.loads(l) for l in open(os.path.join(t, n))] for n in ("cnn_cpu.out", "cnn_portable.out"))
assert len(cpu) == len(port) == 2, (cpu, port)
for a, b in zip(cpu, port):
    a, b = a["train"], b["train"]
    assert a["examples"] == b["examples"] == 20, (a, b)
    assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]), (a, b)
    assert abs(a["accuracy"] - b["accuracy"]) <= 1 / a["examples"] + 1e-9, (a, b)
for r in (1, 2):
    (ta, _), (tb, _) = (read_safetensors(os.path.join(t, d, "round-%06d.safetensors" % r)) for d in ("cnn_cpu.ck", "cnn_portable.ck"))
    assert sorted(ta) == sorted(tb) == ["c1", "c2", "cb1", "cb2", "d1", "d2", "db1", "db2"], sorted(ta)
    for k in ta:
        x, y = np.asarray(ta[k], np.float64), np.asarray(tb[k], np.float64)
        assert x.shape == y.shape and np.all(np.isfinite(x)), k
        d = np.max(np.abs(x - y)) / np.max(np.abs(x))
        assert d <= 1e-5, "round %d, %s: differs by %g of its largest element" % (r, k, d)
PY
fi

echo "run_providers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
