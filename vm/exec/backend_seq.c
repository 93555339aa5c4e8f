/* backend_seq.c - the sequential reference backend: tasks one after another, in order. */
#include <stdlib.h>

#include "exec.h"

static fvm_status seq_run(fvm_backend *b, fvm_ctx *x, int64_t n, fvm_task_fn task, void *u, fvm_value **out)
{
    (void)b;
    fvm_status s = FVM_OK;
    for (int64_t i = 0; i < n && s == FVM_OK; i++)
        s = task(x, u, i, &out[i]);
    if (s)
        for (int64_t i = 0; i < n; i++) {
            fvm_value_release(out[i]);
            out[i] = NULL;
        }
    return s;
}

static void seq_free(fvm_backend *b)
{
    free(b);
}

static const struct fvm_backend_i seq_iface = {
    .name = "seq",
    .run = seq_run,
    .free = seq_free,
};

fvm_backend *fvm_backend_seq(void)
{
    fvm_backend *b = calloc(1, sizeof *b);
    if (b) {
        b->iface = &seq_iface;
        b->workers = 1;
    }
    return b;
}
