#!/usr/bin/env bash
# check_api.sh - the library's public boundary (docs/API.md): what libfedvm.so exports is exactly the FVM_API
# functions and tables of the public headers, all fvm_-prefixed, and the public headers are exactly vm/fedvm.h
# and what it includes.
#
# usage: tests/check_api.sh LIBFEDVM_SO PUBLIC_HEADER...   (the Makefile's PUBLIC_H)
# Exit status: 0 the boundary holds, 1 it does not, 2 usage error.
set -u
export LC_ALL=C
if [ $# -lt 2 ] || [ ! -f "$1" ]; then
    echo "usage: $0 LIBFEDVM_SO PUBLIC_HEADER..." >&2
    exit 2
fi
lib=$1
shift
cd "$(dirname "$0")/.." || exit 2
T=$(mktemp -d) || exit 2
trap 'rm -rf "$T"' EXIT
bad=0
fail() {
    echo "check_api: $*"
    bad=$((bad + 1))
}

# 1. The public headers: vm/fedvm.h and everything it includes, no more.
python3 - "$@" > "$T/closure" <<'EOF' || exit 2
import os, re, sys
seen = []
def walk(p):
    p = os.path.normpath(p)
    if p in seen or not os.path.exists(p):
        return
    seen.append(p)
    for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', open(p).read(), re.M):
        walk(os.path.join(os.path.dirname(p), m.group(1)))
walk("vm/fedvm.h")
print("\n".join(sorted(seen)))
EOF
printf '%s\n' "$@" | sort > "$T/listed"
while read -r h; do fail "$h is included by vm/fedvm.h but not listed in PUBLIC_H (Makefile)"; done \
    < <(comm -23 "$T/closure" "$T/listed")
while read -r h; do fail "$h is listed in PUBLIC_H but vm/fedvm.h does not include it"; done \
    < <(comm -13 "$T/closure" "$T/listed")

# 2. FVM_API appears in public headers only.
while read -r f; do
    grep -qxF "$f" "$T/listed" || fail "$f marks declarations FVM_API but is not a public header"
done < <(grep -rl --include='*.h' 'FVM_API [a-z]' vm format | sort)

# 3. Every function and table a public header declares is marked FVM_API (one
# that is not would be hidden from the library's users).
for h in "$@"; do
    case $h in *.h) ;; *) continue ;; esac
    python3 - "$h" <<'PY' || bad=$((bad + 1))
import re, sys
path = sys.argv[1]
text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), open(path).read(), flags=re.S)
depth, bad = 0, 0
for n, line in enumerate(text.split("\n"), 1):
    decl = re.match(r"(extern\s+)?(const\s+)?(struct\s+|enum\s+)?\w[\w\s*]*?\b(fvm_\w+)\s*[(\[]", line)
    if depth == 0 and decl and not re.match(r"(FVM_API|static|typedef|#)", line):
        print("check_api: %s:%d declares %s without FVM_API" % (path, n, decl.group(4)))
        bad += 1
    depth += line.count("{") - line.count("}")
sys.exit(1 if bad else 0)
PY
done

# 4. The names the public headers mark, and the names the library exports.
for h in "$@"; do
    case $h in *.h) cat "$h" ;; esac
done | python3 -c '
import re, sys
text = re.sub(r"/\*.*?\*/", "", sys.stdin.read(), flags=re.S)
for m in re.finditer(r"FVM_API\s+([^;{]*?)\b(fvm_\w+)\s*[\(\[;]", text):
    print(m.group(2))
' | sort -u > "$T/declared"
nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRV]/ {print $3}' | sort -u > "$T/exported"
grep -v '^fvm_' "$T/exported" | while read -r s; do fail "libfedvm.so exports $s, which is not fvm_-prefixed"; done
while read -r s; do fail "$s is marked FVM_API but libfedvm.so does not export it"; done \
    < <(comm -23 "$T/declared" "$T/exported")
while read -r s; do fail "libfedvm.so exports $s, which no public header marks FVM_API"; done \
    < <(comm -13 "$T/declared" "$T/exported" | grep '^fvm_')

if [ $bad -gt 0 ]; then
    echo "check_api: $bad problem(s)"
    exit 1
fi
echo "check_api: ok ($(wc -l < "$T/listed") public headers, $(wc -l < "$T/exported") exported symbols, all fvm_ and all marked FVM_API)"
