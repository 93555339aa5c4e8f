#!/usr/bin/python3
"""The CNN workload of make bench: FedAvg with McMahan et al.'s CNN on Fashion-MNIST, fedvm against PyTorch.

100 IID clients, 10 a round, E = 1, B = 10, lr 0.05, from the same seed:
bench/fedavg_cnn.json run by 'fedvm run' (threads backend, 1 and every
thread) and bench/ref_cnn_torch.py (oneDNN, channels-last; 1 and every
thread), one at a time. Figures: medians over the rounds after the first
(a warm-up), evaluation on the 10,000 test images after the last round
only, timed apart; CPU seconds (the process's, all threads) beside wall
seconds. fedvm's program also evaluates the received model on each client's
examples before training (the round's training metrics, a forward pass in
batches of 50), which the peer does not: GFLOP/s count training flops only.

  /usr/bin/python3 bench/bench_cnn.py --rounds 3          # prints the Markdown section
bench.py calls section() for make bench's report.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FEDVM = os.path.join(ROOT, "bin", "fedvm")
PROGRAM = os.path.join(HERE, "fedavg_cnn.json")
FASHION = os.path.join(ROOT, "build", "bench", "fashion_mnist.sqlite")
LIMIT = 900  # seconds a run may take

# flops per training example: forward 2*(784*25*32 + 196*800*64 + 3136*512 + 512*10); the weights'
# gradients the same again; the inputs' gradients for every layer but the first (the images need none)
FORWARD = 2 * (784 * 25 * 32 + 196 * 800 * 64 + 3136 * 512 + 512 * 10)
TRAIN = 2 * FORWARD + 2 * (196 * 800 * 64 + 3136 * 512 + 512 * 10)


def run(cmd, limit=LIMIT):
    """(exit code, stdout, stderr, peak RSS MB of the child) of cmd run from the repository root."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except KeyboardInterrupt:
            proc.kill()
            raise
        out.seek(0)
        err.seek(0)
        return (os.waitstatus_to_exitcode(status), out.read().decode(errors="replace"),
                err.read().decode(errors="replace"), usage.ru_maxrss / 1024.0)


def summarize(lines, warmup=1):
    timed = lines[warmup:]
    acc = [ln["test_acc"] for ln in lines if "test_acc" in ln]
    cpu = [ln["cpu_seconds"] for ln in timed if "eval_seconds" not in ln] or [ln["cpu_seconds"] for ln in timed]
    return {"round_s": statistics.median(ln["seconds"] for ln in timed), "cpu_s": statistics.median(cpu),
            "examples": statistics.median(ln["examples"] for ln in timed), "test_acc": acc[-1] if acc else None}


def fedvm_run(rounds, threads, data, clients=10, fedvm=FEDVM):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [fedvm, "run", PROGRAM, "--data", "train=" + data, "--data", "test=%s:test" % data,
               "--rounds", str(rounds), "--clients-per-round", str(clients), "--eval-every", str(rounds), "--seed", "0",
               "--threads", str(threads), "--metrics", metrics]
        rc, _, err, peak = run(cmd)
        if rc != 0:
            return {"error": (err.strip().splitlines() or ["exit %d" % rc])[-1], "cmd": cmd}
        lines = []
        with open(metrics) as f:
            for text in f:
                m = json.loads(text)
                if "round" not in m:
                    continue
                ev = m.get("eval_seconds", 0.0)
                line = {"round": m["round"], "examples": m["train"]["examples"], "seconds": m["seconds"] - ev,
                        "cpu_seconds": m["cpu_seconds"]}
                if "eval" in m:
                    line.update(test_acc=m["eval"]["accuracy"], eval_seconds=ev)
                lines.append(line)
    return dict(summarize(lines), peak_rss_mb=peak, cmd=cmd)


def torch_run(rounds, threads, data, clients=10):
    cmd = [sys.executable, os.path.join(HERE, "ref_cnn_torch.py"), "--data", data, "--rounds", str(rounds),
           "--clients-per-round", str(clients), "--eval-every", "0", "--threads", str(threads)]
    rc, out, err, peak = run(cmd)
    if rc != 0:
        return {"error": (err.strip().splitlines() or ["exit %d" % rc])[-1], "cmd": cmd}
    lines = [json.loads(s) for s in out.splitlines() if s.startswith("{")]
    return dict(summarize(lines), peak_rss_mb=peak, cmd=cmd)


def measure(rounds, data=FASHION, say=lambda s: print(s, file=sys.stderr, flush=True), clients=10):
    """The rows of the table: fedvm and PyTorch on 1 and every thread."""
    nthreads = os.cpu_count() or 1
    rows = []
    for t in sorted({1, nthreads}):
        label = "%d thread%s" % (t, "s" if t > 1 else "")
        say("== CNN: fedvm, %s" % label)
        rows.append(dict(fedvm_run(rounds, t, data, clients), label="fedvm", threads=t))
        say("== CNN: PyTorch (oneDNN, channels-last), %s" % label)
        rows.append(dict(torch_run(rounds, t, data, clients), label="PyTorch, oneDNN, channels-last", threads=t))
    return rows


def section(rounds, rows):
    """The Markdown lines of the CNN's table and its targets."""
    lines = ["### FedAvg, McMahan's CNN, Fashion-MNIST: 100 IID clients, 10 a round, E=1, B=10, lr 0.05", "",
             "Rounds 2-%d of %d (the first is a warm-up), evaluation after the last round timed apart. "
             "GFLOP/s counts the training's %d flops per example per second of CPU time; fedvm's program "
             "also makes a forward pass over the round's examples for its metrics (%d flops each) that the "
             "peer does not make." % (rounds, rounds, TRAIN, FORWARD), "",
             "| run | threads | median round s | median CPU s | CPU GFLOP/s | peak RSS MB | test acc |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append("| %s | %d | %s | | | | |" % (r["label"], r["threads"], r["error"].replace("|", "/")))
            continue
        lines.append("| %s | %d | %.3f | %.3f | %.1f | %.0f | %.4f |"
                     % (r["label"], r["threads"], r["round_s"], r["cpu_s"],
                        r["examples"] * TRAIN / r["cpu_s"] * 1e-9, r["peak_rss_mb"],
                        r["test_acc"] if r["test_acc"] is not None else float("nan")))
    ok = {(r["label"].split(",")[0], r["threads"]): r for r in rows if "error" not in r}
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    f1, p1 = ok.get(("fedvm", 1)), ok.get(("PyTorch", 1))
    if f1 and p1:
        ratio = f1["cpu_s"] / p1["cpu_s"]
        lines.append("| fedvm's round at most 0.67x PyTorch's, CPU time, 1 thread | fedvm %.3f s, PyTorch %.3f s: "
                     "%.2fx | %s |" % (f1["cpu_s"], p1["cpu_s"], ratio, "met" if ratio <= 0.67 else "**not met**"))
    fn = [r for (lab, t), r in ok.items() if lab == "fedvm" and t > 1]
    if f1 and fn:
        s = f1["round_s"] / fn[0]["round_s"]
        lines.append("| fedvm on %d threads at least 1.85x one thread, wall time | %.2fx | %s |"
                     % (fn[0]["threads"], s, "met" if s >= 1.85 else "**not met**"))
    lines += ["", "```sh"] + [" ".join(c.replace(ROOT + os.sep, "") if c != sys.executable else "python3"
                                       for c in r["cmd"]) for r in rows] + ["```"]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each run, the first a warm-up (default 3)")
    ap.add_argument("--data", default=FASHION, help="Fashion-MNIST as 'fedvm data import fashion-mnist "
                    "--clients 100 --partition iid --seed 0' writes it (default build/bench/fashion_mnist.sqlite)")
    ap.add_argument("--clients-per-round", type=int, default=10, metavar="K",
                    help="clients a round (default 10; fewer for a quick look, not the workload's figures)")
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds must be at least 2 (the first is a warm-up)")
    print("\n".join(section(args.rounds, measure(args.rounds, args.data, clients=args.clients_per_round))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
