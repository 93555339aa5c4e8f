#!/usr/bin/env bash
# run_install.sh - make install into a scratch DESTDIR: the public headers only, the commands finding the
# installed library, and docs/API.md's example program built against <fedvm/fedvm.h> with pkg-config (static and
# shared) and run on a small synthetic dataset, the Python package loading the installed library; then make
# uninstall leaves nothing behind.
set -eu
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
make -s install DESTDIR="$T" PREFIX=/usr >/dev/null
root="$T/usr"
for f in bin/fedvm bin/fedplan lib/libfedvm.a lib/libfedvm.so lib/libfedvm.so.0 lib/pkgconfig/fedvm.pc \
    include/fedvm/fedvm.h include/fedvm/vm/fedvm.h; do
    [ -e "$root/$f" ] || { echo "install: missing $f"; exit 1; }
done
# only the public headers: those vm/fedvm.h includes (tests/check_api.sh holds the list to that)
public=$(make -s -p -n 2>/dev/null | sed -n 's/^PUBLIC_H := //p')
for h in $(cd "$root/include/fedvm" && find . -type f ! -name fedvm.h -o -type f -path './vm/fedvm.h' | sed 's|^\./||'); do
    case " $public " in *" $h "*) ;; *) echo "install: $h is installed but is not a public header"; exit 1 ;; esac
done
for h in vm/exec/exec.h vm/kernels/provider.h vm/kernels/kernels.h vm/transform/autodiff.h format/xdev_impl.h \
    format/dataset_impl.h; do
    [ ! -e "$root/include/fedvm/$h" ] || { echo "install: internal header $h was installed"; exit 1; }
done
# the installed commands run with the installed library (lib/ beside bin/)
LD_LIBRARY_PATH= "$root/bin/fedvm" --version | grep -q '^fedvm ' || { echo "install: fedvm does not run"; exit 1; }
ldd "$root/bin/fedvm" | grep -qF "$root/bin/../lib/libfedvm.so.0" ||
    { echo "install: fedvm does not find the installed libfedvm.so.0"; ldd "$root/bin/fedvm"; exit 1; }
# docs/API.md's example, as it is written there
sed -n '/^## A session, from C/,/^```$/p' docs/API.md | sed -n '/^```c$/,/^```$/p' | sed '1d;$d' > "$T/example.c"
grep -q fvm_session_run "$T/example.c" || { echo "install: no example in docs/API.md"; exit 1; }
{
    echo '#include <stdio.h>'
    sed -n '/^#include/p' "$T/example.c"
    echo 'int main(void)'
    echo '{'
    sed '/^#include/d' "$T/example.c"
    echo '    return 0;'
    echo '}'
} > "$T/use.c"
"$root/bin/fedvm" data synthetic --kind fedprox --clients 10 --seed 1 -o "$T/syn.sqlite" >/dev/null
mkdir -p "$T/programs" && cp -r programs/fedavg.json programs/lib programs/models "$T/programs/"
export PKG_CONFIG_SYSROOT_DIR="$T" PKG_CONFIG_PATH="$root/lib/pkgconfig"
cflags=$(pkg-config --cflags fedvm)
# libfedvm.a, with its dependencies linked as shared libraries
cc $cflags "$T/use.c" -o "$T/use-static" "$root/lib/libfedvm.a" \
    $(pkg-config --libs jansson yaml-0.1 sqlite3 zlib libdeflate msgpack libprotobuf-c nettle openblas) $(pkg-config --libs ompi-c 2>/dev/null) -lm -lpthread
cc $cflags "$T/use.c" -o "$T/use-shared" -L"$root/lib" -lfedvm
for prog in use-static use-shared; do
    out=$(cd "$T" && LD_LIBRARY_PATH="$root/lib" "./$prog")
    case $out in "loss "[0-9]*) ;; *) echo "install: $prog printed '$out'"; exit 1 ;; esac
done
# the Python package, where the system python3 looks under the prefix, finds the installed library and runs
site=$(cd "$root" && ls -d lib/python3*/dist-packages/fedvm 2>/dev/null | head -1)
[ -n "$site" ] && [ -f "$root/$site/__init__.py" ] || { echo "install: no Python package under $root/lib"; exit 1; }
py=$(cd "$T" && env -u FEDVM_LIB PYTHONPATH="$root/${site%/fedvm}" /usr/bin/python3 -c '
import os, sys, fedvm as fv, fedvm.algorithms
print(os.path.realpath(fv.library_path) == os.path.realpath(sys.argv[1]), fv.load("programs/fedavg.json").check().functions[0])
' "$root/lib/libfedvm.so.0") || { echo "install: the installed Python package does not load"; exit 1; }
[ "$py" = "True initialize" ] || { echo "install: the Python package printed '$py'"; exit 1; }
make -s uninstall DESTDIR="$T" PREFIX=/usr >/dev/null
left=$(find "$root" -type f | wc -l)
[ "$left" -eq 0 ] || { echo "uninstall left $left files"; find "$root" -type f; exit 1; }
echo "install: ok (public headers only; docs/API.md's example built static and shared, and ran; the Python package)"
