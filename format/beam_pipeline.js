// ---- The driver and the pipeline: the same in every file 'fedplan --to beam' writes ---------------
// (fedvm's format/beam_pipeline.js, after a header that defines PLAN_TEXT).
//
// Each round: the driver has 'fedvm server PLAN prepare' select the round's clients and write the
// broadcast; the Beam pipeline creates the clients, groups them into the blocks of 16 consecutive
// clients of the round that fedvm's aggregation folds, runs 'fedvm device --partial' once per block
// (the clients' work and their partial aggregate), gathers the partials with a CombineFn, and runs
// 'fedvm server PLAN merge', which merges them pairwise in block order, reports and updates the
// state. Beam may process elements and merge accumulators in any order; fedvm's order is fixed by
// the block numbers, so the state and metrics are those of 'fedvm run' bit for bit.
//
// The functions given to Beam (blockOf, clientWork, gatherPartials, serverUpdate) are shipped to
// its workers as source text: they use only their arguments and require(), never this file's
// variables, and run fedvm through ctx.run (runFedvm).

const fs = require("fs");
const path = require("path");

const PLAN = JSON.parse(PLAN_TEXT);
const PROG = path.basename(process.argv[1] || "pipeline.js");

const USAGE = `usage: node ${PROG} --data [NAME=]FILE[:SPLIT]... --clients N [options]

Runs the rounds of '${PLAN.function}' of ${PLAN.source} as an Apache Beam pipeline (Beam's
TypeScript SDK, npm package apache-beam), with fedvm running every client's work and the server.

  --data [NAME=]FILE[:SPLIT]  the clients' data for the data input NAME (NAME= may be left out
                              when there is one): a FedJAX or TFF SQLite dataset, or a .json or
                              .yaml file with one member per client; repeat for several inputs
  --clients N                 the clients to select from (the data's)
  --clients-per-round K       clients a round, drawn as 'fedvm run' draws them (default: all N)
  --rounds R                  rounds to run (default 1)
  --seed S                    the run's seed (default 0)
  --init WEIGHTS              initial tensors of the state, as 'fedvm run --init'
  --fedvm PATH                the fedvm command (default: fedvm, found on PATH)
  --work-dir DIR              where the plan, states, broadcasts and partials go (default
                              fedvm-beam); workers must reach it, the data and fedvm by the
                              same paths
  --out STATE                 also write the final state (a safetensors checkpoint) to STATE
  --metrics FILE.jsonl        append each round's metrics line (with the number of clients)
  --runner NAME               Beam's runner: direct (default), flink, dataflow, universal
  --runner-option KEY=VALUE   an option for the runner (flinkMaster, project, region,
                              tempLocation, environmentType, ...); repeat for several
  --help                      show this help

Prints one line per round, {"round": R, "train": METRICS}, as 'fedvm run' does.
exit status: 0 success, 1 failed run, 2 usage error
`;

class UsageError extends Error {}

// The options that take a value.
const OPTIONS = ["--data", "--clients", "--clients-per-round", "--rounds", "--seed", "--init", "--fedvm", "--work-dir",
                 "--out", "--metrics", "--runner", "--runner-option"];

// A whole number from text (for an option), at least min.
function count(name, text, min) {
    if (!/^[0-9]+$/.test(text) || Number(text) < min || !Number.isSafeInteger(Number(text)))
        throw new UsageError(`${name} needs a whole number >= ${min}, found '${text}'`);
    return Number(text);
}

// The command line: --name VALUE or --name=VALUE.
function parseArgs(argv) {
    const o = {
        data: [], clients: null, perRound: null, rounds: 1, seed: "0", init: null, fedvm: "fedvm",
        workDir: "fedvm-beam", out: null, metrics: null, runner: "direct", runnerOptions: {}, help: false,
    };
    for (let i = 0; i < argv.length; i++) {
        const arg = argv[i];
        if (arg === "--help" || arg === "-h") {
            o.help = true;
            continue;
        }
        const eq = arg.indexOf("=");
        const name = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
        if (!OPTIONS.includes(name))
            throw new UsageError(arg.startsWith("-") ? `unknown option '${arg}'` : `unexpected '${arg}'`);
        let value;
        if (name !== arg)
            value = arg.slice(eq + 1);
        else if (i + 1 < argv.length)
            value = argv[++i];
        else
            throw new UsageError(`${name} needs a value`);
        if (value === "")
            throw new UsageError(`${name} needs a value`);
        switch (name) {
        case "--data": o.data.push(value); break;
        case "--clients": o.clients = count(name, value, 1); break;
        case "--clients-per-round": o.perRound = count(name, value, 1); break;
        case "--rounds": o.rounds = count(name, value, 1); break;
        case "--seed":
            if (!/^-?[0-9]+$/.test(value))
                throw new UsageError(`--seed needs an integer, found '${value}'`);
            o.seed = value;
            break;
        case "--init": o.init = value; break;
        case "--fedvm": o.fedvm = value; break;
        case "--work-dir": o.workDir = value; break;
        case "--out": o.out = value; break;
        case "--metrics": o.metrics = value; break;
        case "--runner": o.runner = value; break;
        case "--runner-option": {
            const k = value.indexOf("=");
            if (k <= 0)
                throw new UsageError(`--runner-option needs KEY=VALUE, found '${value}'`);
            o.runnerOptions[value.slice(0, k)] = value.slice(k + 1);
            break;
        }
        }
    }
    if (o.help)
        return o;
    if (!o.data.length)
        throw new UsageError("--data is required");
    if (o.clients === null)
        throw new UsageError("--clients N is required (the clients to select from)");
    if (o.perRound !== null && o.perRound > o.clients)
        throw new UsageError(`cannot select ${o.perRound} of ${o.clients} clients a round`);
    return o;
}

// Runs fedvm with args and gives its standard output; when it fails, an Error with the command
// and fedvm's own message. Runs on the driver and on Beam's workers (so it requires inside).
function runFedvm(fedvm, args) {
    const r = require("child_process").spawnSync(fedvm, args, { encoding: "utf8", maxBuffer: 1 << 30 });
    const command = [fedvm].concat(args).map((a) => (/^[\w.,:=/@+-]+$/.test(a) ? a : JSON.stringify(a))).join(" ");
    if (r.error)
        throw new Error(`cannot run ${command}: ${r.error.message}`);
    if (r.status !== 0)
        throw new Error(`${command} failed (${r.status === null ? "signal " + r.signal : "exit status " + r.status}):\n` +
                        r.stderr.trimEnd());
    return r.stdout;
}

// ---- The pipeline's functions (run on Beam's workers) -----------------------------------------------

// A client of the round, {client, position}, with the number of its block.
function blockOf(c, ctx) {
    return { block: Math.floor(c.position / ctx.block), client: c.client };
}

// One block's clients: their work and their partial aggregate, by one 'fedvm device' process.
function clientWork(group, ctx) {
    const fs = require("fs"), os = require("os"), path = require("path");
    const clients = Array.from(group.value, (c) => c.client).sort((a, b) => a - b);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "fedvm-beam-"));
    try {
        const out = path.join(tmp, "partial.safetensors");
        const args = ["device", ctx.plan, "--checkpoint", ctx.broadcast];
        for (const d of ctx.data)
            args.push("--data", d);
        for (const c of clients)
            args.push("--index", String(c));
        args.push("--partial", out);
        ctx.run(ctx.fedvm, args);
        return { block: group.key, partial: fs.readFileSync(out).toString("base64") };
    } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
    }
}

// The CombineFn: every block's partial, in block order (whatever order Beam gathers them in).
const gatherPartials = {
    createAccumulator: function () {
        return [];
    },
    addInput: function (acc, p) {
        acc.push(p);
        return acc;
    },
    mergeAccumulators: function (accs) {
        return [].concat(...Array.from(accs));
    },
    extractOutput: function (acc) {
        return acc.slice().sort((a, b) => a.block - b.block);
    },
};

// The server's part of the round: 'fedvm server merge' over the partials, the new state and the
// round's metrics line (left in the round's directory for the driver).
function serverUpdate(gathered, ctx) {
    const fs = require("fs"), path = require("path");
    const dir = path.join(ctx.roundDir, "partials");
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    for (const p of gathered.partials)
        fs.writeFileSync(path.join(dir, `block-${p.block}.safetensors`), Buffer.from(p.partial, "base64"));
    const args = ["server", ctx.plan, "merge", "--state", ctx.state, "--broadcast", ctx.broadcast, dir,
                  "--out", ctx.next];
    if (ctx.metrics)
        args.push("--metrics", ctx.metrics);
    fs.writeFileSync(path.join(ctx.roundDir, "metrics.json"), ctx.run(ctx.fedvm, args));
}

// ---- The driver -------------------------------------------------------------------------------------

async function main() {
    let o;
    try {
        o = parseArgs(process.argv.slice(2));
    } catch (e) {
        if (!(e instanceof UsageError))
            throw e;
        process.stderr.write(`${PROG}: ${e.message}\n${USAGE}`);
        return 2;
    }
    if (o.help) {
        process.stdout.write(USAGE);
        return 0;
    }
    let beam;
    try {
        beam = require("apache-beam");
    } catch (e) {
        process.stderr.write(`${PROG}: cannot load Beam's TypeScript SDK (${e.message.split("\n")[0]}); install it ` +
                             "with 'npm install apache-beam@2.49.0' here or set NODE_PATH to its node_modules\n");
        return 1;
    }
    console.debug = function () {}; // the SDK logs every bundle on standard output

    const work = path.resolve(o.workDir);
    fs.mkdirSync(work, { recursive: true });
    const plan = path.join(work, "plan.json");
    fs.writeFileSync(plan, PLAN_TEXT);
    const fedvm = o.fedvm.includes("/") ? path.resolve(o.fedvm) : o.fedvm;
    const state = (r) => path.join(work, `state-${r}.safetensors`);
    const init = ["server", plan, "init", "--seed", o.seed, "--out", state(0)];
    if (o.init)
        init.push("--init", o.init);
    runFedvm(fedvm, init);

    for (let r = 1; r <= o.rounds; r++) {
        const roundDir = path.join(work, `round-${r}`);
        fs.mkdirSync(roundDir, { recursive: true });
        fs.rmSync(path.join(roundDir, "metrics.json"), { force: true });
        const broadcast = path.join(roundDir, "broadcast.safetensors");
        const clients = runFedvm(fedvm, ["server", plan, "prepare", "--state", state(r - 1), "--clients",
                                         String(o.clients), "--clients-per-round", String(o.perRound || o.clients),
                                         "--out", broadcast]).trim().split("\n").map(Number);
        const ctx = {
            run: runFedvm, fedvm, plan, broadcast, data: o.data, roundDir, state: state(r - 1), next: state(r),
            metrics: o.metrics ? path.resolve(o.metrics) : null,
        };
        const options = Object.assign({}, o.runnerOptions, { runner: o.runner });
        await beam.createRunner(options).run(function round(root) {
            root.apply(beam.create(clients.map((client, position) => ({ client, position }))))
                .map(blockOf, { block: PLAN.server.partial.block })
                .apply(beam.groupBy("block"))
                .map(clientWork, ctx)
                .apply(beam.groupGlobally().combining((p) => p, gatherPartials, "partials"))
                .map(serverUpdate, ctx);
        });
        process.stdout.write(fs.readFileSync(path.join(roundDir, "metrics.json"), "utf8"));
    }
    if (o.out) {
        const tmp = `${o.out}.tmp-${process.pid}`;
        fs.copyFileSync(state(o.rounds), tmp);
        fs.renameSync(tmp, o.out);
    }
    return 0;
}

main().then((status) => {
    process.exitCode = status;
}, (e) => {
    process.stderr.write(`${PROG}: ${e && e.message ? e.message : e}\n`);
    process.exitCode = 1;
});
