#!/usr/bin/env bash
# run_install.sh - make install into a scratch DESTDIR, build a program against the installed
# library with pkg-config (static and shared), run it, then make uninstall leaves nothing behind.
set -eu
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
make -s install DESTDIR="$T" PREFIX=/usr >/dev/null
root="$T/usr"
for f in bin/fedvm bin/fedplan lib/libfedvm.a lib/libfedvm.so lib/libfedvm.so.0 lib/pkgconfig/fedvm.pc include/fedvm/vm/fedvm.h; do
    [ -e "$root/$f" ] || { echo "install: missing $f"; exit 1; }
done
for f in include/fedvm/vm/exec/exec.h include/fedvm/vm/kernels/kernels_impl.h include/fedvm/vm/kernels/kernels_gemm_tile.h include/fedvm/vm/exec/fuse.h include/fedvm/vm/transform/fuse_plan.h include/fedvm/vm/kernels/kernels_scalar.h include/fedvm/format/xdev_impl.h include/fedvm/format/dataset_impl.h; do
    [ ! -e "$root/$f" ] || { echo "install: private header $f was installed"; exit 1; }
done
cat > "$T/use.c" <<'C'
#include <fedvm/vm/fedvm.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    const char *src = "{\"fedvm\": 1, \"functions\": {\"main\": {\"params\": {\"x\": \"{f32[]}@CLIENTS\"},"
                      " \"body\": [[\"m\", \"federated_mean\", \"x\"]], \"result\": \"m\"}}}";
    fvm_diag d = {0};
    fvm_program *p = NULL;
    if (fvm_program_load_text("use.json", src, strlen(src), &p, &d) != FVM_OK || fvm_check(p, &d) != FVM_OK)
        return 1;
    printf("ok\n");
    fvm_program_free(p);
    fvm_diag_clear(&d);
    return 0;
}
C
export PKG_CONFIG_SYSROOT_DIR="$T" PKG_CONFIG_PATH="$root/lib/pkgconfig"
cflags=$(pkg-config --cflags fedvm)
# libfedvm.a, with its dependencies linked as shared libraries
cc $cflags "$T/use.c" -o "$T/use-static" "$root/lib/libfedvm.a" $(pkg-config --libs jansson yaml-0.1 sqlite3 zlib msgpack libprotobuf-c openblas) -lm -lpthread
[ "$("$T/use-static")" = ok ] || { echo "install: static link failed to run"; exit 1; }
cc $cflags "$T/use.c" -o "$T/use-shared" -L"$root/lib" -lfedvm
[ "$(LD_LIBRARY_PATH="$root/lib" "$T/use-shared")" = ok ] || { echo "install: shared link failed to run"; exit 1; }
make -s uninstall DESTDIR="$T" PREFIX=/usr >/dev/null
left=$(find "$root" -type f | wc -l)
[ "$left" -eq 0 ] || { echo "uninstall left $left files"; find "$root" -type f; exit 1; }
echo "install: ok"
