#!/usr/bin/python3
"""make bench: fedvm against plain NumPy and PyTorch on FedAvg with the 2NN, the machine's SGEMM
peak, backends and threads, and a round's time and memory against its clients, in one run.

Runs, in order (each a separate process, one at a time):
  1. build/bench/sgemm_peak: SGEMM on 1 thread and on every thread, and at the 2NN's shapes;
  2. one round of programs/fedavg_2nn.json under build/bench/flop_count.so, run by
     build/bench/blas/bin/fedvm (fedvm built with every matrix product in BLAS): the flops
     it hands to BLAS against the count of bench/roundstats.py;
  3. bench/fedavg_2nn on the threads backend with 1 and with every thread, on seq, on mpi
     with 2 ranks when 'fedvm run' has that backend and mpirun exists, and with the build
     of step 2 on 1 thread (fedvm's own matrix kernel against OpenBLAS's);
  4. bench/ref_fedavg_numpy.py, bench/ref_fedavg_torch.py and bench/ref_fedavg_torch_batched.py
     (the strongest peer: all clients of a round at once, TorchScript), each with 1 and every thread;
  5. programs/fedsgd.json (softmax regression) over 10 ... 100,000 clients a round of LEAF
     synthetic data (2 to 5 examples a client): round time and peak resident memory;
  6. the CNN workload (bench/bench_cnn.py): FedAvg with McMahan's CNN, fedvm against PyTorch
     with oneDNN, 1 and every thread (--cnn-rounds, 0 to leave it out);
  7. the char LSTM workload (bench/bench_lstm.py): FedAvg with FedJAX's Shakespeare model on the
     Shakespeare stand-in, fedvm against PyTorch's nn.LSTM (--lstm-rounds, 0 to leave it out).
Every run of the 2NN does the same rounds (default 11) from the same seed; the figures leave
out the first round (warm-up) and the evaluation, which follows the last round only
(bench/roundstats.py computes them alike for all three). Data files are made in build/bench
when missing. Prints a Markdown report (also written to build/bench/results.md); with
--doc FILE, it replaces the part of FILE between the lines '<!-- bench:begin -->' and
'<!-- bench:end -->' (how BENCHMARKS.md is refreshed: make bench-doc).

Needs Debian's python3-numpy, python3-torch, python3-msgpack and dataset-fashion-mnist (make
bench installs them); a missing reference is reported and skipped. Standard library only.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_cnn  # noqa: E402
import bench_lstm  # noqa: E402
import roundstats  # noqa: E402

BUILD = os.path.join(ROOT, "build", "bench")
FEDVM = os.path.join(ROOT, "bin", "fedvm")
FEDVM_BLAS = os.path.join(BUILD, "blas", "bin", "fedvm")  # every product in BLAS (make bench-blas)
FASHION = os.path.join(BUILD, "fashion_mnist.sqlite")
LEAF = os.path.join(BUILD, "leaf_100000_2-5.sqlite")  # the name says how it was made: LEAF_CMD
LEAF_CMD = ["data", "synthetic", "--kind", "leaf", "--clients", "100000", "--min-examples", "2",
            "--max-examples", "5", "--test-fraction", "0", "--seed", "0", "-o", LEAF]
SWEEP = (10, 100, 1000, 10000, 100000)
TEST_EXAMPLES = 10000  # Fashion-MNIST's test split, evaluated after the last round
MARK_BEGIN, MARK_END = "<!-- bench:begin -->", "<!-- bench:end -->"
RUN_LIMIT = 90  # seconds a 2NN run may take (OpenMP threads that spin on a busy machine can take minutes)


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11, help="rounds of each 2NN run, the first a warm-up (default 11)")
    ap.add_argument("--sweep", default=",".join(map(str, SWEEP)), metavar="K,...",
                    help="clients per round of the memory sweep (default %(default)s)")
    ap.add_argument("--cnn-rounds", type=int, default=3, metavar="R",
                    help="rounds of each run of the CNN workload (bench/bench_cnn.py), the first a warm-up; "
                         "0 leaves it out (default 3)")
    ap.add_argument("--lstm-rounds", type=int, default=3, metavar="R",
                    help="rounds of each run of the char LSTM workload (bench/bench_lstm.py), the first a warm-up; "
                         "0 leaves it out (default 3)")
    ap.add_argument("--out", default=os.path.join(BUILD, "results.md"), help="the report's file")
    ap.add_argument("--doc", metavar="FILE", help="replace the measured part of FILE (BENCHMARKS.md) with the report")
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds must be at least 2 (the first is a warm-up)")
    for name in ("cnn_rounds", "lstm_rounds"):
        if getattr(args, name) == 1 or getattr(args, name) < 0:
            ap.error("--%s must be 0 or at least 2 (the first is a warm-up)" % name.replace("_", "-"))
    try:
        args.sweep = [int(k) for k in args.sweep.split(",")]
    except ValueError:
        ap.error("--sweep takes numbers separated by commas, found '%s'" % args.sweep)
    if not args.sweep or min(args.sweep) < 1 or max(args.sweep) > 100000:
        ap.error("--sweep: clients per round between 1 and 100000")
    return args


def say(text):
    """Progress on stderr (the report goes to stdout at the end)."""
    print(text, file=sys.stderr, flush=True)


def shell_words(cmd):
    """cmd as one would type it at the repository's root."""
    words = [c.replace(ROOT + os.sep, "") if c != sys.executable else "python3" for c in cmd]
    return " ".join(c if re.fullmatch(r"[\w./=:,@+-]+", c) else "'%s'" % c for c in words)


def measured(cmd, env=None, limit=None):
    """Runs cmd from the repository root, killed after `limit` seconds if given: (exit code, stdout,
    stderr, peak RSS in MB of it and its waited-for children from getrusage, whether it was killed)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # its own process group, so that the limit stops fedavg_2nn's fedvm too
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT, env=env, start_new_session=True)
        timer = threading.Timer(limit, os.killpg, (proc.pid, signal.SIGKILL)) if limit else None
        if timer:
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except KeyboardInterrupt:  # the group does not get the terminal's ^C: pass it on
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        killed = bool(timer) and not timer.is_alive()
        if timer:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                usage.ru_maxrss / 1024.0, killed)


def must(cmd, what, env=None):
    rc, out, err, peak, _ = measured(cmd, env)
    if rc != 0:
        sys.stderr.write(err)
        sys.exit("bench: %s failed (exit %d): %s" % (what, rc, shell_words(cmd)))
    return out, err, peak


def keyvals(line):
    """'name a=1 b="x y"' -> {'': 'name', 'a': '1', 'b': 'x y'}."""
    d = {"": line.split(" ", 1)[0]}
    for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', line):
        d[k] = v.strip('"')
    return d


# ---- the machine ------------------------------------------------------------------------------

def machine():
    info = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"^Model name:\s*(.+)$", lscpu, re.M)
    info["cpu"] = m.group(1).strip() if m else platform.processor()
    info["cores"] = os.cpu_count()
    with open("/proc/meminfo") as f:
        kb = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
    info["memory"] = "%.1f GiB" % (kb / 1048576)
    try:
        with open("/etc/os-release") as f:
            info["os"] = re.search(r'^PRETTY_NAME="?([^"\n]+)', f.read(), re.M).group(1)
    except (OSError, AttributeError):
        info["os"] = platform.platform()
    info["kernel"] = platform.release()
    q = subprocess.run(["dpkg-query", "-W", "-f", "${Version}\n", "libopenblas0-pthread"], capture_output=True, text=True)
    versions = q.stdout.split() if q.returncode == 0 else []
    info["openblas"] = versions[0] if versions else "unknown"  # (a line per architecture installed)
    git = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True)
    info["fedvm"] = git.stdout.strip() or "unknown"
    return info


# ---- SGEMM and the flop count -------------------------------------------------------------

AVX512_CORE = "SkylakeX"  # OpenBLAS's AVX-512 SGEMM kernel


def avx512_unused(corename):
    """The CPU has AVX-512 but OpenBLAS chose a kernel without it (Debian's 0.3.21 takes Zen 4 and 5
    for Haswell): then the machine's SGEMM peak is OpenBLAS's with OPENBLAS_CORETYPE=SkylakeX."""
    try:
        with open("/proc/cpuinfo") as f:
            avx512 = " avx512f " in f.read().replace("\n", " ")
    except OSError:
        return False
    return avx512 and corename in ("Haswell", "Zen", "Sandybridge")


def sgemm():
    """sgemm_peak's lines with the library's own choice of kernel, then (when that leaves the
    CPU's AVX-512 unused) the square products again with the AVX-512 kernel, as 'sgemm_avx512'."""
    say("== sgemm peak")
    out, _, _ = must([os.path.join(BUILD, "sgemm_peak")], "sgemm_peak")
    lines = [keyvals(line) for line in out.splitlines() if line.strip()]
    corename = next((b["corename"] for b in lines if b[""] == "blas"), "?")
    if avx512_unused(corename):
        say("== sgemm peak, OPENBLAS_CORETYPE=%s" % AVX512_CORE)
        out, _, _ = must([os.path.join(BUILD, "sgemm_peak")], "sgemm_peak",
                         dict(os.environ, OPENBLAS_CORETYPE=AVX512_CORE))
        lines += [dict(b, **{"": "sgemm_avx512"}) for b in map(keyvals, out.splitlines()) if b.get("") == "sgemm"]
    return lines


def flop_check():
    """(flops counted by flop_count.so in one round with evaluation, flops of the formula, examples
    trained on, the call shapes' lines)."""
    say("== flop count (1 round of build/bench/blas/bin/fedvm under build/bench/flop_count.so)")
    with tempfile.TemporaryDirectory() as tmp:
        count, metrics = os.path.join(tmp, "count.txt"), os.path.join(tmp, "metrics.jsonl")
        env = dict(os.environ, FVM_FLOP_COUNT=count, LD_PRELOAD=os.path.join(BUILD, "flop_count.so"))
        cmd = [FEDVM_BLAS, "run", os.path.join(ROOT, "programs", "fedavg_2nn.json"), "--data", "train=" + FASHION,
               "--data", "test=%s:test" % FASHION, "--rounds", "1", "--clients-per-round", "10", "--seed", "0",
               "--metrics", metrics]
        must(cmd, "the counted fedvm run", env)
        with open(count) as f:
            lines = f.read().splitlines()
        with open(metrics) as f:  # after the run's line, the round's
            examples = next(m for m in map(json.loads, f) if "round" in m)["train"]["examples"]
    counted = float(keyvals("count " + lines[0])["flops"])
    # training (forward and backward; the program's training metrics come from that forward pass)
    # and the evaluation on the test split
    formula = examples * roundstats.train_flops() + TEST_EXAMPLES * roundstats.forward_flops()
    return counted, formula, examples, [keyvals(s) for s in lines[1:]]


# ---- the 2NN runs -----------------------------------------------------------------------

def mpi_available():
    """'fedvm run' has --backend mpi (its usage says so) and mpirun exists."""
    usage = subprocess.run([FEDVM, "help", "run"], capture_output=True, text=True).stdout
    return bool(re.search(r"--backend [a-z|]*\bmpi\b", usage)) and shutil.which("mpirun") is not None


def round_lines(out):
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_2nn(label, threads, cmd, env=None):
    """A run of bench/fedavg_2nn or a reference: its figures; with 'error' when it failed, with
    'stopped' (the rounds it finished) when it ran past RUN_LIMIT seconds and was killed."""
    say("== %s, %s" % (label, threads))
    rc, out, err, peak, killed = measured(cmd, env=env, limit=RUN_LIMIT)
    lines = round_lines(out)
    row = {"label": label, "threads": threads, "cmd": cmd}
    if killed and lines:
        row["stopped"] = len(lines)
    elif rc != 0:
        tail = err.strip().splitlines()[-1:] or ["exit %d" % rc]
        row["error"] = "killed after %d s" % RUN_LIMIT if killed else tail[0]
        return row
    m = re.search(r"^# (numpy|torch) ([\w.+-]+)", err, re.M)
    row.update(roundstats.summarize(lines), peak_rss_mb=peak, version=m and "%s %s" % m.groups())
    return row


def fedvm_runs(args, nthreads):
    script = [os.path.join(HERE, "fedavg_2nn"), "--rounds", str(args.rounds)]
    rows = [run_2nn("fedvm threads", "1 thread", script + ["--threads", "1"])]
    if nthreads > 1:
        rows.append(run_2nn("fedvm threads", "%d threads" % nthreads, script + ["--threads", str(nthreads)]))
    rows.append(run_2nn("fedvm seq", "1 thread", script + ["--backend", "seq"]))
    if mpi_available():
        # cpu_seconds is rank 0's: not the run's CPU time, so left out of the CPU-time comparisons
        rows.append(dict(run_2nn("fedvm mpi", "2 ranks", script + ["--backend", "mpi", "--ranks", "2"]),
                         cpu_of="rank 0"))
    else:
        rows.append({"label": "fedvm mpi", "threads": "2 ranks", "cmd": None, "error": "mpi: not built"})
    blas = run_2nn("fedvm, products in BLAS", "1 thread", script + ["--threads", "1", "--fedvm", FEDVM_BLAS])
    rows.append(dict(blas, variant=True))  # a build for comparison, not fedvm's figure for the targets
    return rows


PEERS = (("NumPy", "ref_fedavg_numpy.py"), ("PyTorch", "ref_fedavg_torch.py"),
         ("PyTorch, batched clients", "ref_fedavg_torch_batched.py"))


def reference_runs(args, nthreads, avx512):
    """NumPy and PyTorch (plain and batched) on 1 and every thread; NumPy and the batched PyTorch on 1
    thread also with OpenBLAS's AVX-512 kernel when its own choice leaves AVX-512 unused (avx512)."""
    rows = []
    for name, script in PEERS:
        for t in sorted({1, nthreads}):
            cmd = [sys.executable, os.path.join(HERE, script), "--data", FASHION, "--rounds", str(args.rounds),
                   "--eval-every", "0", "--threads", str(t)]
            rows.append(run_2nn(name, "%d thread%s" % (t, "s" if t > 1 else ""), cmd))
            if name != "PyTorch" and t == 1 and avx512:
                rows.append(dict(run_2nn(name + ", OPENBLAS_CORETYPE=" + AVX512_CORE, "1 thread", cmd,
                                         dict(os.environ, OPENBLAS_CORETYPE=AVX512_CORE)),
                                 env="OPENBLAS_CORETYPE=" + AVX512_CORE))
    return rows


# ---- clients per round: time and memory ---------------------------------------------------

def sweep(counts):
    rows = []
    for k in counts:
        say("== fedsgd, %d clients a round" % k)
        with tempfile.TemporaryDirectory() as tmp:
            metrics = os.path.join(tmp, "m.jsonl")
            cmd = [FEDVM, "run", os.path.join(ROOT, "programs", "fedsgd.json"), "--data", "train=" + LEAF,
                   "--rounds", "3", "--clients-per-round", str(k), "--seed", "0", "--metrics", metrics]
            _, _, peak = must(cmd, "the sweep's run of %d clients" % k)
            with open(metrics) as f:
                lines = [json.loads(line) for line in f]
        timed = lines[1:]
        rows.append({"clients": k, "round_s": statistics.median(ln["seconds"] for ln in timed),
                     "cpu_s": statistics.median(ln["cpu_seconds"] for ln in timed), "peak_rss_mb": peak,
                     "examples": timed[0]["train"]["examples"], "cmd": cmd})
    return rows


# ---- the report -----------------------------------------------------------------------------
# Each section is a list of Markdown lines.

def name(r):
    return "%s (%s)" % (r["label"], r["threads"])


def met(ok):
    return "met" if ok else "**not met**"


def header_section(info, load, corename, rows):
    lines = ["Measured by `make bench` on %s, fedvm %s." % (info["date"], info["fedvm"]), "",
             "- machine: %s, %d cores, %s memory; %s (Linux %s); OpenBLAS %s (pthread build, %s kernels)"
             % (info["cpu"], info["cores"], info["memory"], info["os"], info["kernel"], info["openblas"], corename)]
    versions = sorted({r["version"] for r in rows if r.get("version")})
    if versions:
        lines.append("- references: %s, Python %s" % (", ".join(versions), platform.python_version()))
    # Load averages count the benchmark's own runs (and the build before it); a one-thread run whose
    # wall time exceeds its CPU time is what shows that other work took the core.
    single = [r for r in rows if r["threads"] == "1 thread" and "error" not in r and r.get("median_cpu_s")]
    waited = max((r["median_round_s"] / r["median_cpu_s"] for r in single), default=1.0)
    busy = waited > 1.15
    lines.append("- load average %.2f at the start, %.2f at the end; one-thread runs took up to %.2fx their CPU "
                 "time as wall time%s" % (load[0], load[1], waited, (
                     ": **the machine was busy with other work**, so wall times are inflated; CPU times "
                     "(the process's, all threads) are much less affected, and the ratios below are given on both")
                     if busy else " (the cores were not taken by other work)"))
    return lines


def workload_section(rounds, rows):
    lines = ["### FedAvg, 2NN, Fashion-MNIST: 100 IID clients, 10 a round, E=1, B=10, lr 0.05", "",
             "Rounds 2-%d of %d (the first is a warm-up), evaluation after the last round timed apart; "
             "runs longer than %d s are stopped. GFLOP/s counts the training's %d flops per example "
             "(bench/roundstats.py)." % (rounds, rounds, RUN_LIMIT, roundstats.train_flops()), "",
             "| run | threads | median round s | median CPU s | vs fedvm 1 thread | examples/s | GFLOP/s "
             "| peak RSS MB | test acc |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    base = next((r for r in rows if name(r) == "fedvm threads (1 thread)" and "error" not in r), None)
    for r in rows:
        if "error" in r:
            lines.append("| %s | %s | %s | | | | | | |" % (r["label"], r["threads"], r["error"].replace("|", "/")))
            continue
        vs = "%.2fx" % (base["median_round_s"] / r["median_round_s"]) if base else ""
        acc = "stopped after %d s, %d rounds" % (RUN_LIMIT, r["stopped"]) if "stopped" in r else "%.4f" % r["test_acc"]
        cpu = "%.4f%s" % (r["median_cpu_s"], " (%s)" % r["cpu_of"] if r.get("cpu_of") else "")
        lines.append("| %s | %s | %.4f | %s | %s | %.0f | %.2f | %.0f | %s |"
                     % (r["label"], r["threads"], r["median_round_s"], cpu, vs, r["examples_per_s"],
                        r["gflops"], r["peak_rss_mb"], acc))
    return lines


def targets_section(info, rows, blas, scale):
    lines = ["### Targets", "", "| target | measured | met |", "|---|---|---|"]
    fed = [r for r in rows if "error" not in r and r["label"].startswith("fedvm") and not r.get("variant")]
    refs = [r for r in rows if "error" not in r and not r["label"].startswith("fedvm")]
    if fed and refs:
        for key, what in (("median_round_s", "wall"), ("median_cpu_s", "CPU")):
            whole = [r for r in fed if key != "median_cpu_s" or not r.get("cpu_of")]
            f, g = min(whole, key=lambda r: r[key]), min(refs, key=lambda r: r[key])
            ratio = g[key] / f[key]
            lines.append("| fedvm's median round at most 1/6 of the faster reference's, %s time | %s %.4f s, %s "
                         "%.4f s: the reference takes %.2fx fedvm's time (need 6x) | %s |"
                         % (what, name(f), f[key], name(g), g[key], ratio, met(ratio >= 6)))
    peak, peak_cpu = blas["peak"], blas["peak_cpu"]
    if fed and peak:
        f = max(fed, key=lambda r: r["gflops"])
        t = min(int(f["threads"].split()[0]), max(peak))
        frac = f["gflops"] / peak[t]
        lines.append("| at least half the SGEMM peak in GFLOP/s, wall time | %s %.2f GFLOP/s, "
                     "SGEMM on %d thread%s %.1f (%s kernel): %.0f%% (need 50%%) | %s |"
                     % (name(f), f["gflops"], t, "s" if t > 1 else "", peak[t],
                        blas["peak_core"][t], 100 * frac, met(frac >= 0.5)))
        one = [r for r in fed if r["threads"] == "1 thread"]
        if one and 1 in peak_cpu:
            f = min(one, key=lambda r: r["median_cpu_s"])
            rate = f["examples"] * roundstats.train_flops() / f["median_cpu_s"] * 1e-9
            lines.append("| the same per second of CPU time, 1 thread | %s %.2f GFLOP/s, SGEMM on 1 thread %.1f: "
                         "%.0f%% (need 50%%) | %s |" % (name(f), rate, peak_cpu[1], 100 * rate / peak_cpu[1],
                                                        met(rate >= 0.5 * peak_cpu[1])))
    if fed and refs and peak_cpu:
        g = min(refs, key=lambda r: r["median_cpu_s"])
        flops_round = fed[0]["examples"] * roundstats.train_flops()
        need = flops_round / (g["median_cpu_s"] / 6) * 1e-9
        all_cores = max(peak_cpu.values()) * info["cores"]
        lines.append("| (what the first target asks of the hardware) | a round's %.2f GFLOP of training in 1/6 of "
                     "%s's CPU time, %.4f s: %.0f GFLOP/s, %.0f%% of the SGEMM rate of all %d cores (%.0f) | |"
                     % (flops_round * 1e-9, name(g), g["median_cpu_s"] / 6, need, 100 * need / all_cores,
                        info["cores"], all_cores))
    lines += w1_targets(rows, blas)
    for s in scale:
        if s["clients"] == 100000:
            lines.append("| a round over 100,000 clients under 256 MB peak RSS | %.0f MB | %s |"
                         % (s["peak_rss_mb"], met(s["peak_rss_mb"] < 256)))
    return lines


W1_MEMORY_MB = 41  # W1's peak RSS on 1 thread when issue #18 was written, to be kept


def w1_targets(rows, blas):
    """Issue #18's targets for W1 (this workload): against the strongest peer and the one-core SGEMM peak."""
    lines = []
    fed = [r for r in rows if "error" not in r and "stopped" not in r and r["label"].startswith("fedvm")
           and not r.get("variant")]
    refs = [r for r in rows if "error" not in r and "stopped" not in r and not r["label"].startswith("fedvm")]
    one, ref_one = [r for r in fed if r["threads"] == "1 thread"], [r for r in refs if r["threads"] == "1 thread"]
    if one and ref_one:
        f, g = min(one, key=lambda r: r["median_cpu_s"]), min(ref_one, key=lambda r: r["median_cpu_s"])
        ratio = f["median_cpu_s"] / g["median_cpu_s"]
        lines.append("| W1 (issue #18): fedvm at most 0.5x the strongest peer's round, CPU time, 1 thread | %s %.4f s, "
                     "%s %.4f s: %.2fx (need at most 0.5x) | %s |"
                     % (name(f), f["median_cpu_s"], name(g), g["median_cpu_s"], ratio, met(ratio <= 0.5)))
    if fed and refs:
        f, g = min(fed, key=lambda r: r["median_round_s"]), min(refs, key=lambda r: r["median_round_s"])
        ratio = f["median_round_s"] / g["median_round_s"]
        lines.append("| W1: the same in wall time, all cores | %s %.4f s, %s %.4f s: %.2fx (need at most 0.5x) | %s |"
                     % (name(f), f["median_round_s"], name(g), g["median_round_s"], ratio, met(ratio <= 0.5)))
    if one and 1 in blas["peak_cpu"]:
        f = min(one, key=lambda r: r["median_cpu_s"])
        rate = f["examples"] * roundstats.train_flops() / f["median_cpu_s"] * 1e-9
        frac = rate / blas["peak_cpu"][1]
        lines.append("| W1: at least 60%% of the one-core SGEMM peak in training flops per CPU second | %s %.2f "
                     "GFLOP/s, SGEMM on 1 thread %.1f: %.0f%% (need 60%%) | %s |"
                     % (name(f), rate, blas["peak_cpu"][1], 100 * frac, met(frac >= 0.6)))
    r1 = next((r for r in fed if name(r) == "fedvm threads (1 thread)"), None)
    rn = [r for r in fed if r["label"] == "fedvm threads" and r is not r1]
    if r1 and rn:
        speedup = r1["median_round_s"] / rn[0]["median_round_s"]
        same = len({r["test_acc"] for r in fed}) == 1
        lines.append("| W1: %s at least 1.85x 1 thread, wall time, the same results | %.2fx; test accuracy %s "
                     "on every backend and thread count (bits: tests/run_backends.sh) | %s |"
                     % (rn[0]["threads"], speedup, "the same" if same else "**differs**",
                        met(speedup >= 1.85 and same)))
    if r1:
        lines.append("| W1: memory as it was (peak RSS about %d MB, 1 thread) | %.0f MB | %s |"
                     % (W1_MEMORY_MB, r1["peak_rss_mb"], met(r1["peak_rss_mb"] <= W1_MEMORY_MB * 1.1)))
    return lines


def sgemm_section(blas):
    lines = ["### SGEMM (cblas_sgemm, best of 5 runs)", "",
             "CPU GFLOP/s: flops per second of the process's CPU time (all threads), i.e. per busy core.", "",
             "| product | threads | GFLOP/s | CPU GFLOP/s |", "|---|---:|---:|---:|"]
    square = [b for b in blas["lines"] if b[""] in ("sgemm", "sgemm_avx512")]
    for b in square + [b for b in blas["lines"] if b not in square]:
        if b[""] in ("sgemm", "sgemm_avx512"):
            lines.append("| %sx%sx%s%s | %s | %s | %s |"
                         % (b["n"], b["n"], b["n"], ", OPENBLAS_CORETYPE=%s (AVX-512)" % AVX512_CORE
                            if b[""] == "sgemm_avx512" else "", b["threads"], b["gflops"], b["cpu_gflops"]))
        elif b[""] == "shape":
            lines.append("| %s: [%s,%s]x[%s,%s]%s | 1 | %s | %s |"
                         % (b["name"], b["m"], b["k"], b["k"], b["n"], " (transposes as flags)"
                            if "1" in (b["ta"], b["tb"]) else "", b["gflops"], b["cpu_gflops"]))
        elif b[""] == "step":
            lines.append("| all of one SGD step's products (batch %s) | 1 | %s | %s |"
                         % (b["batch"], b["gflops"], b["cpu_gflops"]))
            own = next((float(q["cpu_gflops"]) for q in blas["lines"] if q[""] == "sgemm" and q["threads"] == "1"),
                       None)
            if own:
                lines += ["", "On one thread, BLAS alone runs the step's products at %.0f%% of its square-matrix "
                          "rate with the same kernel (CPU time)." % (100 * float(b["cpu_gflops"]) / own)]
    return lines


def flops_section(flops):
    counted, formula, examples, shapes = flops
    lines = ["### The flop count, checked", "",
             "One round of fedvm built with every matrix product in BLAS (`build/bench/blas/bin/fedvm`; bin/fedvm "
             "runs the 2NN's products in its own kernel) under `build/bench/flop_count.so` (every "
             "cblas_sgemm/sgemv/sdot call counted): %.0f flops; "
             "the formula for %d training examples (%d each, forward and backward) and %d test examples "
             "(forward, %d each): %.0f flops: %s."
             % (counted, examples, roundstats.train_flops(), TEST_EXAMPLES, roundstats.forward_flops(), formula,
                "equal" if counted == formula else "**they differ by %.0f**" % (counted - formula)),
             "", "| BLAS call (row-major) | calls |", "|---|---:|"]
    for s in shapes:
        if s[""] == "shape":
            lines.append("| %s [%s,%s]x[%s,%s]%s%s | %s |" % (s["fn"], s["m"], s["k"], s["k"], s["n"],
                                                           " A^T" if s["ta"] == "1" else "",
                                                           " B^T" if s["tb"] == "1" else "", s["calls"]))
    return lines


def sweep_section(scale):
    lines = ["### One round against its clients: FedSGD, softmax regression, LEAF synthetic data", "",
             "programs/fedsgd.json (60 features, 10 classes) over 100,000 clients of 2 to 5 examples, every thread; "
             "median of rounds 2-3; peak RSS of the whole run.", "",
             "| clients a round | examples | median round s | median CPU s | us per client | peak RSS MB |",
             "|---:|---:|---:|---:|---:|---:|"]
    for s in scale:
        lines.append("| %d | %d | %.4f | %.4f | %.1f | %.1f |" % (s["clients"], s["examples"], s["round_s"], s["cpu_s"],
                                                              1e6 * s["round_s"] / s["clients"], s["peak_rss_mb"]))
    return lines


def commands_section(rows, scale):
    lines = ["### Commands", "", "```sh",
             "make bench    # everything above; make bench-doc also writes it into BENCHMARKS.md",
             "%s   # once, if missing" % shell_words([FEDVM, "data", "import", "fashion-mnist", "--clients", "100",
                                                      "--partition", "iid", "--seed", "0", "-o", FASHION]),
             "%s   # once, if missing" % shell_words([FEDVM] + LEAF_CMD),
             "build/bench/sgemm_peak"]
    lines += [(r["env"] + " " if r.get("env") else "") + shell_words(r["cmd"]) for r in rows if r.get("cmd")]
    lines += [shell_words(s["cmd"][:-2] + ["--metrics", "m.jsonl"]) for s in scale]
    return lines + ["```"]


def report(args, info, load, blas_lines, flops, rows, scale, cnn=None, lstm=None):
    corename = next((b["corename"] for b in blas_lines if b[""] == "blas"), "?")
    # the peak: the faster of OpenBLAS's own choice of kernel and its AVX-512 kernel, by thread count
    blas = {"lines": blas_lines, "peak": {}, "peak_cpu": {}, "peak_core": {}}
    for b in blas_lines:
        if b[""] in ("sgemm", "sgemm_avx512"):
            t = int(b["threads"])
            if float(b["gflops"]) > blas["peak"].get(t, 0.0):
                blas["peak"][t] = float(b["gflops"])
                blas["peak_core"][t] = AVX512_CORE if b[""] == "sgemm_avx512" else corename
            blas["peak_cpu"][t] = max(blas["peak_cpu"].get(t, 0.0), float(b["cpu_gflops"]))
    sections = [header_section(info, load, corename, rows), workload_section(args.rounds, rows),
                targets_section(info, rows, blas, scale)]
    if cnn:
        sections.append(bench_cnn.section(args.cnn_rounds, cnn))
    if lstm:
        sections.append(bench_lstm.section(args.lstm_rounds, lstm))
    sections += [sgemm_section(blas), flops_section(flops), sweep_section(scale), commands_section(rows, scale)]
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"


def write_doc(path, text):
    with open(path) as f:
        doc = f.read()
    b, e = doc.find(MARK_BEGIN), doc.find(MARK_END)
    if b < 0 or e < b:
        sys.exit("bench: %s has no '%s' ... '%s' section to replace" % (path, MARK_BEGIN, MARK_END))
    with open(path + ".tmp", "w") as f:
        f.write(doc[:b + len(MARK_BEGIN)] + "\n" + text + doc[e:])
    os.replace(path + ".tmp", path)


def main():
    args = parse()
    os.makedirs(BUILD, exist_ok=True)
    load0 = os.getloadavg()[0]
    info = machine()
    if not os.path.exists(FASHION):
        say("== importing Fashion-MNIST into %s" % shell_words([FASHION]))
        must([FEDVM, "data", "import", "fashion-mnist", "--clients", "100", "--partition", "iid", "--seed", "0",
              "-o", FASHION], "fedvm data import fashion-mnist")
    if not os.path.exists(LEAF):
        say("== generating %s" % shell_words([LEAF]))
        must([FEDVM] + LEAF_CMD, "fedvm data synthetic")
    nthreads = os.cpu_count() or 1
    blas = sgemm()
    flops = flop_check()
    corename = next((b["corename"] for b in blas if b[""] == "blas"), "?")
    rows = fedvm_runs(args, nthreads) + reference_runs(args, nthreads, avx512_unused(corename))
    scale = sweep(args.sweep)
    cnn = bench_cnn.measure(args.cnn_rounds, FASHION, say) if args.cnn_rounds else None
    lstm = bench_lstm.measure(args.lstm_rounds, say=say) if args.lstm_rounds else None
    text = report(args, info, (load0, os.getloadavg()[0]), blas, flops, rows, scale, cnn, lstm)
    with open(args.out, "w") as f:
        f.write(text)
    sys.stdout.write(text)
    if args.doc:
        write_doc(args.doc, text)
        say("bench: wrote the measured part of %s" % args.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
