/* sweep_files.c - what a sweep's runs read: their programs loaded with their overrides, their sessions' files and the data they share, behind the runtime's sweep_io.h; and fvm_sweep, which wires them to the pool. */
#include <stdlib.h>

#include "../vm/runtime/sweep_io.h"
#include "../vm/transform/passes.h"
#include "data_bind.h"
#include "ir_read.h"

/* Run k's program: loaded with the sweep's and the run's overrides, and checked. */
static fvm_status load(const fvm_sweep_opts *o, int k, fvm_program **p, fvm_diag *d)
{
    const fvm_sweep_run *r = &o->runs[k];
    fvm_load_opts lo = o->load ? *o->load : (fvm_load_opts){0};
    int n = lo.nsets + r->nsets;
    const char **sets = calloc((size_t)n + 1, sizeof *sets);
    if (!sets)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    for (int i = 0; i < lo.nsets; i++)
        sets[i] = lo.sets[i];
    for (int i = 0; i < r->nsets; i++)
        sets[lo.nsets + i] = r->sets[i];
    lo.sets = sets;
    lo.nsets = n;
    fvm_status s = fvm_program_load_opts(o->program, NULL, 0, NULL, &lo, p, d);
    free(sets);
    if (*p) {
        fvm_status c = fvm_compile(*p, d);
        if (!s)
            s = c;
    }
    return s;
}

static const fvm_sweep_io_i files_iface = {
    .load = load,
    .session_new = fvm_session_new,
    .cache_new = fvm_data_cache_new,
    .cache_free = fvm_data_cache_free,
};

fvm_status fvm_sweep(const fvm_sweep_opts *o, fvm_diag *d)
{
    return fvm_sweep_io(o, &files_iface, d);
}
