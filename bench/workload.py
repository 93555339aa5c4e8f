"""A make bench workload: one fedvm program against one PyTorch peer, side by side in the same run.

Each workload (bench/bench_cnn.py, bench/bench_lstm.py) names its program,
its peer (a script taking ref_args's options and printing ref_common.Report's
lines), its data and its training flops per example; measure() runs fedvm
(threads backend) and the peer on 1 and on every thread, one at a time, and
section() writes the Markdown table and the issue's targets: fedvm's CPU
seconds a round at most 0.67x the peer's on one thread, and fedvm on every
thread at least 1.85x its one-thread speed. Figures are medians over the
rounds after the first (a warm-up); evaluation, where there is one, after the
last round only and timed apart; CPU seconds (the process's, all threads)
beside wall seconds.
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
LIMIT = 900  # seconds a run may take


class Workload:
    """title: the section's heading; program: fedvm's program; peer: the peer's script in bench/ and
    peer_label its name in the table; train_flops: training flops per example; test: evaluate on split
    'test' after the last round; extra_peer: more options of the peer; note: a sentence for the section; replay: the peer trains
    the clients fedvm sampled each round (its --sampled option reads them from fedvm's metrics file), for
    datasets whose clients differ in size, and GFLOP/s counts the peer's examples for both."""

    def __init__(self, title, program, peer, peer_label, train_flops, test=True, extra_peer=(), note="",
                 replay=False):
        self.title, self.program, self.peer, self.peer_label = title, program, peer, peer_label
        self.train_flops, self.test = train_flops, test
        self.extra_peer, self.note, self.replay = list(extra_peer), note, replay


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
            "examples": statistics.median(ln["examples"] for ln in timed), "test_acc": acc[-1] if acc else None,
            "train_loss": lines[-1].get("train_loss")}


def failed(rc, err, cmd):
    return {"error": (err.strip().splitlines() or ["exit %d" % rc])[-1], "cmd": cmd}


def fedvm_run(w, rounds, threads, data, clients, fedvm=FEDVM):
    """fedvm's row, from its metrics file's rounds; "sampled": the clients of each round."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [fedvm, "run", w.program, "--data", "train=" + data, "--rounds", str(rounds), "--clients-per-round",
               str(clients), "--seed", "0", "--threads", str(threads), "--metrics", metrics]
        if w.test:
            cmd += ["--data", "test=%s:test" % data, "--eval-every", str(rounds)]
        rc, _, err, peak = run(cmd)
        if rc != 0:
            return failed(rc, err, cmd)
        lines, sampled = [], []
        with open(metrics) as f:
            for text in f:
                m = json.loads(text)
                if "round" not in m:
                    continue
                ev = m.get("eval_seconds", 0.0)
                line = {"round": m["round"], "examples": m["train"]["examples"], "seconds": m["seconds"] - ev,
                        "cpu_seconds": m["cpu_seconds"], "train_loss": m["train"].get("loss")}
                if "eval" in m:
                    line.update(test_acc=m["eval"]["accuracy"], eval_seconds=ev)
                lines.append(line)
                sampled.append(m["sampled"])
    return dict(summarize(lines), peak_rss_mb=peak, cmd=cmd, sampled=sampled)


def peer_run(w, rounds, threads, data, clients, sampled=None):
    cmd = [sys.executable, os.path.join(HERE, w.peer), "--data", data, "--rounds", str(rounds),
           "--clients-per-round", str(clients), "--eval-every", "0", "--threads", str(threads)] + w.extra_peer
    with tempfile.TemporaryDirectory() as tmp:
        if sampled is not None:
            path = os.path.join(tmp, "sampled.json")
            with open(path, "w") as f:
                json.dump(sampled, f)
            cmd += ["--sampled", path]
        rc, out, err, peak = run(cmd)
        if sampled is not None:
            cmd[-1] = "SAMPLED.json"
    if rc != 0:
        return failed(rc, err, cmd)
    lines = [json.loads(s) for s in out.splitlines() if s.startswith("{")]
    return dict(summarize(lines), peak_rss_mb=peak, cmd=cmd)


def measure(w, rounds, data, say=lambda s: print(s, file=sys.stderr, flush=True), clients=10):
    """The rows of the table: fedvm and the peer on 1 and every thread."""
    nthreads = os.cpu_count() or 1
    rows, sampled = [], None
    for t in sorted({1, nthreads}):
        label = "%d thread%s" % (t, "s" if t > 1 else "")
        say("== %s: fedvm, %s" % (w.title.split(":")[0], label))
        rows.append(dict(fedvm_run(w, rounds, t, data, clients), label="fedvm", threads=t))
        if w.replay and sampled is None:
            sampled = rows[-1].get("sampled")
        say("== %s: %s, %s" % (w.title.split(":")[0], w.peer_label, label))
        rows.append(dict(peer_run(w, rounds, t, data, clients, sampled if w.replay else None), label=w.peer_label,
                         threads=t))
    return rows


def section(w, rounds, rows):
    """The Markdown lines of the workload's table and its targets."""
    peer_examples = [r["examples"] for r in rows if r["label"] == w.peer_label and "error" not in r]

    def per_round(r):  # the examples a round trains on: with replay, the peer's count for both
        return peer_examples[0] if w.replay and peer_examples else r["examples"]
    lines = ["### " + w.title, "",
             "Rounds 2-%d of %d (the first is a warm-up)%s. GFLOP/s counts the training's %d flops per example "
             "per second of CPU time; fedvm takes its round metrics from the training pass, as the peer makes "
             "none, so both do the same work.%s"
             % (rounds, rounds, ", evaluation after the last round timed apart" if w.test else "", w.train_flops,
                " " + w.note if w.note else ""), "",
             "| run | threads | median round s | median CPU s | CPU GFLOP/s | peak RSS MB | %s |"
             % ("test acc" if w.test else "last train loss"),
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append("| %s | %d | %s | | | | |" % (r["label"], r["threads"], r["error"].replace("|", "/")))
            continue
        last = r["test_acc"] if w.test else r["train_loss"]
        lines.append("| %s | %d | %.3f | %.3f | %.1f | %.0f | %.4f |"
                     % (r["label"], r["threads"], r["round_s"], r["cpu_s"],
                        per_round(r) * w.train_flops / r["cpu_s"] * 1e-9, r["peak_rss_mb"],
                        last if last is not None else float("nan")))
    ok = {(r["label"], r["threads"]): r for r in rows if "error" not in r}
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    f1, p1 = ok.get(("fedvm", 1)), ok.get((w.peer_label, 1))
    if f1 and p1:
        ratio = f1["cpu_s"] / p1["cpu_s"]
        lines.append("| fedvm's round at most 0.67x %s's, CPU time, 1 thread | fedvm %.3f s, %s %.3f s: "
                     "%.2fx | %s |" % (w.peer_label.split(",")[0], f1["cpu_s"], w.peer_label.split(",")[0],
                                       p1["cpu_s"], ratio, "met" if ratio <= 0.67 else "**not met**"))
    fn = [r for (lab, t), r in ok.items() if lab == "fedvm" and t > 1]
    if f1 and fn:
        s = f1["round_s"] / fn[0]["round_s"]
        lines.append("| fedvm on %d threads at least 1.85x one thread, wall time | %.2fx | %s |"
                     % (fn[0]["threads"], s, "met" if s >= 1.85 else "**not met**"))
    lines += ["", "```sh"] + [" ".join(c.replace(ROOT + os.sep, "") if c != sys.executable else "python3"
                                       for c in r["cmd"]) for r in rows] + ["```"]
    return lines


def main(doc, data, data_help, measure, section):
    """The command line of a workload's script: --rounds, --data (default data), --clients-per-round; prints
    section(rounds, measure(rounds, data, clients=K))."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each run, the first a warm-up (default 3)")
    ap.add_argument("--data", default=data, help=data_help)
    ap.add_argument("--clients-per-round", type=int, default=10, metavar="K",
                    help="clients a round (default 10; fewer for a quick look, not the workload's figures)")
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds must be at least 2 (the first is a warm-up)")
    print("\n".join(section(args.rounds, measure(args.rounds, args.data, clients=args.clients_per_round))))
    return 0
