#!/usr/bin/env bash
# run_providers.sh BIN - kernel providers on whole runs: 'fedvm run --kernels portable' against the CPU kernels.
# FedAvg with the 2NN (programs/fedavg_2nn.json, every product fedvm's own f32 kernel) gives the same
# bits: printed metrics and every checkpoint, in sequence and on 2 threads; so does FedAvg with the
# CNN of programs/models/cnn_mnist.json (bench/fedavg_cnn.json: conv2d and its gradients
# in fedvm's own f32 kernel too). The golden programs are compared by test_golden, each kernel by
# test_providers. Needs Fashion-MNIST (make deps); skipped without it.
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

    run cnn_cpu bench/fedavg_cnn.json --clients-per-round 2 --backend seq
    run cnn_portable bench/fedavg_cnn.json --clients-per-round 2 --kernels portable --backend seq &&
        same "$T/cnn_cpu.out" "$T/cnn_portable.out" "CNN metrics, portable kernels" &&
        for r in 1 2; do
            same_state "$T/cnn_cpu.ck/round-00000$r.safetensors" "$T/cnn_portable.ck/round-00000$r.safetensors" \
                "CNN round $r checkpoint, portable kernels"
        done
fi

echo "run_providers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
