#!/usr/bin/env bash
# check_layers.sh - the library's layers include only the layers beneath them (docs/ARCHITECTURE.md).
#
# usage: tests/check_layers.sh [BUILD]
#
# With BUILD (the build directory, 'build'), the objects are checked too:
# a function or table a layer's object uses must be defined in its own
# layer or one it may include (nm), so that no call reaches up through a
# declaration put in a lower layer's header.
# Layers, bottom up; a file may include headers of its own layer and of the
# layers listed for it. format/ sits above the vm/ layers: it turns bytes into
# values and back for them, and wires what they define as interfaces (a
# session's files, a sweep's programs) or as computations on values (a
# cross-device round's) to its readers and writers. tools/ may include
# anything (the public headers, in time); tests/ and bench/ are not checked.
# Exit status: 0 every include points down, 1 some point up or sideways.
set -u
cd "$(dirname "$0")/.." || exit 2

declare -A allowed=(
    [vm/core]=""
    [vm/ir]="vm/core"
    [vm/kernels]="vm/core vm/ir"
    [vm/transform]="vm/core vm/ir"
    [vm/exec]="vm/core vm/ir vm/kernels vm/transform"
    [vm/runtime]="vm/core vm/ir vm/kernels vm/transform vm/exec"
    [format]="vm/core vm/ir vm/kernels vm/transform vm/exec vm/runtime"
    [vm]="vm/core vm/ir vm/kernels vm/transform vm/exec vm/runtime format"
)

# The files of vm/ still allowed format/ (their includes and their objects'
# symbols), each with the reason; docs/ARCHITECTURE.md lists them too. Every
# other file of vm/ uses no format/ header and no format/ symbol.
declare -A exception=(
    # The round forms' lowering builds its plan documents with format/'s
    # writers (doc_io.h, ir_read.h, ir_write.h, safetensors.h, xdev_impl.h)
    # rather than as data that format/ then writes.
    [vm/transform/plan_flow.c]="format"
    [vm/transform/plan_xdev.c]="format"
)

bad=0
checked=0
for layer in "${!allowed[@]}"; do
    for f in "$layer"/*.c "$layer"/*.h "$layer"/*.def; do
        [ -e "$f" ] || continue
        checked=$((checked + 1))
        while IFS= read -r inc; do
            target=$(realpath -m --relative-to=. "$(dirname "$f")/$inc")
            tdir=$(dirname "$target")
            [ "$tdir" = "$layer" ] && continue
            case " ${allowed[$layer]} ${exception[$f]-} " in *" $tdir "*) continue ;; esac
            case $tdir in build/* | build) continue ;; esac # generated headers
            echo "check_layers: $f includes $target: $layer may include only ${allowed[$layer]:-its own files}"
            bad=$((bad + 1))
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
done
# The objects: every undefined symbol of a layer's object that another
# layer's object defines must come from an allowed layer. Only the objects of
# sources that exist count (a build tree may keep those of moved files).
if [ $# -ge 1 ] && [ -d "$1" ]; then
    build=$1
    declare -A home=()
    for layer in "${!allowed[@]}"; do
        for o in "$build/$layer"/*.o; do
            src=${o#"$build"/}
            [ -e "$o" ] && [ -e "${src%.o}.c" ] || continue # objects of removed sources are stale
            while read -r sym; do home[$sym]=$layer; done < <(nm --defined-only -g "$o" | awk '{print $3}')
        done
    done
    for layer in "${!allowed[@]}"; do
        for o in "$build/$layer"/*.o; do
            src=${o#"$build"/}
            [ -e "$o" ] && [ -e "${src%.o}.c" ] || continue # objects of removed sources are stale
            checked=$((checked + 1))
            while read -r sym; do
                h=${home[$sym]-}
                [ -z "$h" ] || [ "$h" = "$layer" ] && continue
                case " ${allowed[$layer]} ${exception[${src%.o}.c]-} " in *" $h "*) continue ;; esac
                echo "check_layers: $o uses $sym of $h: $layer may use only ${allowed[$layer]:-its own files}"
                bad=$((bad + 1))
            done < <(nm -u "$o" | awk '{print $2}')
        done
    done
fi
if [ $bad -gt 0 ]; then
    echo "check_layers: $bad include(s) or use(s) point up or sideways"
    exit 1
fi
echo "check_layers: ok ($checked files and objects)"
