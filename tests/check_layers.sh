#!/usr/bin/env bash
# check_layers.sh - the library's layers include only the layers beneath them (docs/ARCHITECTURE.md).
#
# usage: tests/check_layers.sh
#
# Layers, bottom up; a file may include headers of its own layer and of the
# layers listed for it. tools/ may include anything (the public headers, in
# time); tests/ and bench/ are not checked.
# Exit status: 0 every include points down, 1 some point up or sideways.
set -u
cd "$(dirname "$0")/.." || exit 2

declare -A allowed=(
    [vm/core]=""
    [vm/ir]="vm/core"
    [vm/kernels]="vm/core vm/ir"
    [format]="vm/core vm/ir"
    [vm/transform]="vm/core vm/ir format"
    [vm/exec]="vm/core vm/ir vm/kernels format vm/transform"
    [vm/runtime]="vm/core vm/ir vm/kernels vm/transform format vm/exec"
    [vm]="vm/core vm/ir vm/kernels vm/transform format vm/exec vm/runtime"
)

# Includes that still point the wrong way, each to be removed by the step
# of the redesign that moves its code ("FILE -> HEADER").
known=(
    "vm/transform/plan_xdev.c -> vm/exec/aggregate.h"
    "vm/ir/check.c -> vm/transform/autodiff.h"
    "vm/ir/check.c -> vm/transform/fuse_plan.h"
    "vm/ir/check.c -> vm/transform/phases.h"
    "vm/ir/rules.c -> format/value_doc.h"
    "vm/ir/rules.c -> vm/transform/autodiff.h"
    "vm/ir/rules_nn.c -> vm/kernels/kernels_nn.h"
    "format/bind.c -> vm/runtime/sample.h"
    "format/plan.c -> vm/transform/plan_form.h"
    "format/xdev.c -> vm/exec/aggregate.h"
    "format/xdev.h -> vm/exec/interp.h"
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
            case " ${allowed[$layer]} " in *" $tdir "*) continue ;; esac
            case $tdir in build/* | build) continue ;; esac # generated headers
            ok=0
            for k in "${known[@]}"; do
                [ "$k" = "$f -> $target" ] && ok=1
            done
            if [ $ok -eq 0 ]; then
                echo "check_layers: $f includes $target: $layer may include only ${allowed[$layer]:-its own files}"
                bad=$((bad + 1))
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
done
if [ $bad -gt 0 ]; then
    echo "check_layers: $bad include(s) point up or sideways"
    exit 1
fi
echo "check_layers: ok ($checked files; ${#known[@]} known exceptions left)"
