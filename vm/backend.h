/* backend.h - where work over clients runs: the backend interface and its constructors. */
#ifndef FVM_BACKEND_H
#define FVM_BACKEND_H

#include "ir.h"
#include "value.h"

typedef struct fvm_backend fvm_backend;
typedef struct fvm_ctx fvm_ctx;

/* The interpreter hands work over clients to a backend. Results must not
 * depend on the backend: every backend computes the same values in the same
 * arithmetic order (aggregations use the fixed reduction tree of aggregate.h). */
struct fvm_backend_i {
    const char *name;
    /* Required. Runs fn once per client i in [0, n): out[i] = fn(args_i),
     * where args_i[k] is member i of args[k] when per_client[k] (a CLIENTS
     * list) and args[k] itself otherwise. args are borrowed; out[i] are new
     * references. On error every out[i] is NULL and the error is in x. */
    fvm_status (*map)(fvm_backend *b, fvm_ctx *x, const fvm_func *fn, int nargs, fvm_value *const *args,
                      const bool *per_client, int64_t n, fvm_value **out);
    /* Required. Frees the backend. */
    void (*free)(fvm_backend *b);
};

struct fvm_backend {
    const struct fvm_backend_i *iface;
    void *impl;
};

/* The sequential reference backend. NULL when out of memory. */
fvm_backend *fvm_backend_seq(void);

static inline void fvm_backend_free(fvm_backend *b)
{
    if (b)
        b->iface->free(b);
}

#endif
