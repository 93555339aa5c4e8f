/* xdev_compile.c - a cross-device plan's programs, as read, made ready to run by the passes after checking (see xdev.h). */
#include "xdev.h"

#include "../vm/transform/passes.h"
#include "xdev_impl.h"

fvm_status fvm_xdev_compile(fvm_xdev_plan *plan, fvm_diag *d)
{
    fvm_status s = plan->ph.client ? fvm_passes_run(plan->ph.client, d) : FVM_OK;
    if (s == FVM_OK && plan->ph.server)
        s = fvm_passes_run(plan->ph.server, d);
    return s;
}
