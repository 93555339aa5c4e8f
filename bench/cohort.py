#!/usr/bin/env python3
"""Cohorts: one round's time and peak memory against its number of clients (make bench-cohort).

  1. FedSGD (programs/fedsgd.json, softmax regression, 60 features, 10 classes) over 1,000 to
     1,000,000 clients of a LEAF synthetic file of 1,000,000 clients of 1 or 2 examples;
  2. FedAvg of the 2NN (programs/fedavg_2nn.json, 784-200-200-10, E = 1, B = 10) over 100 to
     10,000 clients sampled from Fashion-MNIST cut into 20,000 IID clients of 3 images.

Each count runs one round (--clients-per-round K, --rounds 1) twice: on seq (one process, one
thread: the round's wall and CPU seconds from the metrics line, and the process's peak resident
memory) and on mpi with 2 ranks under mpirun (each rank's peak, GNU time's %M). The goals:
memory flat (the peak at the largest count at most 16 MB above the peak at a tenth of it, and
under 256 MB a rank) and time linear (the CPU seconds per client at the largest count at most 1.25 times
those at a tenth of it). The data is made once into build/bench (about 650 MB, minutes).
Prints a Markdown report, writes it to build/bench/cohort.md, and with --doc FILE puts it
between FILE's cohort markers.
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
LEAF = os.path.join(BUILD, "leaf_1000000_1-2.sqlite")  # the name says how it was made: LEAF_CMD
LEAF_CMD = ["data", "synthetic", "--kind", "leaf", "--clients", "1000000", "--min-examples", "1",
            "--max-examples", "2", "--test-fraction", "0", "--seed", "0", "-o", LEAF]
FM = os.path.join(BUILD, "fashion_mnist_20000.sqlite")
FM_CMD = ["data", "import", "fashion-mnist", "--clients", "20000", "--seed", "0", "-o", FM]
FEDSGD = (1000, 10000, 100000, 1000000)
FEDAVG = (100, 1000, 10000)
MARK_BEGIN, MARK_END = "<!-- cohort:begin -->", "<!-- cohort:end -->"
MPI_ENV = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,vader,tcp", "OMPI_MCA_btl_tcp_if_include": "lo",
           "OMPI_MCA_oob_tcp_if_include": "lo", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
           "OMPI_MCA_osc": "^ucx", "OMPI_MCA_btl_base_warn_component_unused": "0"}
LIMIT_MB, FLAT_MB, LINEAR = 256, 16, 1.25


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


def make_data():
    for path, cmd in ((LEAF, LEAF_CMD), (FM, FM_CMD)):
        if not os.path.exists(path):
            say("== making %s" % path)
            os.makedirs(BUILD, exist_ok=True)
            run([FEDVM] + cmd, "making " + path)


def one(program, data, k, tmp):
    """One round over k clients on seq and on 2 ranks: a row of the report."""
    base = [FEDVM, "run", os.path.join(ROOT, "programs", program), "--data", "train=" + data, "--rounds", "1",
            "--clients-per-round", str(k), "--seed", "0"]
    metrics = os.path.join(tmp, "m.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    peak = run(base + ["--backend", "seq", "--metrics", metrics], "%s over %d clients on seq" % (program, k))
    with open(metrics) as f:
        line = [json.loads(x) for x in f if '"round"' in x][-1]
    mpirun = ["mpirun", "-np", "2", "--oversubscribe"] + (["--allow-run-as-root"] if os.getuid() == 0 else [])
    peaks = os.path.join(tmp, "peak")
    run(mpirun + ["sh", "-c", '/usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"', peaks] + base +
        ["--backend", "mpi"], "%s over %d clients on 2 ranks" % (program, k), dict(os.environ, **MPI_ENV))
    ranks = []
    for r in (0, 1):
        with open("%s.%d" % (peaks, r)) as f:
            ranks.append(int(f.read().split()[-1]) / 1024)
    return {"clients": k, "examples": line["train"]["examples"], "round_s": line["seconds"],
            "cpu_s": line["cpu_seconds"], "peak_mb": peak, "rank_mb": ranks,
            "cmd": shlex.join(base).replace(ROOT + "/", "")}


def table(title, rows):
    out = ["### " + title, "",
           "| clients | examples | round s | CPU s | CPU µs a client | peak MB (seq) | peak MB of ranks 0, 1 (mpi) |",
           "|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append("| %d | %d | %.3f | %.3f | %.1f | %.1f | %.1f, %.1f |" % (
            r["clients"], r["examples"], r["round_s"], r["cpu_s"], 1e6 * r["cpu_s"] / r["clients"], r["peak_mb"],
            r["rank_mb"][0], r["rank_mb"][1]))
    last = rows[-1]
    tenth = [r for r in rows if r["clients"] * 10 == last["clients"]][0]
    top = max([last["peak_mb"]] + last["rank_mb"])
    flat = max(last["peak_mb"] - tenth["peak_mb"], max(last["rank_mb"]) - max(tenth["rank_mb"]))
    ratio = (last["cpu_s"] / last["clients"]) / (tenth["cpu_s"] / tenth["clients"])
    verdict = lambda ok: "met" if ok else "**not met**"
    out += ["", "- memory: %.1f MB at %d clients, %+.1f MB from %d clients (goal: flat, at most %d MB more, "
            "under %d MB a rank): %s" % (top, last["clients"], flat, tenth["clients"], FLAT_MB, LIMIT_MB,
                                          verdict(flat <= FLAT_MB and top < LIMIT_MB)),
            "- time: CPU per client at %d clients %.2f times that at %d (goal: linear, at most %.2f): %s" % (
                last["clients"], ratio, tenth["clients"], LINEAR, verdict(ratio <= LINEAR)),
            "", "```"] + [r["cmd"] + " --backend seq|mpi" for r in rows] + ["```", ""]
    return out


def report(sgd, avg, when, load):
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"^Model name:\s*(.+)$", lscpu, re.M)
    head = ["Measured %s on %s (%d cores, load average %.1f at the end), %s." % (
        when,
        m.group(1).strip() if m else platform.processor(), os.cpu_count(), load,
        "`make bench-cohort`"), ""]
    return head + table("FedSGD over up to 1,000,000 clients (%s)" % os.path.relpath(LEAF, ROOT), sgd) + \
        table("FedAvg of the 2NN over up to 10,000 clients (%s)" % os.path.relpath(FM, ROOT), avg)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", metavar="FILE", help="put the report between FILE's cohort markers")
    ap.add_argument("--out", default=os.path.join(BUILD, "cohort.md"))
    ap.add_argument("--report", metavar="JSON", help="no runs: the report of the measurements saved in JSON")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            saved = json.load(f)
    else:
        make_data()
        saved = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "fedsgd": [], "fedavg_2nn": []}
        with tempfile.TemporaryDirectory() as tmp:
            for k in FEDSGD:
                say("== fedsgd, %d clients" % k)
                saved["fedsgd"].append(one("fedsgd.json", LEAF, k, tmp))
            for k in FEDAVG:
                say("== fedavg_2nn, %d clients" % k)
                saved["fedavg_2nn"].append(one("fedavg_2nn.json", FM, k, tmp))
        saved["load"] = os.getloadavg()[0]
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:  # the measurements, for --report
            json.dump(saved, f, indent=1)
    text = "\n".join(report(saved["fedsgd"], saved["fedavg_2nn"], saved["when"], saved["load"]))
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
