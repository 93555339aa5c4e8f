#!/usr/bin/env bash
# run_wasm.sh BINDIR WASMDIR - fedvm device compiled to WebAssembly ('make wasm': WASMDIR/fedvm-device.js
# for Node, WASMDIR/web/ for browsers) against the native one. Two rounds of FedAvg's cross-device plan,
# 4 of 8 clients a round: every selected client's update computed by Node (from a data file holding
# that client's examples alone) is the native 'fedvm device' update, byte for byte; half of the clients
# are browsers (headless Chromium) that fetch the plan, the round's broadcast and their data from an
# HTTP server on localhost (a free port) and compute their update in WebAssembly, the same bytes again;
# 'fedvm server aggregate' over the mixed round (native and browser updates) ends with the state of
# 'fedvm run', bit for bit. A SQLite dataset or a YAML file given to the WebAssembly device is a clear
# error.
set -u
BINDIR=${1:?usage: tests/run_wasm.sh BINDIR WASMDIR}
WASM=${2:?usage: tests/run_wasm.sh BINDIR WASMDIR}
FEDVM=$BINDIR/fedvm PLAN=$BINDIR/fedplan
. "$(dirname "$0")/lib.sh"
PY=$(python_with numpy) || { echo "run_wasm: no python3 with numpy (make deps installs python3-numpy)"; exit 1; }
BROWSER=$(command -v chromium || command -v chromium-browser) || { echo "run_wasm: no chromium"; exit 1; }
WEB_PID=
trap '[ -n "$WEB_PID" ] && kill "$WEB_PID" 2>/dev/null; rm -rf "$T"' EXIT
N=8 K=4 R=2

# 8 clients of 15-39 examples <x=f32[60], y=i32> (the values f32, written exactly): data.json holds
# every client's, own-C.json client C's alone (the other members empty), what a device keeps.
"$PY" - "$T" "$N" <<'EOF' || bad "the clients' data"
import json, sys
import numpy as np
out, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(11)
clients = []
for c in range(n):
    m = int(rng.integers(15, 40))
    x = rng.normal(size=(m, 60)).astype(np.float32)
    y = rng.integers(0, 10, size=m)
    clients.append([{"x": [float(v) for v in row], "y": int(t)} for row, t in zip(x, y)])
json.dump(clients, open(out + "/data.json", "w"))
for c in range(n):
    json.dump([clients[k] if k == c else [] for k in range(n)], open("%s/own-%d.json" % (out, c), "w"))
EOF

# The HTTP server: the plan, the broadcasts and the clients' data under $T/www, the page and the
# WebAssembly program beside them; a free port, chosen by the system.
WWW=$T/www
mkdir -p "$WWW" && cp "$WASM"/web/device.html "$WASM"/web/fedvm-device.js "$WASM"/web/fedvm-device.wasm "$WWW"/ &&
    cp "$T"/own-*.json "$WWW"/ || bad "the web directory"
"$PY" -u -m http.server 0 --bind 127.0.0.1 --directory "$WWW" >"$T/web.log" 2>&1 &
WEB_PID=$!
PORT=
for _ in $(seq 100); do
    PORT=$(sed -n 's/^Serving HTTP on [0-9.]* port \([0-9]*\).*/\1/p' "$T/web.log")
    [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "$PORT" ] || { bad "the HTTP server did not start"; cat "$T/web.log"; }

# browser C ROUND OUT: headless Chromium runs client C's device for ROUND in the page and writes its
# update (base64 in the page's #update) to OUT.
browser() {
    local c=$1 r=$2 out=$3 dom=$T/dom-$1-$2.html
    timeout 120 "$BROWSER" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$T/profile" \
        --virtual-time-budget=100000 --dump-dom \
        "http://127.0.0.1:$PORT/device.html?plan=plan.json&checkpoint=b$r.safetensors&data=own-$c.json&index=$c" \
        >"$dom" 2>"$T/browser.err" || { echo "chromium: exit $?"; return 1; }
    grep -q '<pre id="status">0</pre>' "$dom" || { sed -n '/<pre id="status">/,/<\/pre>/p;/<pre id="log">/,/<\/pre>/p' "$dom"; return 1; }
    sed -n 's/.*<pre id="update">\([A-Za-z0-9+\/=]*\)<\/pre>.*/\1/p' "$dom" | base64 -d >"$out" && test -s "$out"
}

D=$T/xdev
mkdir -p "$D"
expect 0 "fedplan --to cross-device" -- "$PLAN" programs/fedavg.json --to cross-device -o "$WWW/plan.json"
expect 0 "fedvm server init" -- "$FEDVM" server "$WWW/plan.json" init --seed 3 --out "$D/s0.safetensors"
browsers=0
for r in $(seq "$R"); do
    expect 0 "round $r: fedvm server prepare" -- "$FEDVM" server "$WWW/plan.json" prepare --state \
        "$D/s$((r - 1)).safetensors" --clients "$N" --clients-per-round "$K" --out "$WWW/b$r.safetensors"
    clients=$(cat "$T/out")
    mkdir -p "$D/native$r" "$D/node$r" "$D/u$r"
    i=0
    for c in $clients; do
        # the native device, from the data of every client
        expect 0 "round $r, client $c: fedvm device" -- "$FEDVM" device "$WWW/plan.json" --checkpoint \
            "$WWW/b$r.safetensors" --data "train=$T/data.json" --index "$c" --out "$D/native$r/client-$c.safetensors"
        # Node, from the client's own data
        expect 0 "round $r, client $c: fedvm-device.js in Node" -- node "$WASM/fedvm-device.js" "$WWW/plan.json" \
            --checkpoint "$WWW/b$r.safetensors" --data "train=$T/own-$c.json" --index "$c" \
            --out "$D/node$r/client-$c.safetensors"
        same "$D/native$r/client-$c.safetensors" "$D/node$r/client-$c.safetensors" \
            "round $r, client $c: the update in Node against the native one"
        # every other client a browser, the rest native devices
        if [ $((i % 2)) -eq 1 ]; then
            browsers=$((browsers + 1))
            check "round $r, client $c: the update in Chromium" -- browser "$c" "$r" "$D/u$r/client-$c.safetensors"
            same "$D/native$r/client-$c.safetensors" "$D/u$r/client-$c.safetensors" \
                "round $r, client $c: the update in Chromium against the native one"
        else
            cp "$D/native$r/client-$c.safetensors" "$D/u$r/"
        fi
        i=$((i + 1))
    done
    expect 0 "round $r: fedvm server aggregate (native and browser clients)" -- "$FEDVM" server "$WWW/plan.json" \
        aggregate --state "$D/s$((r - 1)).safetensors" --broadcast "$WWW/b$r.safetensors" "$D/u$r" \
        --out "$D/s$r.safetensors"
done
check "some clients were browsers" -- test "$browsers" -ge "$R"
fedvm_rounds fedavg programs/fedavg.json "train=$T/data.json" "$R" "$K" "$D/run"
PYTHON=$PY same_state "$D/run/run/round-$(printf %06d "$R").safetensors" "$D/s$R.safetensors" \
    "the state after $R mixed rounds against fedvm run"

# what the WebAssembly build lacks is a clear error naming the file (exit 1)
"$FEDVM" data synthetic --kind fedprox --clients "$N" --seed 1 -o "$T/syn.sqlite" >/dev/null 2>&1 || bad "synthetic data"
expect 1 "a SQLite dataset in Node" -- node "$WASM/fedvm-device.js" "$WWW/plan.json" --checkpoint \
    "$WWW/b$R.safetensors" --data "train=$T/syn.sqlite" --index 0 --out "$T/x.safetensors"
has "$T/err" "$T/syn.sqlite: SQLite datasets are not in the WebAssembly build; give the data as a .json file" \
    "a SQLite dataset in Node"
printf -- '- []\n' >"$T/data.yaml"
expect 1 "a YAML data file in Node" -- node "$WASM/fedvm-device.js" "$WWW/plan.json" --checkpoint \
    "$WWW/b$R.safetensors" --data "train=$T/data.yaml" --index 0 --out "$T/x.safetensors"
has "$T/err" "$T/data.yaml: YAML documents are not in the WebAssembly build" "a YAML data file in Node"
check "nothing written on errors" -- test ! -e "$T/x.safetensors"

echo "run_wasm: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
