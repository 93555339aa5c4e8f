#!/usr/bin/env bash
# fresh_root.sh - the README's set-up on a new Debian 12 machine, for real: makes a minimal
# Debian 12 root with debootstrap, copies the repository into it (its committed and untracked
# files, as a clone would have them, and ../shared/fixtures beside it when present), installs
# nothing but make, and runs there, as root, on the FIRST try:
#   make demo      (installs the Debian packages it needs, builds, trains, checks accuracy)
#   make test      (unless --demo-only)
#   make install   and a program linked with -lfedvm that must run without LD_LIBRARY_PATH
#
# usage: tests/fresh_root.sh [--demo-only] [DIR]      (as root; DIR: build/fresh-root)
# Needs debootstrap (installed when missing) and the Debian package registry. The root is
# made anew each time; /proc, /sys and /dev are mounted into it while it runs and unmounted
# on exit. About 10 minutes with --demo-only, 15 with make test, on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
demo_only=no
if [ "${1-}" = --demo-only ]; then demo_only=yes; shift; fi
root=${1:-$repo/build/fresh-root}
if [ "$(id -u)" -ne 0 ]; then
    echo "fresh_root: needs root (debootstrap and chroot)" >&2
    exit 2
fi
if ! command -v debootstrap >/dev/null; then
    apt-get install -y --no-install-recommends debootstrap || { apt-get update && apt-get install -y --no-install-recommends debootstrap; }
fi
mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}

mounted=()
cleanup() {
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
rm -rf "$root"
mkdir -p "$root"
echo "fresh_root: debootstrap bookworm (minbase) into $root from $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.debootstrap.log" 2>&1 ||
    { tail -20 "$root.debootstrap.log"; exit 1; }
cp /etc/resolv.conf "$root/etc/resolv.conf"
for m in proc sys dev dev/pts; do
    mkdir -p "$root/$m"
    mount --bind "/$m" "$root/$m"
    mounted+=("$root/$m")
done
mkdir -p "$root/work/fedvm" "$root/work/shared"
git -C "$repo" ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -C "$repo" -T - -cf - 2>/dev/null | tar -C "$root/work/fedvm" -xf -
if [ -d "$repo/../shared/fixtures" ]; then cp -r "$repo/../shared/fixtures" "$root/work/shared/"; fi

run() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive bash -c "$1"; }
echo "fresh_root: apt-get update; apt-get install make (a new machine has make)"
run "apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null"
echo "fresh_root: make demo"
run "cd /work/fedvm && make demo"
if [ "$demo_only" = no ]; then
    echo "fresh_root: make test"
    run "cd /work/fedvm && make -j\$(nproc) test"
fi
echo "fresh_root: make install, then a program linked with -lfedvm"
run 'cd /work/fedvm && make -s install >/dev/null && cat > /tmp/use.c <<C
#include <fedvm/vm/fedvm.h>
#include <stdio.h>
int main(void) { fvm_diag d = {0}; fvm_diag_clear(&d); puts("ok"); return 0; }
C
cc /tmp/use.c -o /tmp/use $(pkg-config --cflags --libs fedvm) && [ "$(/tmp/use)" = ok ]'
echo "fresh_root: ok (make demo$([ "$demo_only" = no ] && echo ", make test") and make install, first try, in a new Debian 12 root)"
