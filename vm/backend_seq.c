/* backend_seq.c - the sequential reference backend: clients one after another, in order. */
#include <stdlib.h>

#include "exec.h"

static fvm_status seq_map(fvm_backend *b, fvm_ctx *x, const fvm_func *fn, int nargs, fvm_value *const *args,
                          const bool *per_client, int64_t n, fvm_value **out)
{
    fvm_argv av;
    fvm_value **argv = fvm_argv_init(&av, nargs);
    if (!argv)
        return fvm_nomem(x);
    fvm_status s = FVM_OK;
    for (int64_t i = 0; i < n && s == FVM_OK; i++) {
        for (int k = 0; k < nargs && s == FVM_OK; k++) {
            if (per_client[k])
                s = fvm_clients_get(args[k], i, &argv[k], x->d); /* released below */
            else
                argv[k] = args[k];
        }
        if (s == FVM_OK)
            s = fvm_exec_call(x, fn, argv, &out[i]);
        for (int k = 0; k < nargs; k++)
            if (per_client[k]) {
                fvm_value_release(argv[k]);
                argv[k] = NULL;
            }
    }
    if (s)
        for (int64_t i = 0; i < n; i++) {
            fvm_value_release(out[i]);
            out[i] = NULL;
        }
    fvm_argv_free(&av);
    return s;
}

static void seq_free(fvm_backend *b)
{
    free(b);
}

static const struct fvm_backend_i seq_iface = {
    .name = "seq",
    .map = seq_map,
    .free = seq_free,
};

fvm_backend *fvm_backend_seq(void)
{
    fvm_backend *b = calloc(1, sizeof *b);
    if (b)
        b->iface = &seq_iface;
    return b;
}
