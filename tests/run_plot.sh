#!/usr/bin/env bash
# run_plot.sh BIN - 'fedvm plot': metrics files of real runs drawn as SVG and PNG and read back
# (tests/check_plot.py: the texts, curves and legend of an SVG; a PNG's header and pixels),
# several runs, labels, metrics, determinism, atomic output, and the errors.
set -u
BIN=${1:?usage: tests/run_plot.sh path/to/fedvm}
. "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
CHECK="$PY tests/check_plot.py"

# Two real runs (seeds 0 and 1) and a third with fewer clients a round.
D="$T/syn.sqlite"
"$BIN" data synthetic --kind fedprox --seed 5 -o "$D" >/dev/null 2>&1 || { echo "run_plot: cannot make data"; exit 1; }
TRAIN="tests/train/softmax.json --data train=$D --data test=$D:test"
mkdir -p "$T/runs"
"$BIN" run $TRAIN --rounds 12 --clients-per-round 5 --eval-every 2 --metrics "$T/runs/seed0.jsonl" >/dev/null 2>&1 &&
    "$BIN" run $TRAIN --rounds 12 --clients-per-round 5 --eval-every 2 --seed 1 --metrics "$T/runs/seed1.jsonl" >/dev/null 2>&1 &&
    "$BIN" run $TRAIN --rounds 9 --clients-per-round 2 --metrics "$T/runs/k2.jsonl" >/dev/null 2>&1 ||
    { echo "run_plot: cannot train"; exit 1; }
A="$T/runs/seed0.jsonl" B="$T/runs/seed1.jsonl" C="$T/runs/k2.jsonl"

# The probe: a picture whose texts are known, to read the texts of the others (see check_plot.py).
probe() { $PY -c "import sys; sys.path.insert(0, 'tests'); import check_plot; print(check_plot.PROBE_$1)"; }
PROBE_LABEL=$(probe LABEL) PROBE_METRIC=$(probe METRIC)
printf '{"round": 1, "%s": 1}\n{"round": 2, "%s": 2}\n' "$PROBE_METRIC" "$PROBE_METRIC" >"$T/probe.jsonl"
"$BIN" plot "$T/probe.jsonl" --metric "$PROBE_METRIC" --label "$PROBE_LABEL" --title "$PROBE_LABEL:," \
    --size 2400x400 -o "$T/probe.svg" || { echo "run_plot: cannot draw the probe"; exit 1; }
svg() { $CHECK svg "$T/probe.svg" "$1" >"$T/sum"; }
count() { # count PATTERN N DESCRIPTION: lines of the summary matching PATTERN
    local n
    n=$(grep -cE -- "$1" "$T/sum")
    if [ "$n" -eq "$2" ]; then ok; else bad "$3: $n lines match '$1', expected $2"; sed 's/^/  | /' "$T/sum" | head -30; fi
}
BLUE='#1f77b4' ORANGE='#ff7f0e' GREEN='#2ca02c'

# -- two runs as SVG: two panels, eval solid and train dashed, a legend naming the runs
expect 0 "plot two runs as SVG" -- "$BIN" plot "$A" "$B" -o "$T/two.svg" && check "no output on success" -- test ! -s "$T/out" -a ! -s "$T/err"
svg "$T/two.svg"
has "$T/sum" "size 800x" "SVG width"
has "$T/sum" "ytext loss" "loss panel's axis label"
has "$T/sum" "ytext accuracy" "accuracy panel's axis label"
count '^ytext' 2 "two panels"
has "$T/sum" "text round" "x axis label"
count '^text round$' 1 "one x axis label, under the bottom panel"
has "$T/sum" "text seed0" "legend names the first run"
has "$T/sum" "text seed1" "legend names the second run"
has "$T/sum" "text eval" "legend's eval style"
has "$T/sum" "text train" "legend's train style"
lacks "$T/sum" "^title" "no title unless asked"
count "^curve $BLUE dashed 12\$" 1 "run 1's train loss: 12 rounds, dashed"
count "^curve $ORANGE dashed 12\$" 1 "run 2's train loss"
count "^curve $BLUE solid 6\$" 2 "run 1's eval loss and accuracy: 6 evaluations, solid"
count "^curve $ORANGE solid 6\$" 2 "run 2's eval loss and accuracy"
count '^curve' 6 "six curves in all"
count "^dots $BLUE 6\$" 2 "markers on run 1's evaluations"
count "^swatch $BLUE solid" 1 "legend sample for run 1"
count "^swatch $ORANGE solid" 1 "legend sample for run 2"
check "tick labels on both panels and the x axis" -- test "$(sed -n 's/^ticks //p' "$T/sum")" -ge 10

# -- the same as PNG: signature, size and pixels of both runs' colours
expect 0 "plot two runs as PNG" -- "$BIN" plot "$A" "$B" -o "$T/two.png"
check "PNG signature" -- cmp -n 8 "$T/two.png" <(printf '\211PNG\r\n\032\n')
$CHECK png "$T/two.png" >"$T/sum"
W=$(sed -n 's/^size \([0-9]*\)x.*/\1/p' "$T/sum") H=$(sed -n 's/^size [0-9]*x\([0-9]*\)/\1/p' "$T/sum")
check "PNG is 800 wide" -- test "$W" = 800
SVG_H=$($CHECK svg "$T/probe.svg" "$T/two.svg" | sed -n 's/^size [0-9]*x//p')
check "PNG as high as the SVG" -- test "$H" = "$SVG_H"
has "$T/sum" "type 2 depth 8" "8-bit RGB"
check "mostly background" -- test "$(sed -n 's/^background //p' "$T/sum")" -gt $((W * H * 8 / 10))
check "run 1's colour drawn" -- test "$(sed -n "s/^colour $BLUE //p" "$T/sum")" -gt 300
check "run 2's colour drawn" -- test "$(sed -n "s/^colour $ORANGE //p" "$T/sum")" -gt 300
check "no third colour" -- test "$(sed -n "s/^colour $GREEN //p" "$T/sum")" -eq 0

# -- deterministic: the same files give the same bytes
"$BIN" plot "$A" "$B" -o "$T/again.svg" && same "$T/two.svg" "$T/again.svg" "SVG twice"
"$BIN" plot "$A" "$B" -o "$T/again.png" && same "$T/two.png" "$T/again.png" "PNG twice"
lacks "$T/two.svg" "<title" "SVG has no varying metadata"

# -- three runs, labels, title, size
expect 0 "three runs with labels" -- "$BIN" plot "$A" "$B" "$C" --label "seed 0" --label "seed 1" --title "Softmax, FedAvg" \
    --size 900x500 -o "$T/three.svg"
svg "$T/three.svg"
has "$T/sum" "size 900x500" "--size"
has "$T/sum" "text seed 0" "first label"
has "$T/sum" "text seed 1" "second label"
has "$T/sum" "text k2" "a run without --label keeps its name"
has "$T/sum" "title Softmax, FedAvg" "title"
count "^swatch $GREEN solid" 1 "a third colour in the legend"
count "^curve $GREEN dashed 9\$" 1 "run 3's train loss"
count "^dots $GREEN 1\$" 2 "run 3 evaluated once: a dot in each panel"
expect 0 "three runs as PNG" -- "$BIN" plot "$A" "$B" "$C" -o "$T/three.png" && $CHECK png "$T/three.png" >"$T/sum" &&
    check "run 3's colour in the PNG" -- test "$(sed -n "s/^colour $GREEN //p" "$T/sum")" -gt 40

# -- default names tell files of the same name apart by their folders
mkdir -p "$T/s0" "$T/s1"
cp "$A" "$T/s0/metrics.jsonl" && cp "$B" "$T/s1/metrics.jsonl"
expect 0 "files of one name" -- "$BIN" plot "$T/s0/metrics.jsonl" "$T/s1/metrics.jsonl" -o "$T/same.svg"
svg "$T/same.svg"
has "$T/sum" "text s0/metrics" "first file's folder"
has "$T/sum" "text s1/metrics" "second file's folder"

# -- --metric: other fields, a series by its full name, panels in the order given
expect 0 "--metric seconds --metric train.examples" -- "$BIN" plot "$A" "$B" --metric seconds --metric train.examples -o "$T/m.svg"
svg "$T/m.svg"
count '^ytext' 2 "two panels"
check "panels in the order given" -- test "$(grep '^ytext' "$T/sum" | tr '\n' ' ')" = "ytext seconds ytext train.examples "
count "^curve $BLUE solid 12\$" 1 "seconds: a solid line a round"
count "^curve $BLUE dashed 12\$" 1 "train.examples: dashed"
lacks "$T/sum" "text eval" "no eval in the legend without eval curves"
expect 0 "--metric accuracy alone" -- "$BIN" plot "$A" --metric accuracy -o "$T/acc.svg" && svg "$T/acc.svg" &&
    count '^ytext' 1 "one panel" && lacks "$T/sum" "text train" "no train in the legend without train curves"

# -- a panel that no file has is left out; one run with only training loss
printf '{"round": 1, "train": {"loss": 2.0}}\n{"round": 2, "train": {"loss": 1.0}}\n{"round": 3, "train": {"loss": 0.5}}\n' >"$T/lin.jsonl"
expect 0 "only a training loss" -- "$BIN" plot "$T/lin.jsonl" -o "$T/lin.svg"
svg "$T/lin.svg"
count '^ytext' 1 "only the loss panel"
has "$T/sum" "ytext loss" "loss panel"
count "^curve $BLUE dashed 3\$" 1 "the train loss"

# -- gaps: a non-finite value breaks the line; a point alone gets a dot
printf '{"round": 1, "eval": {"loss": 3}}\n{"round": 2, "eval": {"loss": 2}}\n{"round": 3, "eval": {"loss": "nan"}}\n{"round": 4, "eval": {"loss": 1}}\n{"round": 5, "eval": {"loss": "inf"}}\n{"round": 6, "eval": {"loss": 0.5}}\n{"round": 7, "eval": {"loss": 0.4}}\n' >"$T/gaps.jsonl"
expect 0 "non-finite values" -- "$BIN" plot "$T/gaps.jsonl" -o "$T/gaps.svg"
svg "$T/gaps.svg"
count "^curve $BLUE solid 4 \(2 pieces\)\$" 1 "the lines: rounds 1-2 and 6-7"
count "^dots $BLUE 5\$" 1 "a dot on every finite evaluation, round 4 alone among them"

# -- appended runs and a cut last line: drawn, with a note (each run's file: its header, then 12 rounds)
cat "$A" "$A" >"$T/twice.jsonl"
expect 0 "a run appended twice" -- "$BIN" plot "$T/twice.jsonl" -o "$T/twice.svg" && has "$T/err" "twice.jsonl:15: note: the rounds start again" "restart note"
svg "$T/twice.svg" && count "^curve $BLUE dashed 12\$" 1 "each round drawn once"
{ cat "$A"; printf '{"round": 13, "train": {"lo'; } >"$T/cut.jsonl"
expect 0 "an incomplete last line" -- "$BIN" plot "$T/cut.jsonl" -o "$T/cut.svg" && has "$T/err" "cut.jsonl:14: note: an incomplete last line" "cut note"

# -- errors
expect 1 "no such file" -- "$BIN" plot "$T/nope.jsonl" -o "$T/x.svg" && has "$T/err" "nope.jsonl: cannot open" "missing file"
{ head -3 "$A"; echo '{"round": 4, "train": {"loss": 1.0,}}'; tail -n +5 "$A"; } >"$T/bad.jsonl"
expect 1 "bad JSON line" -- "$BIN" plot "$A" "$T/bad.jsonl" -o "$T/x.svg" && has "$T/err" "bad.jsonl:4:" "file:line of the bad line"
{ head -2 "$A"; echo '[1, 2]'; } >"$T/arr.jsonl"
expect 1 "a line that is not an object" -- "$BIN" plot "$T/arr.jsonl" -o "$T/x.svg" && has "$T/err" "arr.jsonl:3:1: a metrics line must be a JSON object" "not an object"
{ head -2 "$A"; echo '{"train": {"loss": 1}}'; } >"$T/noround.jsonl"
expect 1 "a line without a round" -- "$BIN" plot "$T/noround.jsonl" -o "$T/x.svg" && has "$T/err" 'noround.jsonl:3:1: no "round"' "no round"
: >"$T/empty.jsonl"
expect 1 "an empty file" -- "$BIN" plot "$T/empty.jsonl" -o "$T/x.svg" && has "$T/err" "empty.jsonl: no rounds: the file is empty" "empty"
printf '{"round": 1, "sampled": [1, 2]}\n{"round": 2, "note": "x"}\n' >"$T/nonum.jsonl"
expect 1 "no numbers" -- "$BIN" plot "$T/nonum.jsonl" -o "$T/x.svg" && has "$T/err" "nonum.jsonl: no metrics" "no numbers"
printf '{"round": 1, "x": 1}\n' >"$T/x.jsonl"
expect 1 "neither loss nor accuracy" -- "$BIN" plot "$T/x.jsonl" -o "$T/x.svg" &&
    has "$T/err" "no file has a loss or an accuracy; choose what to draw with --metric NAME (the file has: x)" "names what there is"
expect 1 "unknown metric" -- "$BIN" plot "$A" --metric perplexity -o "$T/x.svg" &&
    has "$T/err" "no file has the metric 'perplexity' (the file has: train.loss, train.examples, seconds, cpu_seconds, clients, eval.loss, eval.accuracy, eval_seconds)" "unknown metric"
printf '{"round": 1, "train": {"loss": "nan"}}\n' >"$T/allnan.jsonl"
expect 1 "nothing finite" -- "$BIN" plot "$T/allnan.jsonl" -o "$T/x.svg" && has "$T/err" "no finite values" "all NaN"
expect 2 "unknown extension" -- "$BIN" plot "$A" -o "$T/x.jpg" && has "$T/err" "must end in .svg or .png, found" "extension"
check "nothing written for a bad extension" -- test ! -e "$T/x.jpg"
expect 2 "no -o" -- "$BIN" plot "$A" && has "$T/err" "plot needs -o" "no -o"
expect 2 "no file" -- "$BIN" plot -o "$T/x.svg" && has "$T/err" "at least one metrics FILE" "no file"
expect 2 "more labels than files" -- "$BIN" plot "$A" --label a --label b -o "$T/x.svg" && has "$T/err" "2 --label for 1 file" "labels"
expect 2 "bad --size" -- "$BIN" plot "$A" --size 80x60 -o "$T/x.svg" && has "$T/err" "--size must be WxH" "size"
expect 2 "--size too small for the panels" -- "$BIN" plot "$A" --size 300x150 -o "$T/x.svg" && has "$T/err" "too small for 2 panels" "small"
expect 2 "unknown option" -- "$BIN" plot "$A" --colour red -o "$T/x.svg" && has "$T/err" "unknown option '--colour'" "option"
expect 1 "unwritable output" -- "$BIN" plot "$A" -o "$T/no/such/dir/x.svg" && has "$T/err" "cannot write" "unwritable"

# -- the output is replaced atomically: a failed plot leaves the old picture, no temporary
cp "$T/two.svg" "$T/keep.svg"
expect 1 "failing over an existing picture" -- "$BIN" plot "$T/bad.jsonl" -o "$T/keep.svg" && same "$T/two.svg" "$T/keep.svg" "old picture kept"
expect 0 "replacing a picture" -- "$BIN" plot "$A" -o "$T/keep.svg" && if cmp -s "$T/two.svg" "$T/keep.svg"; then bad "picture not replaced"; else ok; fi
check "no temporary files left" -- test -z "$(ls "$T" | grep '\.tmp')"

# -- help
expect 0 "plot --help" -- "$BIN" plot --help && has "$T/out" "usage: fedvm plot FILE.jsonl..." "usage"
expect 0 "help plot" -- "$BIN" help plot && has "$T/out" "--metric NAME" "help plot"
expect 0 "fedvm --help lists plot" -- "$BIN" --help && has "$T/out" "plot FILE..." "listed"

echo "plot: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
