#!/usr/bin/env bash
# run_sweep.sh BIN - fedvm run --grid/--seeds: the runs of a grid of hyperparameter values times seeds
# in one process, each bit for bit the same run alone (less timings), whatever the thread count;
# the index; the errors; and fedvm plot of a sweep (a curve and a band per configuration, with the
# mean and standard deviation over the seeds checked against Python's).
set -u
BIN=${1:?usage: tests/run_sweep.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}

D="$T/syn.sqlite"
"$BIN" data synthetic --kind fedprox --seed 5 --clients 12 -o "$D" >/dev/null 2>&1 || { echo "run_sweep: cannot make data"; exit 1; }
RUN="programs/fedavg.json --data train=$D --data test=$D:test --rounds 3 --clients-per-round 4 --eval-every 1 --set epochs=2"

expect 0 "a sweep of 3 x 2 on 2 threads" -- "$BIN" run $RUN --grid client_lr=0.003,0.01,0.03 --seeds 4-5 --threads 2 --out-dir "$T/sw" &&
    has "$T/err" "a sweep of 6 runs (3 configurations x 2 seeds)" "announced" &&
    has "$T/err" "run 6 (client_lr=0.03, seed 5)" "each run reported"
check "the index" -- "$PY" - "$T/sw/index.json" <<'PY'
import json, sys
ix = json.load(open(sys.argv[1]))
assert ix["program"] == "programs/fedavg.json" and ix["grid"] == {"client_lr": [0.003, 0.01, 0.03]}, ix
assert ix["seeds"] == [4, 5], ix["seeds"]
want = [(lr, s) for lr in (0.003, 0.01, 0.03) for s in (4, 5)]
got = [(r["set"]["client_lr"], r["seed"]) for r in ix["runs"]]
assert got == want, got
assert [r["file"] for r in ix["runs"]] == ["run-%d.jsonl" % k for k in range(1, 7)]
for r in ix["runs"]:
    assert set(r["final"]) == {"train", "eval"} and 0 <= r["final"]["eval"]["accuracy"] <= 1, r
PY
# each run as it runs alone, less the timings
strip() { sed -E 's/"(eval_|cpu_)?seconds": [0-9.e+-]+, //g' "$1"; }
for k in 1 4 6; do
    lr=$(sed -n 's/.*"client_lr": \([0-9.]*\).*/\1/p' "$T/sw/run-$k.jsonl" | head -1)
    seed=$(( k % 2 ? 4 : 5 ))
    rm -f "$T/alone.jsonl"
    expect 0 "run $k alone" -- "$BIN" run $RUN --set client_lr="$lr" --seed "$seed" --metrics "$T/alone.jsonl" &&
        check "run $k: the same as alone" -- cmp <(strip "$T/alone.jsonl") <(strip "$T/sw/run-$k.jsonl")
done
expect 0 "the same sweep on 1 thread" -- "$BIN" run $RUN --grid client_lr=0.003,0.01,0.03 --seeds 4-5 --threads 1 --out-dir "$T/sw1"
for k in 1 2 3 4 5 6; do
    check "run $k: 1 thread as 2" -- cmp <(strip "$T/sw1/run-$k.jsonl") <(strip "$T/sw/run-$k.jsonl")
done
expect 0 "two grids, seeds as a list" -- "$BIN" run $RUN --grid client_lr=0.01,0.03 --grid 'batch_size=5,10' --seeds 1,7 --out-dir "$T/sw2" &&
    check "the product: 8 runs, the first grid slowest" -- "$PY" -c '
import json, sys
ix = json.load(open(sys.argv[1]))
got = [(r["set"]["client_lr"], r["set"]["batch_size"], r["seed"]) for r in ix["runs"]]
assert got == [(lr, b, s) for lr in (0.01, 0.03) for b in (5, 10) for s in (1, 7)], got' "$T/sw2/index.json"

# errors
expect 2 "a used --out-dir" -- "$BIN" run $RUN --grid client_lr=0.01 --out-dir "$T/sw" && has "$T/err" "is not empty" "not empty"
expect 2 "--grid without values" -- "$BIN" run $RUN --grid client_lr= --out-dir "$T/e1" && has "$T/err" "--grid needs NAME=VALUE" "grid"
expect 2 "--seeds backwards" -- "$BIN" run $RUN --seeds 5-2 --out-dir "$T/e2" && has "$T/err" "--seeds needs" "seeds"
expect 2 "--metrics in a sweep" -- "$BIN" run $RUN --seeds 1-2 --metrics "$T/m.jsonl" && has "$T/err" "one metrics file per run" "metrics"
expect 2 "--out-dir alone" -- "$BIN" run $RUN --out-dir "$T/e3" && has "$T/err" "--out-dir is for sweeps" "out-dir"
expect 1 "an unknown hyperparameter" -- "$BIN" run $RUN --grid client_rl=0.1 --out-dir "$T/e4" &&
    has "$T/err" "run 1 (client_rl=0.1, seed 0) failed" "which run" && has "$T/err" "did you mean 'client_lr'?" "suggestion"
expect 1 "a value of the wrong type" -- "$BIN" run $RUN --grid epochs=1,1.5 --out-dir "$T/e5" &&
    has "$T/err" "--set epochs=1.5: expected an integer" "type"

# the plot: a curve and a band per configuration; the band's mean and spread are Python's
expect 0 "plot a sweep" -- "$BIN" plot "$T/sw/index.json" -o "$T/sw.svg"
# the probe that check_plot.py reads texts with (as tests/run_plot.sh draws it)
probe() { $PY -c "import sys; sys.path.insert(0, 'tests'); import check_plot; print(check_plot.PROBE_$1)"; }
PROBE_LABEL=$(probe LABEL) PROBE_METRIC=$(probe METRIC)
printf '{"round": 1, "%s": 1}\n{"round": 2, "%s": 2}\n' "$PROBE_METRIC" "$PROBE_METRIC" >"$T/probe.jsonl"
"$BIN" plot "$T/probe.jsonl" --metric "$PROBE_METRIC" --label "$PROBE_LABEL" --title "$PROBE_LABEL:," \
    --size 2400x400 -o "$T/probe.svg" >/dev/null 2>&1 || bad "the probe"
"$PY" tests/check_plot.py svg "$T/probe.svg" "$T/sw.svg" >"$T/summary" 2>&1 || { bad "check_plot"; cat "$T/summary"; }
check "a band for each configuration's evaluation, in each panel" -- test "$(grep -c '^band ' "$T/summary")" -eq 6
check "each band goes up 3 rounds and back" -- sh -c "grep '^band ' '$T/summary' | grep -vq ' 6\$' && exit 1 || exit 0"
check "a solid curve per configuration and panel" -- test "$(grep -c '^curve .* solid 3$' "$T/summary")" -eq 6
check "the means and spreads drawn" -- "$PY" - "$T/sw" "$T/sw.svg" <<'PY'
# The y axis maps values linearly to pixels: from the loss panel's curves and bands, the
# mean and the sample standard deviation over the seeds of each configuration's eval.loss,
# up to one scale and offset that must fit all of them.
import json, re, statistics, sys
import xml.etree.ElementTree as ET
ix = json.load(open(sys.argv[1] + "/index.json"))
runs = {}
for r in ix["runs"]:
    lines = [json.loads(l) for l in open(sys.argv[1] + "/" + r["file"])][1:]
    runs.setdefault(r["set"]["client_lr"], []).append([l["eval"]["loss"] for l in lines])
want = []
for lr in (0.003, 0.01, 0.03):
    per_round = list(zip(*runs[lr]))
    want.append(([statistics.mean(v) for v in per_round], [statistics.stdev(v) for v in per_round]))
svg = ET.parse(sys.argv[2]).getroot()
paths = [p for p in svg.iter("{http://www.w3.org/2000/svg}path")]
def pts(d):
    return [tuple(map(float, m)) for m in re.findall(r"[ML] ?([-\d.]+) ([-\d.]+)", d.split("Z")[0])]
bands = [pts(p.get("d")) for p in paths if re.search(r"fill-opacity:0\.\d", p.get("style", ""))][:3]
assert len(bands) == 3, len(bands)
# a band: the top edge (mean + sd) over the rounds, then the bottom edge (mean - sd) back
tops = [[y for _, y in b[:3]] for b in bands]
bots = [[y for _, y in b[3:][::-1]] for b in bands]
# pixels = a + s * value, fitted by least squares to every corner; SVG coordinates have 1/256 px
pairs = []
for (means, sds), top, bot in zip(want, tops, bots):
    for m, sd, yt, yb in zip(means, sds, top, bot):
        pairs += [(m + sd, yt), (m - sd, yb)]
n = len(pairs)
mx, my = sum(v for v, _ in pairs) / n, sum(y for _, y in pairs) / n
s = sum((v - mx) * (y - my) for v, y in pairs) / sum((v - mx) ** 2 for v, _ in pairs)
a = my - s * mx
worst = max(abs(a + s * v - y) for v, y in pairs)
assert s < 0 and worst < 0.02, (s, worst)
PY
expect 2 "no --label for a sweep" -- "$BIN" plot "$T/sw/index.json" --label x -o "$T/x.svg"
echo '{"runs": 3}' >"$T/bad.json"
expect 1 "not an index" -- "$BIN" plot "$T/bad.json" -o "$T/x.svg" && has "$T/err" "not a sweep's index" "bad index"

echo "sweep: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
