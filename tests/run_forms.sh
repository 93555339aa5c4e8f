#!/usr/bin/env bash
# run_forms.sh BINDIR - the round forms (fedplan --to mapreduce / distribute-aggregate) proven by running them:
# for every golden case (tests/golden/*.json: a program, its arguments, rounds) the form of its
# program gives byte-identical output under `fedvm run`; FedAvg trained through each form (clients
# sampled, several rounds) ends with the same checkpointed weights, bit for bit; the forms obey
# their rules (parts are local functions / each at one placement, the rewritten round uses only
# intrinsics); programs that keep a state on each client (SCAFFOLD, FedDyn) train through both forms to
# the same checkpoint and clients' states; programs without a round form are refused with the exact
# located message; names that would break a careless writer round-trip.
set -u
BINDIR=${1:?usage: tests/run_forms.sh BINDIR}
FEDVM=$BINDIR/fedvm PLAN=$BINDIR/fedplan
PY=${PYTHON:-python3}
. "$(dirname "$0")/lib.sh"
FORMS="mapreduce distribute-aggregate"

# args_of CASE: the case's arguments as fedvm run options (one per line), and --rounds.
args_of() {
    "$PY" - "$1" <<'EOF'
import json, sys
case = json.load(open(sys.argv[1]))
for name, value in case.get("args", {}).items():
    print("--arg")
    print("%s=%s" % (name, value if isinstance(value, str) else json.dumps(value)))
if "rounds" in case:
    print("--rounds")
    print(case["rounds"])
if "fn" in case:
    print("--fn")
    print(case["fn"])
EOF
}

# -- 1. every golden case: the program and its forms print the same bytes
for case in tests/golden/*.json; do
    name=$(basename "$case" .json)
    prog=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["program"])' "$case")
    mapfile -t args < <(args_of "$case")
    # programs whose round needs two exchanges, and those with no federated function (section 4)
    case $prog in *drjax_mean_loss.json | *fedsgd_logistic.json | *shuffle_repeat.json | *tensor_sums.json) continue ;; esac
    expect 0 "$name: fedvm run" -- "$FEDVM" run "$prog" "${args[@]}" || continue
    cp "$T/out" "$T/want"
    for f in $FORMS; do
        form="$T/$name.$f.json" # forms are whole programs (includes inlined): they run from anywhere
        expect 0 "$name: fedplan --to $f" -- "$PLAN" "$prog" --to "$f" -o "$form" || continue
        expect 0 "$name: fedvm check $f" -- "$FEDVM" check "$form"
        expect 0 "$name: fedvm run $f" -- "$FEDVM" run "$form" "${args[@]}" && same "$T/want" "$T/out" "$name: $f"
    done
done

# -- 1b. programs that keep a state on each client, through both forms: the client's state is an input of
# work (client_work) and its new state the field client_state of its result, which the rewritten round
# returns as next's third field. SCAFFOLD and FedDyn (4 rounds of 5 of 30 clients) and
# tests/client_state/counter.json (8 rounds of 7 of 40, no data) end with the metrics, the checkpoint and
# every client's state of fedvm run, bit for bit
D=$T/synthetic.sqlite
"$FEDVM" data synthetic --kind fedprox --alpha 1 --beta 1 --seed 5 -o "$D" >/dev/null 2>&1 || bad "synthetic data"
states() { # states STORE: every client's latest state in a client_states.sqlite, one line each
    "$PY" - "$1" <<'EOF'
import hashlib, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for c, r, s in db.execute("SELECT client, round, state FROM client_state AS a WHERE round = "
                          "(SELECT max(round) FROM client_state AS b WHERE b.client = a.client) ORDER BY client"):
    print(c, r, hashlib.sha256(s).hexdigest())
EOF
}
for prog in programs/scaffold.json programs/feddyn.json tests/client_state/counter.json; do
    name=$(basename "$prog" .json)
    case $name in
    counter) TRAIN=(--clients 40 --clients-per-round 7 --rounds 8 --seed 3) last=000008 ;;
    *) TRAIN=(--data "train=$D" --rounds 4 --clients-per-round 5 --seed 3) last=000004 ;;
    esac
    expect 0 "$name: train" -- "$FEDVM" run "$prog" "${TRAIN[@]}" --checkpoint-dir "$T/$name.cs" || continue
    cp "$T/out" "$T/$name.cs.metrics"
    states "$T/$name.cs/client_states.sqlite" >"$T/$name.cs.states"
    for f in $FORMS; do
        form="$T/$name.$f.json"
        expect 0 "$name: fedplan --to $f" -- "$PLAN" "$prog" --to "$f" -o "$form" || continue
        has "$form" '"client_state": {' "$name: the $f form says where the clients' states are"
        expect 0 "$name: train through $f" -- "$FEDVM" run "$form" "${TRAIN[@]}" --checkpoint-dir "$T/$name.$f.cs" &&
            same "$T/$name.cs.metrics" "$T/out" "$name: $f metrics"
        same_state "$T/$name.cs/round-$last.safetensors" "$T/$name.$f.cs/round-$last.safetensors" "$name: $f final state"
        states "$T/$name.$f.cs/client_states.sqlite" >"$T/$name.$f.states"
        same "$T/$name.cs.states" "$T/$name.$f.states" "$name: $f clients' states"
    done
done

# -- 2. the rules of each form, read from the documents
check "form rules" -- "$PY" - "$T" <<'EOF'
import glob, json, sys
SECURE = {"federated_secure_sum_bitwidth": "bitwidth", "federated_secure_modular_sum": "modulus",
          "federated_secure_sum": "max_input"}
INTRINSIC = {"federated_value", "federated_eval", "federated_broadcast", "federated_map", "federated_map_all_equal",
             "federated_apply", "federated_zip", "federated_sum", "federated_mean", "federated_weighted_mean",
             "federated_min", "federated_max", "federated_aggregate"} | set(SECURE)
AGG = {"federated_sum", "federated_mean", "federated_weighted_mean", "federated_min", "federated_max",
       "federated_aggregate"} | set(SECURE)
PLUMBING = {"struct", "field"}
n = 0
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    doc = json.load(open(path))
    form = doc.get("form")
    if not form:
        continue
    fns = doc["functions"]
    parts = form["parts"]
    entry = fns[form["function"]]
    ops = {i[1] for i in entry["body"]}
    def fail(msg):
        sys.exit("%s: %s" % (path, msg))
    if form["kind"] == "mapreduce":
        assert set(parts) == {"prepare", "work", "zero", "accumulate", "merge", "report", "update"}, parts
        for role, fn in parts.items():
            for ins in fns[fn]["body"]:
                if ins[1] in INTRINSIC:
                    fail("%s (%s) is not local: %s" % (role, fn, ins))
            for t in fns[fn]["params"].values():
                if "@" in t:
                    fail("%s takes a placed value: %s" % (role, t))
        if not ops <= INTRINSIC | PLUMBING | {"call"}:
            fail("the rewritten round uses %s" % (ops - INTRINSIC - PLUMBING - {"call"}))
        calls = [i for i in entry["body"] if i[1] == "call"]
        if [c[2]["fn"] for c in calls] != [parts["zero"]]:
            fail("the round calls %s" % calls)
        agg = [i for i in entry["body"] if i[1] == "federated_aggregate"]
        if len(agg) != 1 or agg[0][2] != {"accumulate": parts["accumulate"], "merge": parts["merge"], "report": parts["report"]}:
            fail("one federated_aggregate with accumulate, merge and report expected: %s" % agg)
        if "client_state" in form:  # the new states stay at the clients: never aggregated, never in update
            if any(i[1] in AGG and "@client_states" in i[3:] for i in entry["body"]):
                fail("the clients' states are aggregated")
            if any("client_state" in t for t in fns[parts["update"]]["params"].values()):
                fail("update takes the clients' states")
        secure = [(i[1], i[2].get(SECURE[i[1]])) for i in entry["body"] if i[1] in SECURE]
        if secure != [(s["op"], s.get(SECURE[s["op"]])) for s in form["secure_sums"]]:
            fail("secure sums differ from the form's list")
    else:
        assert list(parts) == ["server_prepare", "server_to_client_broadcast", "client_work",
                               "client_to_server_aggregation", "server_result"], parts
        bc = {i[1] for i in fns[parts["server_to_client_broadcast"]]["body"]}
        if not bc <= {"federated_broadcast", "federated_value"} | PLUMBING:
            fail("the broadcast stage computes: %s" % bc)
        ag = {i[1] for i in fns[parts["client_to_server_aggregation"]]["body"]}
        if not ag <= AGG | PLUMBING:
            fail("the aggregation stage computes: %s" % ag)
        for role in ("server_prepare", "server_result"):
            for t in fns[parts[role]]["params"].values():
                if "CLIENTS" in t:
                    fail("%s takes a value at the clients: %s" % (role, t))
        for ins in fns[parts["client_work"]]["body"]:
            if ins[1] in INTRINSIC - {"federated_map", "federated_map_all_equal", "federated_zip", "federated_eval"}:
                fail("client_work runs %s" % ins)
        # (with client state, the round takes client_work's new states apart and returns them third)
        if ops != {"call", "field"} | ({"struct"} if "client_state" in form else set()):
            fail("the rewritten round is not the five calls: %s" % ops)
        if "client_state" in form:
            for t in fns[parts["client_to_server_aggregation"]]["params"].values():
                if "client_state" in t:
                    fail("the clients' states reach the aggregation: %s" % t)
    n += 1
if n < 10:
    sys.exit("only %d forms checked" % n)
print(n, "forms")
EOF

# -- 3. training through the forms: FedAvg, FedAdam and federated_select's class centroids on
# Synthetic(1,1), 5 of 30 clients a round, 4 rounds
for prog in programs/fedavg.json programs/fedadam.json programs/federated_select.json; do
    name=$(basename "$prog" .json)
    TRAIN=(--data "train=$D" --rounds 4 --clients-per-round 5 --seed 3)
    grep -q '"evaluate"' "$prog" && TRAIN+=(--data "test=$D:test" --eval-every 2)
    expect 0 "$name: train" -- "$FEDVM" run "$prog" "${TRAIN[@]}" --checkpoint-dir "$T/$name.ckpt" || continue
    cp "$T/out" "$T/$name.metrics"
    for f in $FORMS; do
        form="$T/$name.$f.json"
        expect 0 "$name: fedplan --to $f" -- "$PLAN" "$prog" --to "$f" -o "$form" || continue
        expect 0 "$name: train through $f" -- "$FEDVM" run "$form" "${TRAIN[@]}" --checkpoint-dir "$T/$name.$f.ckpt" &&
            same "$T/$name.metrics" "$T/out" "$name: $f metrics"
        same_state "$T/$name.ckpt/round-000004.safetensors" "$T/$name.$f.ckpt/round-000004.safetensors" \
            "$name: $f final weights"
    done
done

# -- 4. refused, with the place and the reason
refused() { # refused PROGRAM MESSAGE: every form refuses it with exactly this message (exit 1)
    for f in $FORMS; do
        expect 1 "$1 --to $f" -- "$PLAN" "$1" --to "$f" && has "$T/err" "$2" "$1 --to $f"
        check "$1 --to $f: nothing written" -- test ! -s "$T/out"
    done
}
refused tests/forms/two_exchanges.json "tests/forms/two_exchanges.json:14:9: /functions/main/body/1: 'mean_at_clients' (federated_broadcast) sends a value to the clients that depends on the aggregation 'mean' (federated_mean at tests/forms/two_exchanges.json:13:9, /functions/main/body/0): a round has one exchange (broadcast, client work, aggregation), and this is a second one; write each exchange as its own function (its own round)"
refused tests/forms/result_at_clients.json "tests/forms/result_at_clients.json:9:17: /functions/main/result: the result of 'main' holds 'y', a value at the clients; a round's results are at the server (aggregate it first)"
refused tests/forms/no_aggregation.json "tests/forms/no_aggregation.json:6:13: /functions/main: 'main' aggregates nothing from the clients, so it has no round to put in a form"
# derivatives of federated functions are inlined; these two need a second exchange (the backward pass
# broadcasts a cotangent computed from the forward aggregate: 1/n of the mean), so both are refused
refused programs/drjax_mean_loss.json "programs/drjax_mean_loss.json:20:9: /functions/loss/body/2: 'value_grad/d.mean_loss#4' (federated_broadcast) sends a value to the clients that depends on the aggregation 'value_grad/d.mean_loss#2' (federated_sum at programs/drjax_mean_loss.json:20:9, /functions/loss/body/2): a round has one exchange"
refused programs/fedsgd_logistic.json "programs/fedsgd_logistic.json:66:9: /functions/loss/body/2: 'value_grad/d.total' (federated_broadcast) sends a value to the clients that depends on the aggregation 'value_grad/total' (federated_sum at programs/fedsgd_logistic.json:66:9, /functions/loss/body/2): a round has one exchange"
refused tests/golden/programs/shuffle_repeat.json "tests/golden/programs/shuffle_repeat.json:5:13: /functions/main: 'main' is not a federated function (it places no value and calls no intrinsic), so it has no round to put in a form; name a federated one with --fn"
# a form whose aggregation cannot start from zeros (a '?' dimension) says so
refused_mr_only() {
    expect 1 "$1 --to mapreduce" -- "$PLAN" "$1" --to mapreduce && has "$T/err" "$2" "$1 --to mapreduce"
    expect 0 "$1 --to distribute-aggregate" -- "$PLAN" "$1" --to distribute-aggregate
}
cat >"$T/unknown_dim.json" <<'EOF'
{"fedvm": 1, "functions": {"main": {"params": {"x": "{f32[?]}@CLIENTS"},
  "body": [["s", "federated_sum", "x"]], "result": "s"}}}
EOF
refused_mr_only "$T/unknown_dim.json" "an aggregation over f32[?] needs an accumulator that starts from zeros, and this type has an unknown dimension ('?'); give the aggregated values fixed shapes"

# -- 5. a derivative inlined: FedSGD through value_and_grad of a summed loss (one exchange); by hand:
# w = [0.5, -1], clients x = [1,2], [3,-4], [-7,6], [0.25,0.5]: losses (w.x - 1)^2 = 6.25, 20.25,
# 110.25, 1.890625, sum 138.640625; gradient sum 2(w.x - 1)x = [168.3125, -173.375]
GA=(--arg 'w=[0.5,-1]' --arg 'x=[[1,2],[3,-4],[-7,6],[0.25,0.5]]')
expect 0 "grad_of_sum: run" -- "$FEDVM" run tests/forms/grad_of_sum.json "${GA[@]}" && cp "$T/out" "$T/grad.want"
has "$T/grad.want" '"loss": 138.64062' "grad_of_sum: loss by hand"
has "$T/grad.want" '"grad": [168.3125, -173.375]' "grad_of_sum: gradient by hand"
for f in $FORMS; do
    expect 0 "grad_of_sum: --to $f" -- "$PLAN" tests/forms/grad_of_sum.json --to "$f" -o "$T/grad.$f.json" &&
        expect 0 "grad_of_sum: run $f" -- "$FEDVM" run "$T/grad.$f.json" "${GA[@]}" &&
        same "$T/grad.want" "$T/out" "grad_of_sum: $f"
done

# -- 6. names with quotes, backslashes, backticks and \${...} survive both forms
for f in $FORMS; do
    expect 0 "quotes: --to $f" -- "$PLAN" tests/forms/quotes.json --to "$f" -o "$T/quotes.$f.json" &&
        expect 0 "quotes: run $f" -- "$FEDVM" run "$T/quotes.$f.json" --arg 'x\n=[1,-2,3,0.5]' &&
        has "$T/out" '"mean": 3.5625' "quotes: $f mean" && has "$T/out" '"lo": 0.25' "quotes: $f min"
done

echo "run_forms: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
