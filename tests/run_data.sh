#!/usr/bin/env bash
# run_data.sh BIN - 'fedvm data': Fashion-MNIST imports with each partition, determinism, synthetic
# generators, info/head output, FedJAX compatibility both ways, and error cases.
set -u
BIN=${1:?usage: tests/run_data.sh path/to/fedvm}
FASHION=${FVM_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
FIXTURES=${FVM_FIXTURES:-../shared/fixtures}
. "$(dirname "$0")/lib.sh"

# A Python with msgpack (Debian's python3-msgpack): $PYTHON, else the system's.
PY=$(python_with msgpack)
if [ -z "$PY" ]; then echo "run_data: no python3 with msgpack (install python3-msgpack)"; exit 1; fi
SAME_ZLIB=
if [ "$("$PY" -c 'import zlib; print(zlib.ZLIB_RUNTIME_VERSION)')" = "$(pkg-config --modversion zlib 2>/dev/null)" ]; then
    SAME_ZLIB=--same-zlib
fi

FACTS_COLS='"columns": {"pixels": ["uint8", [28, 28]], "label": ["int32", []]}, "label": "label", "label_range": [0, 9]'

# -- help
expect 0 "data --help" -- "$BIN" data --help && has "$T/out" "usage: fedvm data COMMAND" "data --help"
expect 0 "help data" -- "$BIN" help data && has "$T/out" "usage: fedvm data COMMAND" "help data"
expect 0 "--help lists data" -- "$BIN" --help && has "$T/out" "data COMMAND" "main usage"
for c in import synthetic info head; do
    expect 0 "data $c --help" -- "$BIN" data $c --help && has "$T/out" "usage: fedvm data $c" "data $c --help"
    expect 0 "help data $c" -- "$BIN" help data $c && has "$T/out" "usage: fedvm data $c" "help data $c"
done
expect 2 "data without a command" -- "$BIN" data
expect 2 "unknown data command" -- "$BIN" data frobnicate && has "$T/err" "unknown data command 'frobnicate'" "unknown"

# -- import fashion-mnist: iid
if [ -d "$FASHION" ]; then
    FM="$T/fm_iid.sqlite"
    expect 0 "import iid" -- "$BIN" data import fashion-mnist --clients 10 --source "$FASHION" -o "$FM" &&
        has "$T/err" "10 clients, 60000 training examples" "import summary"
    check "iid file read as FedJAX does" -- "$PY" tests/check_fedjax_file.py "$FM" $SAME_ZLIB --fashion-mnist "$FASHION" --facts \
        "{\"splits\": [\"default\", \"test\"], \"default\": {\"clients\": 10, \"examples\": 60000, $FACTS_COLS, \"equal_sizes\": true,
          \"client_ids\": [\"f_00000\", \"f_00001\", \"f_00002\", \"f_00003\", \"f_00004\", \"f_00005\", \"f_00006\", \"f_00007\", \"f_00008\", \"f_00009\"]},
          \"test\": {\"clients\": 1, \"examples\": 10000, $FACTS_COLS, \"client_ids\": [\"test\"]}}"
    expect 0 "info" -- "$BIN" data info "$FM" &&
        has "$T/out" "FedJAX SQLite, splits: default, test" "info format" &&
        has "$T/out" "split default: 10 clients, 60000 examples" "info clients" &&
        has "$T/out" "columns: pixels u8[28,28], label i32[]" "info columns" &&
        has "$T/out" "examples per client: min 6000, p10 6000, p50 6000, p90 6000, max 6000" "info sizes" &&
        has "$T/out" "split test: 1 client, 10000 examples" "info test split"
    expect 0 "info --split test --verify" -- "$BIN" data info "$FM" --split test --verify &&
        has "$T/out" "verify: the 1 client decodes and matches the columns" "verify" &&
        if grep -q "split default" "$T/out"; then bad "info --split shows other splits"; else ok; fi
    # head: by id, by index, -n, the test split
    expect 0 "head by id" -- "$BIN" data head "$FM" f_00003 -n 2
    check "head JSON" -- "$PY" -c '
import json, sys
h = json.load(open(sys.argv[1]))
assert h["split"] == "default" and h["client"] == "f_00003" and h["index"] == 3 and h["examples"] == 6000, h
assert len(h["head"]) == 2 and sorted(h["head"][0]) == ["label", "pixels"]
px = h["head"][0]["pixels"]
assert len(px) == 28 and all(len(r) == 28 and all(0 <= v <= 255 for v in r) for r in px)
assert 0 <= h["head"][0]["label"] <= 9' "$T/out"
    expect 0 "head by index" -- "$BIN" data head "$FM" 3 -n 1 && has "$T/out" '"client": "f_00003"' "head by index"
    expect 0 "head default client" -- "$BIN" data head "$FM" && has "$T/out" '"client": "f_00000"' "head first client"
    expect 0 "head test split" -- "$BIN" data head "$FM" test --split test -n 0 &&
        has "$T/out" '"examples": 10000' "head test" && has "$T/out" '"head": []' "head -n 0"
    expect 1 "head unknown client" -- "$BIN" data head "$FM" f_99999 && has "$T/err" "no client 'f_99999'" "head unknown"
    expect 1 "head index out of range" -- "$BIN" data head "$FM" 10
    expect 1 "unknown split" -- "$BIN" data info "$FM" --split validation &&
        has "$T/err" "no split 'validation'; the dataset's splits: default, test" "unknown split"
    expect 1 "head unknown split" -- "$BIN" data head "$FM" --split train && has "$T/err" "no split 'train'" "head split"

    # -- determinism: same seed, same bytes; another seed, another file
    expect 0 "import again" -- "$BIN" data import fashion-mnist --clients 10 --source "$FASHION" -o "$T/fm_iid2.sqlite"
    if cmp -s "$FM" "$T/fm_iid2.sqlite"; then ok; else bad "same seed gave different files"; fi
    expect 0 "import seed 1" -- "$BIN" data import fashion-mnist --clients 10 --seed 1 --source "$FASHION" -o "$T/fm_seed1.sqlite"
    if cmp -s "$FM" "$T/fm_seed1.sqlite"; then bad "another seed gave the same file"; else ok; fi

    # -- shards:2 (McMahan et al.): at most 2 labels per client
    expect 0 "import shards:2" -- "$BIN" data import fashion-mnist --clients 10 --partition shards:2 --source "$FASHION" -o "$T/fm_shards.sqlite"
    check "shards:2 file" -- "$PY" tests/check_fedjax_file.py "$T/fm_shards.sqlite" --facts \
        "{\"default\": {\"clients\": 10, \"examples\": 60000, $FACTS_COLS, \"max_labels_per_client\": 2, \"equal_sizes\": true},
          \"test\": {\"clients\": 1, \"examples\": 10000}}"

    # -- dirichlet: the minimum client size holds
    expect 0 "import dirichlet:0.3" -- "$BIN" data import fashion-mnist --clients 10 --partition dirichlet:0.3 --min-size 1000 \
        --source "$FASHION" -o "$T/fm_dir.sqlite"
    check "dirichlet file" -- "$PY" tests/check_fedjax_file.py "$T/fm_dir.sqlite" --facts \
        "{\"default\": {\"clients\": 10, \"examples\": 60000, $FACTS_COLS, \"min_client_size\": 1000}}"
    expect 0 "info dirichlet" -- "$BIN" data info "$T/fm_dir.sqlite" --split default
    check "dirichlet sizes differ" -- "$PY" -c '
import re, sys
m = re.search(r"min (\d+), p10 \d+, p50 \d+, p90 \d+, max (\d+)", open(sys.argv[1]).read())
assert m and 1000 <= int(m.group(1)) < int(m.group(2)), m and m.groups()' "$T/out"
    expect 1 "dirichlet minimum out of reach" -- "$BIN" data import fashion-mnist --clients 100 --partition dirichlet:0.05 \
        --min-size 600 --source "$FASHION" -o "$T/never.sqlite" && has "$T/err" "at least 600 examples" "dirichlet failure"
    if [ -e "$T/never.sqlite" ]; then bad "a failed import left a file"; else ok; fi
    if ls "$T" | grep -q tmp; then bad "a failed import left a temporary file"; else ok; fi
else
    echo "run_data: $FASHION not found; Fashion-MNIST imports skipped (install dataset-fashion-mnist)"
fi

# -- import errors
expect 2 "bad partition" -- "$BIN" data import fashion-mnist --partition random && has "$T/err" "unknown partition 'random'" "partition"
expect 2 "shards:0" -- "$BIN" data import fashion-mnist --partition shards:0 && has "$T/err" "shards:K" "shards:0"
expect 2 "dirichlet:-1" -- "$BIN" data import fashion-mnist --partition dirichlet:-1
expect 2 "--min-size without dirichlet" -- "$BIN" data import fashion-mnist --min-size 5
expect 2 "--clients 0" -- "$BIN" data import fashion-mnist --clients 0
expect 2 "unknown dataset" -- "$BIN" data import cifar10 && has "$T/err" "unknown dataset 'cifar10'" "unknown dataset"
expect 2 "import without a name" -- "$BIN" data import
expect 2 "import unknown option" -- "$BIN" data import fashion-mnist --shuffle
echo keep >"$T/keep.sqlite"
expect 1 "missing source" -- "$BIN" data import fashion-mnist --source "$T/nowhere" -o "$T/keep.sqlite" && has "$T/err" "cannot open" "source"
if [ "$(cat "$T/keep.sqlite")" = keep ]; then ok; else bad "a failed import replaced the output file"; fi

# -- synthetic
SYN_COLS='"columns": {"x": ["float32", [60]], "y": ["int32", []]}, "label": "y", "label_range": [0, 9]'
for kind in fedprox leaf; do
    expect 0 "synthetic $kind" -- "$BIN" data synthetic --kind $kind -o "$T/$kind.sqlite" && has "$T/err" "30 clients" "$kind summary"
    check "synthetic $kind file" -- "$PY" tests/check_fedjax_file.py "$T/$kind.sqlite" $SAME_ZLIB --facts \
        "{\"splits\": [\"default\", \"test\"], \"default\": {\"clients\": 30, $SYN_COLS}, \"test\": {\"clients\": 30, $SYN_COLS}}"
    expect 0 "synthetic $kind again" -- "$BIN" data synthetic --kind $kind -o "$T/${kind}2.sqlite"
    if cmp -s "$T/$kind.sqlite" "$T/${kind}2.sqlite"; then ok; else bad "$kind: same seed gave different files"; fi
    expect 0 "synthetic $kind seed 5" -- "$BIN" data synthetic --kind $kind --seed 5 -o "$T/${kind}3.sqlite"
    if cmp -s "$T/$kind.sqlite" "$T/${kind}3.sqlite"; then bad "$kind: another seed gave the same file"; else ok; fi
    expect 0 "info synthetic $kind --verify" -- "$BIN" data info "$T/$kind.sqlite" --verify &&
        has "$T/out" "split default: 30 clients" "$kind info" && has "$T/out" "columns: x f32[60], y i32[]" "$kind columns"
done
# FedProx sizes are lognormal(4,2) + 50: every client has at least 50 (45 for training after a 0.1 test split)
check "fedprox sizes" -- "$PY" tests/check_fedjax_file.py "$T/fedprox.sqlite" --facts '{"default": {"min_client_size": 45}}'
expect 0 "synthetic fedprox --iid" -- "$BIN" data synthetic --kind fedprox --iid --test-fraction 0 -o "$T/iid.sqlite"
check "fedprox --iid file" -- "$PY" tests/check_fedjax_file.py "$T/iid.sqlite" --facts \
    "{\"splits\": [\"default\"], \"default\": {\"clients\": 30, $SYN_COLS, \"min_client_size\": 50}}"
expect 0 "synthetic options" -- "$BIN" data synthetic --kind leaf --clients 1000 --dim 5 --classes 3 --clusters 2 \
    --min-examples 2 --max-examples 8 --test-fraction 0 -o "$T/small.sqlite"
check "synthetic options file" -- "$PY" tests/check_fedjax_file.py "$T/small.sqlite" --facts \
    '{"default": {"clients": 1000, "columns": {"x": ["float32", [5]], "y": ["int32", []], "domain_id": ["int32", []]}, "label": "y", "label_range": [0, 2], "min_client_size": 2}}'
expect 0 "info synthetic options" -- "$BIN" data info "$T/small.sqlite" && has "$T/out" "max 8" "max-examples cap" &&
    has "$T/out" "split default: 1000 clients" "1000 clients"
expect 2 "synthetic without --kind" -- "$BIN" data synthetic -o "$T/x.sqlite"
expect 2 "synthetic without -o" -- "$BIN" data synthetic --kind leaf && has "$T/err" "-o FILE" "synthetic -o"
expect 2 "synthetic bad kind" -- "$BIN" data synthetic --kind mnist -o "$T/x.sqlite"
expect 2 "leaf with --alpha" -- "$BIN" data synthetic --kind leaf --alpha 1 -o "$T/x.sqlite"
expect 2 "--iid with --beta" -- "$BIN" data synthetic --kind fedprox --iid --beta 1 -o "$T/x.sqlite"
expect 2 "max below min" -- "$BIN" data synthetic --kind fedprox --max-examples 10 -o "$T/x.sqlite"
expect 2 "test fraction 1" -- "$BIN" data synthetic --kind fedprox --test-fraction 1 -o "$T/x.sqlite"

# -- the EMNIST stand-in: FedJAX's schema, ids, sizes and label shares, learnable but not trivially
# (tests/data/check_emnist.py reads it apart from fedvm)
NPY=$(python_with numpy msgpack)
expect 0 "synthetic emnist" -- "$BIN" data synthetic --kind emnist --clients 40 -o "$T/emnist.sqlite" &&
    has "$T/err" "emnist, 40 clients" "emnist summary"
expect 0 "info emnist" -- "$BIN" data info "$T/emnist.sqlite" && has "$T/out" "columns: pixels f32[28,28], label i32[]" "emnist columns"
expect 0 "synthetic emnist again" -- "$BIN" data synthetic --kind emnist --clients 40 -o "$T/emnist2.sqlite"
if cmp -s "$T/emnist.sqlite" "$T/emnist2.sqlite"; then ok; else bad "emnist: same seed gave different files"; fi
expect 0 "synthetic emnist --only-digits" -- "$BIN" data synthetic --kind emnist --clients 30 --only-digits --seed 3 -o "$T/digits.sqlite"
if [ -n "$NPY" ]; then
    check "emnist against FedJAX's EMNIST" -- "$NPY" tests/data/check_emnist.py "$T/emnist.sqlite"
    check "emnist digits" -- "$NPY" tests/data/check_emnist.py "$T/digits.sqlite" --only-digits
else
    echo "run_data: no python3 with numpy and msgpack; the EMNIST stand-in's check skipped"
fi
expect 2 "emnist with --dim" -- "$BIN" data synthetic --kind emnist --dim 5 -o "$T/x.sqlite" &&
    has "$T/err" "--kind emnist takes only --clients, --only-digits, --seed and -o" "emnist options"
expect 2 "emnist with --test-fraction" -- "$BIN" data synthetic --kind emnist --test-fraction 0.2 -o "$T/x.sqlite"
expect 2 "emnist too many clients" -- "$BIN" data synthetic --kind emnist --clients 410001 -o "$T/x.sqlite"
expect 2 "--only-digits for fedprox" -- "$BIN" data synthetic --kind fedprox --only-digits -o "$T/x.sqlite" &&
    has "$T/err" "--only-digits applies to --kind emnist only" "only-digits"

# -- Agnostic FedAvg's per-example domain_id where a kind has domains: LEAF's clusters (FedProx
# has none), and EMNIST's writer groups (tests/data/check_emnist.py checks those)
expect 0 "leaf with 2 clusters" -- "$BIN" data synthetic --kind leaf --clusters 2 --clients 12 -o "$T/domains.sqlite"
expect 0 "info leaf domains" -- "$BIN" data info "$T/domains.sqlite" && has "$T/out" "columns: x f32[60], y i32[], domain_id i32[]" "leaf domain_id"
expect 0 "fedprox, no domains" -- "$BIN" data synthetic --kind fedprox --clients 3 -o "$T/fedprox_nodomain.sqlite"
expect 0 "info fedprox" -- "$BIN" data info "$T/fedprox_nodomain.sqlite"
check "fedprox: no domain_id" -- sh -c "! grep -q domain_id '$T/out'"
if [ -n "$NPY" ]; then
    check "leaf: one domain per client, both of 2 present" -- "$NPY" -c '
import sqlite3, sys, zlib, msgpack, numpy as np
def ext(code, data):
    shape, dtype, buf = msgpack.unpackb(data, raw=True)
    return np.frombuffer(buf, dtype=dtype.decode()).reshape(shape)
seen = set()
for (blob,) in sqlite3.connect(sys.argv[1]).execute("SELECT data FROM federated_data"):
    d = msgpack.unpackb(zlib.decompress(blob), ext_hook=ext, raw=False)["domain_id"]
    assert d.dtype == np.int32 and len(set(d.tolist())) == 1, d
    seen.add(int(d[0]))
assert seen == {0, 1}, seen' "$T/domains.sqlite"
fi
expect 0 "agnostic_fedavg on leaf's domains" -- "$BIN" run programs/agnostic_fedavg.json --data "train=$T/domains.sqlite" \
    --rounds 2 --clients-per-round 4 && has "$T/out" '"domain_weights"' "agnostic rounds"

# -- the Shakespeare stand-in: FedJAX's schema (snippets, byte strings as msgpack ext 4), TFF's 715
# roles with heavy-tailed sizes, and FedJAX's preprocess_client (tests/data/check_shakespeare.py
# reads both files apart from fedvm and preprocesses in NumPy)
expect 0 "synthetic shakespeare" -- "$BIN" data synthetic --kind shakespeare -o "$T/shakespeare.sqlite" &&
    has "$T/err" "shakespeare, 715 clients" "shakespeare summary"
expect 0 "info shakespeare" -- "$BIN" data info "$T/shakespeare.sqlite" && has "$T/out" "columns: snippets u8[?]" "shakespeare columns"
expect 0 "synthetic shakespeare again" -- "$BIN" data synthetic --kind shakespeare -o "$T/shakespeare2.sqlite"
if cmp -s "$T/shakespeare.sqlite" "$T/shakespeare2.sqlite"; then ok; else bad "shakespeare: same seed gave different files"; fi
expect 0 "preprocess shakespeare" -- "$BIN" data preprocess shakespeare "$T/shakespeare.sqlite" -o "$T/sp.sqlite" &&
    has "$T/err" "2 splits" "preprocess summary"
expect 0 "info preprocessed" -- "$BIN" data info "$T/sp.sqlite" && has "$T/out" "columns: x i32[80], y i32[80]" "preprocessed columns"
if [ -n "$NPY" ]; then
    check "shakespeare against FedJAX's Shakespeare" -- "$NPY" tests/data/check_shakespeare.py "$T/shakespeare.sqlite" "$T/sp.sqlite"
else
    echo "run_data: no python3 with numpy and msgpack; the Shakespeare stand-in's check skipped"
fi
expect 2 "shakespeare with --only-digits" -- "$BIN" data synthetic --kind shakespeare --only-digits -o "$T/x.sqlite" &&
    has "$T/err" "--kind shakespeare takes only --clients, --seed and -o" "shakespeare options"
expect 2 "preprocess without a kind" -- "$BIN" data preprocess && has "$T/err" "preprocess needs the dataset's kind" "preprocess kind"
expect 2 "preprocess another kind" -- "$BIN" data preprocess emnist "$T/emnist.sqlite" -o "$T/x.sqlite" &&
    has "$T/err" "the dataset's kind must be shakespeare or stackoverflow, found 'emnist'" "preprocess emnist"
expect 2 "preprocess without -o" -- "$BIN" data preprocess shakespeare "$T/shakespeare.sqlite"
expect 1 "preprocess a file without snippets" -- "$BIN" data preprocess shakespeare "$T/emnist.sqlite" -o "$T/x.sqlite" &&
    has "$T/err" "$T/emnist.sqlite, split 'default': needs a column 'snippets' of byte strings (u8[?])" "no snippets"
check "preprocess: nothing written on failure" -- test ! -e "$T/x.sqlite"
# FedAvg with the character LSTM learns on it: one role of 15 sequences, 4 rounds. The metrics are
# FedJAX's (the loss per non-PAD target, the accuracy over targets neither PAD nor EOS) of the
# training pass: round 1's are those of its SGD steps from the untrained model, whose loss is about
# ln 90 = 4.50 (90 labels), so a little below it (measured 4.30 -> 3.55, accuracy 0.066 at round 4;
# with the metrics of the untrained model before training, 4.50 -> 3.55)
expect 0 "synthetic shakespeare, one role" -- "$BIN" data synthetic --kind shakespeare --clients 1 --seed 1 -o "$T/one.sqlite"
expect 0 "preprocess one role" -- "$BIN" data preprocess shakespeare "$T/one.sqlite" -o "$T/one_p.sqlite"
expect 0 "fedavg_shakespeare: 4 rounds" -- "$BIN" run programs/fedavg_shakespeare.json --data "train=$T/one_p.sqlite" \
    --rounds 4 --metrics "$T/sh.jsonl"
check "fedavg_shakespeare learns (loss from below ln 90 to 0.75 under it, accuracy above 1/90 by 0.03)" -- awk -F'[:,]' '
    /"round": 1,/ { first = $5 + 0 } /"round": 4,/ { last = $5 + 0; acc = $7 + 0 }
    END { exit !(first > 4.0 && first < 4.55 && last < 4.50 - 0.75 && acc > 0.011 + 0.03) }' "$T/sh.jsonl"
# the model's loss and accuracy (PAD, and for accuracy EOS, left out as FedJAX does) against NumPy
# (tests/models/check_char_lstm.py calls the model's functions through tools/python over lib/libfedvm.so)
if [ -n "$NPY" ] && [ -e lib/libfedvm.so ]; then
    check "char_lstm's loss and accuracy against FedJAX's in NumPy" -- "$NPY" tests/models/check_char_lstm.py .
    # Haiku's truncated-normal initializers of char_lstm and so_nwp against the distribution's CDF
    check "the LSTM models' initializers are Haiku's" -- "$NPY" tests/models/check_init.py .
else
    echo "run_data: no python3 with numpy, or no lib/libfedvm.so; the character LSTM's check skipped"
fi

# -- info and head errors
expect 1 "info missing file" -- "$BIN" data info "$T/missing.sqlite" && has "$T/err" "$T/missing.sqlite: cannot open" "missing"
printf 'plain text, not a dataset\n%.0s' $(seq 200) >"$T/text.sqlite"
expect 1 "info not SQLite" -- "$BIN" data info "$T/text.sqlite" && has "$T/err" "not a SQLite database" "not sqlite"
"$PY" -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute("CREATE TABLE t (a)"); db.commit()' "$T/other.sqlite"
expect 1 "info not a dataset" -- "$BIN" data info "$T/other.sqlite" && has "$T/err" "not a federated dataset" "not a dataset"
expect 1 "head not a dataset" -- "$BIN" data head "$T/other.sqlite"
expect 2 "info without a file" -- "$BIN" data info
expect 2 "info two files" -- "$BIN" data info a b
expect 2 "head -n bad" -- "$BIN" data head "$T/leaf.sqlite" -n many
# a corrupt client: info lists, --verify fails naming it
cp "$T/leaf.sqlite" "$T/corrupt.sqlite"
"$PY" -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute("UPDATE federated_data SET data = substr(data, 1, 20) WHERE rowid = 4"); db.commit()' "$T/corrupt.sqlite"
expect 0 "info on a corrupt client" -- "$BIN" data info "$T/corrupt.sqlite"
expect 1 "verify a corrupt client" -- "$BIN" data info "$T/corrupt.sqlite" --verify &&
    has "$T/err" "client 'f_00003' (index 3): the zlib data is truncated" "verify names the client" &&
    has "$T/out" "verify: 1 of 30 clients failed" "verify count"
expect 1 "head a corrupt client" -- "$BIN" data head "$T/corrupt.sqlite" f_00003 && has "$T/err" "f_00003" "head corrupt"

# -- TFF files (the shared fixture)
TFF="$FIXTURES/tff_emnist_like.sqlite"
if [ -f "$TFF" ]; then
    expect 0 "info TFF" -- "$BIN" data info "$TFF" --verify && has "$T/out" "TFF SQLite, splits: test, train" "tff info" &&
        has "$T/out" "split train: 4 clients, 15 examples" "tff train" &&
        has "$T/out" "columns: label i64[?], pixels f32[?], tag u8[?]" "tff columns" &&
        has "$T/out" "sizes of the ? dims: label [1], pixels [784], tag [2..3]" "tff sizes seen"
    expect 1 "head TFF needs a split" -- "$BIN" data head "$TFF" && has "$T/err" "several splits (test, train); choose one" "tff split"
    expect 0 "head TFF" -- "$BIN" data head "$TFF" 0aaf1ea2745663a7:f4139_00 --split train -n 1 &&
        has "$T/out" '"label": [4]' "tff head label" && has "$T/out" '"tag": [119, 52]' "tff head tag"
fi

# -- hostile files (tests/hostile/make_dataset.py; what they must give when refused is in tests/hostile/data_*.case)
MK="$PY $(pwd)/tests/hostile/make_dataset.py"
# a user column named rowid (the same value in every row) made every client read the first row
$MK rowid_column "$T/rowid.sqlite"
expect 0 "rowid column: verify" -- "$BIN" data info "$T/rowid.sqlite" --verify && has "$T/out" "2 clients, 3 examples" "rowid info"
expect 0 "rowid column: head b" -- "$BIN" data head "$T/rowid.sqlite" b -n 5 &&
    has "$T/out" '"examples": 2' "rowid count" && has "$T/out" '"y": 2' "rowid b's first" && has "$T/out" '"y": 3' "rowid b's second"
$MK without_rowid "$T/norowid.sqlite"
expect 1 "WITHOUT ROWID" -- "$BIN" data info "$T/norowid.sqlite" && has "$T/err" "WITHOUT ROWID" "without rowid"
# rowids at the ends of int64, contiguous at the top
$MK extreme_rowids_contiguous "$T/top.sqlite"
expect 0 "rowids at the top" -- "$BIN" data head "$T/top.sqlite" b -n 5 && has "$T/out" '"index": 1' "top index" &&
    has "$T/out" '"y": 3' "top data"
# TFF: the first client empty, a length varying only in a later client
$MK tff_varlen_later "$T/varlen.sqlite"
expect 0 "varlen later" -- "$BIN" data info "$T/varlen.sqlite" --verify && has "$T/out" "columns: x f32[?], y i64[?]" "varlen cols" &&
    has "$T/out" "sizes of the ? dims: x [1..3], y [1]" "varlen sizes"
expect 0 "varlen head" -- "$BIN" data head "$T/varlen.sqlite" c && has "$T/out" '"x": [9.0, 10.0, 11.0]' "varlen values"
$MK tff_empty_first "$T/empty1.sqlite"
expect 0 "empty first client" -- "$BIN" data info "$T/empty1.sqlite" --verify && has "$T/out" "columns: x f32[?], y i64[?]" "empty1 cols"
expect 0 "empty first client: head" -- "$BIN" data head "$T/empty1.sqlite" a_empty && has "$T/out" '"head": []' "empty head"
$MK tff_all_empty "$T/allempty.sqlite"
expect 0 "no client with examples" -- "$BIN" data info "$T/allempty.sqlite" --verify && has "$T/out" "columns: (none)" "no cols"
# bound to a program: a field's known length is checked in each client; '?' takes them all
cat >"$T/xsum.json" <<'EOF'
{"fedvm": 1, "functions": {
  "x_of": {"params": {"e": "<x=f32[W]>"}, "body": [["x", "field", {"name": "x"}, "e"], ["s", "sum", "x"]], "result": "s"},
  "client_sum": {"params": {"xs": "<x=f32[W]>*"}, "body": [["v", "sequence_map", {"fn": "x_of"}, "xs"], ["s", "sequence_sum", "v"]], "result": "s"},
  "main": {"params": {"data": "{<x=f32[W]>*}@CLIENTS"}, "body": [["s", "federated_map", {"fn": "client_sum"}, "data"], ["t", "federated_sum", "s"]], "result": "t"}}}
EOF
sed 's/W/?/g' "$T/xsum.json" >"$T/xsumq.json"
sed 's/W/2/g' "$T/xsum.json" >"$T/xsum2.json"
expect 0 "bind varlen with ?" -- "$BIN" run "$T/xsumq.json" --data data="$T/varlen.sqlite" && has "$T/out" "66.0" "sum 1..11"
expect 1 "bind varlen with 2" -- "$BIN" run "$T/xsum2.json" --data data="$T/varlen.sqlite" &&
    has "$T/err" "client 'b' (index 1), example 0, column 'x': f32[1] per example, but field 'x' is f32[2]" "bind check"
expect 0 "bind empty first with 2" -- "$BIN" run "$T/xsum2.json" --data data="$T/empty1.sqlite" && has "$T/out" "21.0" "sum 1..6"
# names with control characters and quotes: read, escaped when printed
$MK control_names "$T/ctl.sqlite"
expect 0 "control names" -- "$BIN" data info "$T/ctl.sqlite" --verify && has "$T/out" "split 'tab\\tsplit':" "split escaped" &&
    has "$T/out" "columns: 'it\\'s' i64[?], 'new\\nline' i64[?]" "columns escaped"
if grep -q "$(printf '\033')" "$T/out" "$T/err"; then bad "an escape byte reached the terminal"; else ok; fi
# a WAL-mode file whose last client is only in its -wal file: read, not stale
mkdir "$T/wal" && (cd "$T/wal" && $MK wal d.sqlite)
expect 0 "WAL file" -- "$BIN" data info "$T/wal/d.sqlite" --verify && has "$T/out" "3 clients, 4 examples" "wal clients"
# an empty file, a directory
$MK empty "$T/empty.sqlite"
expect 1 "empty file" -- "$BIN" data info "$T/empty.sqlite" && has "$T/err" "the file is empty" "empty"
expect 1 "a directory" -- "$BIN" data head "$T/wal" && has "$T/err" "a directory, not a regular file" "directory"

# -- files FedJAX writes (EMNIST, Shakespeare and Stack Overflow shapes, byte-string columns)
mkdir -p "$T/compat"
check "FedJAX-written files" -- "$PY" tests/check_fedjax_compat.py --fedvm "$BIN" --dir "$T/compat"

echo "data: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
