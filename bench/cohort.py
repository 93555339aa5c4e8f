#!/usr/bin/env python3
"""Cohorts: one round's time and peak memory against its number of clients (make bench-cohort).

  1. FedSGD (programs/fedsgd.json, softmax regression, 60 features, 10 classes) over 1,000 to
     1,000,000 clients of a LEAF synthetic file of 1,000,000 clients of 1 or 2 examples;
  2. FedAvg of the 2NN (programs/fedavg_2nn.json, 784-200-200-10, E = 1, B = 10) over 100 to
     10,000 clients sampled from Fashion-MNIST cut into 20,000 IID clients of 3 images.

Each count runs one round (--clients-per-round K, --rounds 1) twice: on seq (one process, one
thread: the round's wall and CPU seconds from the metrics line, and the process's peak resident
memory) and on mpi with 2 ranks under mpirun (each rank's peak). The goals: memory flat (the peak
at the largest count at most 16 MB above the peak at a tenth of it, and under 256 MB a rank) and
time linear (the CPU seconds per client at the largest count at most 1.25 times those at a tenth
of it). The data is made once into build/bench (about 650 MB, minutes).
Prints a Markdown report, writes it to build/bench/cohort.md, and with --doc FILE puts it
between FILE's cohort markers.

--check DIR is the same measurement at sizes for CI (tests/run_cohort.sh, in make test): its
data made in DIR, FedSGD over 1,000 to 100,000 of 110,000 clients and the 2NN over 300 and 3,000,
and a FedSGD that holds every client's gradient (a round that does not stream), which must fail
the memory goal; it exits non-zero when a goal is not met (CHECK_GOALS says why these).
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, "build", "bench")
FEDVM = os.path.join(ROOT, "bin", "fedvm")
MARK_BEGIN, MARK_END = "<!-- cohort:begin -->", "<!-- cohort:end -->"
MPI_ENV = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,vader,tcp", "OMPI_MCA_btl_tcp_if_include": "lo",
           "OMPI_MCA_oob_tcp_if_include": "lo", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
           "OMPI_MCA_osc": "^ucx", "OMPI_MCA_btl_base_warn_component_unused": "0"}


class Setup:
    """Where the data goes, what sizes run, and the goals: the benchmark's (make bench-cohort)."""
    leaf_clients, fm_clients = 1000000, 20000
    fedsgd, fedavg = (1000, 10000, 100000, 1000000), (100, 1000, 10000)
    limit_mb, flat_mb, linear = 256, 16, 1.25

    def __init__(self, data_dir):
        self.leaf = os.path.join(data_dir, "leaf_%d_1-2.sqlite" % self.leaf_clients)  # the name says how it was made
        self.fm = os.path.join(data_dir, "fashion_mnist_%d.sqlite" % self.fm_clients)

    def data(self):
        """(path, fedvm arguments that make it), for each file."""
        return ((self.leaf, ["data", "synthetic", "--kind", "leaf", "--clients", str(self.leaf_clients),
                             "--min-examples", "1", "--max-examples", "2", "--test-fraction", "0", "--seed", "0",
                             "-o", self.leaf]),
                (self.fm, ["data", "import", "fashion-mnist", "--clients", str(self.fm_clients), "--seed", "0",
                           "-o", self.fm]))


# The goals of the check, for CI (make test; tests/run_cohort.sh), where the machine is shared and
# loaded and the sizes small:
# - memory under 256 MB a rank, and at most 16 MB more at the largest count than at a tenth of it:
#   what grows with the clients is a few bytes a client (the round's sample and its metrics line's
#   client list, about 70 bytes: 6 MB at 100,000), while a round that holds a value per client
#   grows by that value's size per client (FedSGD's gradient, 2.4 KB: 220 MB from 10,000 to
#   100,000; the held variant below, about 40 MB from 1,000 to 10,000). FedSGD's peak grows about
#   7 MB from 10,000 to 100,000, the 2NN's ranks about 9 MB from 300 to 3,000 (the merge tree a few
#   0.8 MB partials deeper, Open MPI's buffers; a 2NN update held per client would be 2 GB), and
#   peaks measured once vary by a MB or two (the allocator, SQLite's page cache);
# - time: the CPU seconds of seq's round (its own process's CPU clock, so not its wait for a
#   loaded machine's cores) per client at the largest count at most 3 times those at a tenth of it.
#   A fixed cost per round makes the small count's figure the larger (the ratio is about 0.6-0.9 on
#   an idle machine); 3x leaves room for what load still adds to CPU time (caches and a core's other
#   hyperthread shared with other jobs, up to about 1.5x) while anything quadratic in the clients
#   (10x from a tenth) fails. The mpi ranks' times are shown, not judged: a rank waiting for the
#   other spins in Open MPI's progress loop, so its CPU time measures the other rank's delays.
class CheckSetup(Setup):
    leaf_clients, fm_clients = 110000, 20000
    fedsgd, fedavg = (1000, 10000, 100000), (300, 3000)
    held = (1000, 10000)  # the variant that holds every client's gradient
    limit_mb, flat_mb, linear = 256, 16, 3.0


def say(text):
    print(text, file=sys.stderr, flush=True)


def run(cmd, what, env=None):
    """Runs cmd; returns its peak resident memory in MB (the process and its children: wait4)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.stderr.write(err.decode(errors="replace"))
        sys.exit("cohort: %s failed (exit %d): %s" % (what, p.returncode, shlex.join(cmd)))
    return usage.ru_maxrss / 1024


def peak_of_rank(prefix, cmd):
    """--peak PREFIX CMD...: what each rank runs under mpirun: CMD, its exit status passed on, its
    peak resident memory in KB written to PREFIX.RANK."""
    p = subprocess.Popen(cmd)
    _, status, usage = os.wait4(p.pid, 0)
    with open("%s.%s" % (prefix, os.environ.get("OMPI_COMM_WORLD_RANK", "0")), "w") as f:
        f.write("%d\n" % usage.ru_maxrss)
    return os.waitstatus_to_exitcode(status)


def make_data(fedvm, setup):
    for path, args in setup.data():
        if not os.path.exists(path):
            say("== making %s" % path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            run([fedvm] + args, "making " + path)


def one(fedvm, program, data, k, tmp, mpirun, extra=()):
    """One round over k clients on seq and (with an mpirun command line) on 2 ranks: a row of the report."""
    base = [fedvm, "run", program, "--data", "train=" + data, "--rounds", "1",
            "--clients-per-round", str(k), "--seed", "0"] + list(extra)
    metrics = os.path.join(tmp, "m.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    peak = run(base + ["--backend", "seq", "--metrics", metrics], "%s over %d clients on seq" % (program, k))
    with open(metrics) as f:
        line = [json.loads(x) for x in f if '"round"' in x][-1]
    ranks = None
    if mpirun:
        peaks = os.path.join(tmp, "peak")
        run(mpirun + ["-np", "2", sys.executable, os.path.abspath(__file__), "--peak", peaks, "--"] + base +
            ["--backend", "mpi"], "%s over %d clients on 2 ranks" % (program, k), dict(os.environ, **MPI_ENV))
        ranks = []
        for r in (0, 1):
            with open("%s.%d" % (peaks, r)) as f:
                ranks.append(int(f.read()) / 1024)
    return {"clients": k, "examples": line["train"]["examples"], "round_s": line["seconds"],
            "cpu_s": line["cpu_seconds"], "peak_mb": peak, "rank_mb": ranks,
            "cmd": shlex.join(base).replace(ROOT + "/", "")}


def goals(rows, setup):
    """The largest count against a tenth of it: peak, growth, CPU time per client's ratio, verdicts."""
    last = rows[-1]
    tenth = [r for r in rows if r["clients"] * 10 == last["clients"]][0]
    most = lambda r: max([r["peak_mb"]] + (r["rank_mb"] or []))
    top, flat = most(last), max(last["peak_mb"] - tenth["peak_mb"],
                                max(last["rank_mb"]) - max(tenth["rank_mb"]) if last["rank_mb"] else 0)
    ratio = (last["cpu_s"] / last["clients"]) / (tenth["cpu_s"] / tenth["clients"])
    return {"last": last, "tenth": tenth, "top": top, "flat": flat, "ratio": ratio,
            "memory": flat <= setup.flat_mb and top < setup.limit_mb, "time": ratio <= setup.linear}


def table(title, rows, setup):
    out = ["### " + title, "",
           "| clients | examples | round s | CPU s | CPU µs a client | peak MB (seq) | peak MB of ranks 0, 1 (mpi) |",
           "|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append("| %d | %d | %.3f | %.3f | %.1f | %.1f | %s |" % (
            r["clients"], r["examples"], r["round_s"], r["cpu_s"], 1e6 * r["cpu_s"] / r["clients"], r["peak_mb"],
            "%.1f, %.1f" % tuple(r["rank_mb"]) if r["rank_mb"] else "-"))
    g = goals(rows, setup)
    verdict = lambda ok: "met" if ok else "**not met**"
    out += ["", "- memory: %.1f MB at %d clients, %+.1f MB from %d clients (goal: flat, at most %d MB more, "
            "under %d MB a rank): %s" % (g["top"], g["last"]["clients"], g["flat"], g["tenth"]["clients"],
                                          setup.flat_mb, setup.limit_mb, verdict(g["memory"])),
            "- time: CPU per client at %d clients %.2f times that at %d (goal: linear, at most %.2f): %s" % (
                g["last"]["clients"], g["ratio"], g["tenth"]["clients"], setup.linear, verdict(g["time"])),
            "", "```"] + [r["cmd"] + (" --backend seq|mpi" if r["rank_mb"] else " --backend seq") for r in rows] + \
        ["```", ""]
    return out


def rel(path):
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def report(sgd, avg, when, load, setup, how="`make bench-cohort`"):
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"^Model name:\s*(.+)$", lscpu, re.M)
    head = ["Measured %s on %s (%d cores, load average %.1f at the end), %s." % (
        when, m.group(1).strip() if m else platform.processor(), os.cpu_count(), load, how), ""]
    return head + table("FedSGD over up to %d clients (%s)" % (sgd[-1]["clients"], rel(setup.leaf)),
                        sgd, setup) + \
        table("FedAvg of the 2NN over up to %d clients (%s)" % (avg[-1]["clients"], rel(setup.fm)),
              avg, setup)


def measure(fedvm, setup, tmp, mpirun):
    saved = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             "fedsgd": [], "fedavg_2nn": []}
    for k in setup.fedsgd:
        say("== fedsgd, %d clients" % k)
        saved["fedsgd"].append(one(fedvm, os.path.join(ROOT, "programs", "fedsgd.json"), setup.leaf, k, tmp, mpirun))
    for k in setup.fedavg:
        say("== fedavg_2nn, %d clients" % k)
        saved["fedavg_2nn"].append(one(fedvm, os.path.join(ROOT, "programs", "fedavg_2nn.json"), setup.fm, k, tmp,
                                       mpirun))
    saved["load"] = os.getloadavg()[0]
    return saved


def held_variant(path):
    """programs/fedsgd.json with its clients' gradients handed to a call, which holds them all (a round
    that does not stream), written to path (run with -I programs)."""
    with open(os.path.join(ROOT, "programs", "fedsgd.json")) as f:
        prog = json.load(f)
    fns = prog["functions"]
    fns["held_mean"] = {"params": {"grads": "{SoftmaxRegression}@CLIENTS", "weights": "{f32[]}@CLIENTS"},
                        "body": [["mean", "federated_weighted_mean", "grads", "weights"]], "result": "mean"}
    body = fns["next"]["body"]
    at = [i for i, ins in enumerate(body) if ins[0] == "grad" and ins[1] == "federated_weighted_mean"]
    assert len(at) == 1, "programs/fedsgd.json's next no longer takes its gradient with one federated_weighted_mean"
    body[at[0]] = ["grad", "call", {"fn": "held_mean"}, "grads", "weights"]
    with open(path, "w") as f:
        json.dump(prog, f)


def check(fedvm, data_dir, mpirun):
    """The CI check: prints the report; returns the goals not met (and the held variant met)."""
    setup = CheckSetup(data_dir)
    make_data(fedvm, setup)
    saved = measure(fedvm, setup, data_dir, mpirun)
    print("\n".join(report(saved["fedsgd"], saved["fedavg_2nn"], saved["when"], saved["load"], setup,
                           "tests/run_cohort.sh")))
    failed = []
    for name, rows in (("FedSGD", saved["fedsgd"]), ("FedAvg 2NN", saved["fedavg_2nn"])):
        g = goals(rows, setup)
        failed += ["%s: %s not met" % (name, goal) for goal in ("memory", "time") if not g[goal]]
    held = os.path.join(data_dir, "fedsgd_held.json")
    held_variant(held)
    say("== fedsgd holding every gradient, %d and %d clients (seq)" % setup.held)
    rows = [one(fedvm, held, setup.leaf, k, data_dir, None, ["-I", os.path.join(ROOT, "programs")])
            for k in setup.held]
    g = goals(rows, setup)
    print("- a FedSGD that holds every client's gradient: %+.1f MB from %d to %d clients: memory goal %s" % (
        g["flat"], setup.held[0], setup.held[1], "met (**the check cannot see it**)" if g["memory"] else "not met"))
    if g["memory"]:
        failed.append("the memory goal does not catch a round that holds every client's gradient")
    return failed


def main():
    if len(sys.argv) > 3 and sys.argv[1] == "--peak" and sys.argv[3] == "--":
        sys.exit(peak_of_rank(sys.argv[2], sys.argv[4:]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", metavar="FILE", help="put the report between FILE's cohort markers")
    ap.add_argument("--out", default=os.path.join(BUILD, "cohort.md"))
    ap.add_argument("--report", metavar="JSON", help="no runs: the report of the measurements saved in JSON")
    ap.add_argument("--check", metavar="DIR", help="the check of make test, its data made in DIR")
    ap.add_argument("--fedvm", default=FEDVM, help="the fedvm command (default: bin/fedvm)")
    ap.add_argument("--mpirun", default="mpirun --oversubscribe" + (" --allow-run-as-root" if os.getuid() == 0 else ""),
                    help="the mpirun command line, '' for seq alone")
    args = ap.parse_args()
    mpirun = shlex.split(args.mpirun)
    fedvm = os.path.abspath(args.fedvm)
    if args.check:
        failed = check(fedvm, os.path.abspath(args.check), mpirun)
        for f in failed:
            print("FAIL: cohort: " + f)
        sys.exit(1 if failed else 0)
    setup = Setup(BUILD)
    if args.report:
        with open(args.report) as f:
            saved = json.load(f)
    else:
        make_data(fedvm, setup)
        with tempfile.TemporaryDirectory() as tmp:
            saved = measure(fedvm, setup, tmp, mpirun)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:  # the measurements, for --report
            json.dump(saved, f, indent=1)
    text = "\n".join(report(saved["fedsgd"], saved["fedavg_2nn"], saved["when"], saved["load"], setup))
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    if args.doc:
        with open(args.doc) as f:
            doc = f.read()
        a, b = doc.index(MARK_BEGIN) + len(MARK_BEGIN), doc.index(MARK_END)
        with open(args.doc, "w") as f:
            f.write(doc[:a] + "\n" + text + "\n" + doc[b:])


if __name__ == "__main__":
    main()
