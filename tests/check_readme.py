#!/usr/bin/env python3
"""check_readme.py - every command of README.md runs, in order, and prints what the README shows.

Each ```sh block of README.md (also one indented inside a list) is a transcript.
Its commands run in README order, in ONE scratch directory, so the files that an
earlier block makes are there for the later ones; `fedvm` and `fedplan` are the
binaries under test (BIN comes first on PATH); the repository's programs/,
tests/ and format/ are reachable there by the same relative paths (symlinks),
and docs/ is an empty directory holding only a link to docs/examples/ (so
`-o docs/...` never touches the repository).

The conventions of a transcript (README.md says them under "Commands"):

- `$ COMMAND` is a command; it goes on over the next lines while a line ends
  with `\\` or the shell has not seen its end (`for ...; do` ... `done`). The
  lines after it, up to the next `$ `, are what it prints: standard output and
  standard error together, as a terminal shows them (not a terminal here, so
  training runs print JSON lines, not a progress bar). They must match
  exactly, line for line, except that `...` in a shown line stands for any
  text (timings: `fedvm: 3 rounds in ... s`; long lines cut short). The two
  streams are captured apart and each must keep its order, but how they
  interleave is not compared (a pipe, or mpirun, does not keep it).
- A command shown without output must print nothing, unless it carries a
  `# comment` (which says what it prints); then its output is not compared.
- A block without any `$ ` line is a list of commands without output.
- A command must exit with status 0. Status 1 is accepted only where the
  shown output is an error report: every shown line is a located diagnostic
  (`FILE:LINE:COL: ...` as fedvm prints errors, `::error file=...` in
  GitHub's format, or a JSON array of diagnostics with "file" and "line").
  Any other status, a signal or a timeout is a failure.
- Skipped, each with its reason printed: `make ...` (the set-up this check
  runs under); `npm` and `node` (the Beam pipeline; checked by
  tests/run_beam.sh, `make test-beam`, which runs this script with --beam:
  then the `node` lines run with NODE_PATH at the SDK installed there, and
  `npm install` is left to run_beam.sh); `mpirun` when Open MPI is missing or
  fedvm was built without it. When it is there, mpirun runs with the
  settings of tests/run_backends.sh (as root allowed, oversubscribed, the
  shared-memory and loopback transports), given through the environment.

Each failure is reported as README.md:LINE with the command, its exit status
and a unified diff of the shown output against the printed one.

Usage: python3 tests/check_readme.py [--beam NODE_MODULES_PARENT] [--keep] [--readme FILE] BIN
Exit status 0 when every command ran as shown, 1 otherwise, 2 on a usage error.
"""
import argparse
import difflib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
LINKED = ("programs", "tests", "format")
TIMEOUT = 300

FENCE = re.compile(r"^(\s*)```+\s*([\w+-]*)\s*$")
# a line of an error report: FILE:LINE:COL: ..., ::error file=..., or a JSON array of diagnostics
ERROR_LINE = re.compile(r'^(\S+:\d+:\d+: |::error file=|\[$|\]$|\s*\{"file": "[^"]*", "line": \d+)')


# ---- reading the transcripts ----------------------------------------------------

def where(n):
    name = os.path.relpath(README, ROOT)
    return f"{README if name.startswith('..') else name}:{n}"


def sh_blocks(lines):
    """[(line number of the block's first content line, [content lines without the fence's indent])]"""
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2).lower()
        k = i + 1
        while k < len(lines) and not lines[k].strip().startswith("```"):
            k += 1
        if lang == "sh":
            body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:k]]
            blocks.append((i + 2, body))
        i = k + 1
    return blocks


def incomplete(text):
    """True when the shell has not seen the end of TEXT yet (an open for/if/quote)."""
    if text.endswith("\\"):
        return True
    r = subprocess.run(["bash", "-n", "-c", text], capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    return r.returncode != 0 and "unexpected end of file" in r.stderr


def has_comment(text):
    """True when TEXT holds a shell comment: a '#' that starts a word, outside quotes."""
    quote, word_start, i = None, True, 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            quote = None if c == "'" else quote
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
        elif c == "\\":
            i, word_start = i + 2, False
            continue
        elif c in "'\"":
            quote = c
        elif c == "#" and word_start:
            return True
        word_start = quote is None and c in " \t\n;|&()"
        i += 1
    return False


def commands(start, body):
    """[(README line, command text, [shown output lines])]"""
    out = []
    prompts = any(ln.startswith("$ ") for ln in body)
    i = 0
    while i < len(body):
        line = body[i]
        if prompts and not line.startswith("$ "):
            if line.strip():
                raise ValueError(f"{where(start + i)}: a transcript line before any '$ ' command: {line}")
            i += 1
            continue
        if not line.strip():
            i += 1
            continue
        n, text = start + i, line[2:] if prompts else line
        i += 1
        while incomplete(text) and i < len(body) and not body[i].startswith("$ "):
            text += "\n" + body[i]
            i += 1
        shown = []
        while prompts and i < len(body) and not body[i].startswith("$ "):
            shown.append(body[i])
            i += 1
        while shown and not shown[-1].strip():
            shown.pop()
        out.append((n, text, shown))
    return out


# ---- running them ---------------------------------------------------------------

def first_word(text):
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return ""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words.pop(0)
    return words[0] if words else ""


def mpi_state(bindir):
    """None when mpirun can run fedvm here, else the reason it cannot."""
    if shutil.which("mpirun") is None:
        return "mpirun is not installed (make deps installs openmpi-bin)"
    r = subprocess.run([os.path.join(bindir, "fedvm"), "run", os.path.join(ROOT, "tests/backends/client_fails.json"),
                        "--arg", "index=[0]", "--backend", "mpi"], capture_output=True, text=True)
    if "built without MPI" in r.stdout + r.stderr:
        return "fedvm was built without MPI"
    return None


MPI_ENV = {
    # as tests/run_backends.sh: allowed as root, more ranks than cores, and Open MPI's own
    # shared-memory and loopback transports only
    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "OMPI_MCA_btl": "self,vader,tcp", "OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo",
    "OMPI_MCA_pml": "ob1", "OMPI_MCA_osc": "^ucx", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "OMPI_MCA_btl_base_warn_component_unused": "0",
}


def mpi_env(env):
    """ENV with MPI_ENV and, for a fedvm built with ASan, tests/run_backends.sh's LeakSanitizer
    suppressions of Open MPI's own allocations (and full stacks, which tell them apart)."""
    e = dict(env, **MPI_ENV)
    for key, add in (("LSAN_OPTIONS", f"suppressions={ROOT}/tests/lsan_openmpi.supp:print_suppressions=0"),
                     ("ASAN_OPTIONS", "fast_unwind_on_malloc=0")):
        e[key] = f"{e[key]}:{add}" if e.get(key) else add
    return e


def scratch_dir():
    d = tempfile.mkdtemp(prefix="fedvm-readme-")
    for name in LINKED:
        os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    os.mkdir(os.path.join(d, "docs"))
    if os.path.isdir(os.path.join(ROOT, "docs", "examples")):
        os.symlink(os.path.join(ROOT, "docs", "examples"), os.path.join(d, "docs", "examples"))
    return d


def matches(want, got):
    """A shown line matches a printed one when equal, '...' in it standing for any text."""
    if "..." not in want:
        return want == got
    return re.fullmatch(".*".join(re.escape(part) for part in want.split("...")), got, re.S) is not None


def interleaved(shown, out, err):
    """(True, lines) when the shown lines are the lines of standard output and of standard error
    interleaved, each stream in its own order; else (False, the printed lines merged as close to
    the shown order as they go, for a diff)."""
    if len(shown) == len(out) + len(err):
        reach = {(0, 0)}
        for w in shown:
            reach = {(i + 1, j) for i, j in reach if i < len(out) and matches(w, out[i])} | \
                    {(i, j + 1) for i, j in reach if j < len(err) and matches(w, err[j])}
        if reach:
            return True, shown
    merged, i, j = [], 0, 0
    for w in shown:
        if i < len(out) and matches(w, out[i]):
            merged.append(out[i])
            i += 1
        elif j < len(err) and matches(w, err[j]):
            merged.append(err[j])
            j += 1
        else:
            break
    return False, merged + out[i:] + err[j:]


def diff(n, want, got):
    """A unified diff of the shown lines against the printed ones; a '...' line that matched
    is shown as the line it matched."""
    seen = list(want)
    for i in range(min(len(want), len(got))):
        if matches(want[i], got[i]):
            seen[i] = got[i]
    return "".join(difflib.unified_diff([w + "\n" for w in seen], [g + "\n" for g in got],
                                        f"{where(n)} (shown)", "printed", lineterm="\n"))


def shown_error(shown):
    return bool(shown) and all(ERROR_LINE.match(s) for s in shown)


def run_all(bindir, beam, keep):
    with open(README, encoding="utf-8") as f:
        lines = f.read().splitlines()
    steps = []
    for start, body in sh_blocks(lines):
        steps += commands(start, body)
    mpi_missing = mpi_state(bindir)
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    for k in ("COLUMNS", "OMPI_COMM_WORLD_SIZE"):      # what fedvm reads from its environment
        env.pop(k, None)
    if beam:
        env["NODE_PATH"] = os.path.join(beam, "node_modules")
    d = scratch_dir()
    failures, skipped, ran = [], [], 0
    t0 = time.monotonic()
    try:
        for n, text, shown in steps:
            word = first_word(text)
            one_line = text.splitlines()[0] + (" ..." if "\n" in text else "")
            reason = None
            if word == "make":
                reason = "a make target: the set-up that runs this check"
            elif word in ("npm", "node") and not beam:
                reason = "the Beam pipeline: checked by 'make test-beam' (tests/run_beam.sh)"
            elif word == "npm":
                reason = "Beam's SDK: installed by tests/run_beam.sh"
            elif word == "mpirun" and mpi_missing:
                reason = mpi_missing
            if reason:
                skipped.append(f"{where(n)}: skipped ({reason}): {one_line}")
                continue
            run_env = mpi_env(env) if word == "mpirun" else env
            # in a session of its own, so that a timeout ends the command with everything it started
            p = subprocess.Popen(["bash", "-o", "pipefail", "-c", text], cwd=d, env=run_env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            try:
                out, err = p.communicate(timeout=TIMEOUT)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, err = p.communicate()
                rc = None
            ran += 1
            out, err = (b.decode("utf-8", "replace").replace(d + os.sep, "").splitlines() for b in (out, err))
            problem = None
            if rc is None:
                problem = f"did not end within {TIMEOUT} s"
            elif rc < 0 or rc > 128:
                problem = f"crashed (signal {-rc if rc < 0 else rc - 128})"
            elif rc == 1 and not shown_error(shown):
                problem = "exit status 1, but the README does not show an error report"
            elif rc not in (0, 1):
                problem = f"exit status {rc}"
            if not shown and has_comment(text):
                same, got = True, out + err      # its output is described by the comment, not shown
            else:
                same, got = interleaved(shown, out, err)
            if problem or not same:
                msg = f"{where(n)}: {problem or 'prints other lines than the README shows'}\n  $ " + \
                      text.replace("\n", "\n  ") + "\n"
                if not same:
                    msg += diff(n, shown, got)
                elif problem and got:
                    msg += "".join("  | " + g + "\n" for g in got[-20:])
                failures.append(msg)
    finally:
        if keep:
            print(f"check_readme: scratch directory kept: {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)
    return failures, skipped, ran, time.monotonic() - t0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin", help="the directory of the fedvm and fedplan binaries under test")
    ap.add_argument("--beam", metavar="DIR", help="also run the Beam pipeline's node lines, with DIR/node_modules")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--readme", metavar="FILE", help="check FILE instead of README.md (the paths stay the repository's)")
    args = ap.parse_args(argv)
    if args.readme:
        global README
        README = os.path.abspath(args.readme)
    bindir = os.path.abspath(args.bin)
    for tool in ("fedvm", "fedplan"):
        if not os.access(os.path.join(bindir, tool), os.X_OK):
            print(f"check_readme: {os.path.join(args.bin, tool)} is not an executable; build it first (make)",
                  file=sys.stderr)
            return 2
    beam = os.path.abspath(args.beam) if args.beam else None
    try:
        failures, skipped, ran, secs = run_all(bindir, beam, args.keep)
    except ValueError as e:
        print(f"check_readme: {e}", file=sys.stderr)
        return 1
    for s in skipped:
        print(f"check_readme: {s}")
    if failures:
        print(f"check_readme: {len(failures)} of {ran} commands failed:", file=sys.stderr)
        for f in failures:
            print(f, file=sys.stderr)
        return 1
    print(f"check_readme: ok ({ran} commands of README.md ran as shown, {len(skipped)} skipped; {secs:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
