/* backend.h - where work over clients runs: the backend interface and its constructors. */
#ifndef FVM_BACKEND_H
#define FVM_BACKEND_H

#include "ir.h"
#include "value.h"

typedef struct fvm_backend fvm_backend;
typedef struct fvm_ctx fvm_ctx;

/* One unit of work: task number i of a run, on the worker whose context is
 * x; *out is its result (a new reference; NULL is allowed). */
typedef fvm_status (*fvm_task_fn)(fvm_ctx *x, void *u, int64_t i, fvm_value **out);

/* The interpreter hands work over clients to a backend: a federated_map's
 * clients, or the blocks of clients of a fused segment (phases.h). Results
 * must not depend on the backend: tasks are pure and every backend returns
 * each task's own result, so values are combined in one fixed order
 * (aggregate.h) wherever they were computed. */
struct fvm_backend_i {
    const char *name;
    /* Required. Runs task(x_w, u, i, &out[i]) once for every i in [0, n),
     * in any order, on any of its workers (x_w: a context of the worker's
     * own, for the same VM, whose errors are its own). Tasks only read
     * shared values. On success every out[i] is set (in every process of a
     * distributed backend). On error every out[i] is NULL and x's diag holds
     * the errors of the lowest-numbered failing task, so the report does not
     * depend on timing either. */
    fvm_status (*run)(fvm_backend *b, fvm_ctx *x, int64_t n, fvm_task_fn task, void *u, fvm_value **out);
    /* Required. Frees the backend. */
    void (*free)(fvm_backend *b);
};

struct fvm_backend {
    const struct fvm_backend_i *iface;
    void *impl;
    int workers; /* tasks it runs at once (1 for seq): the interpreter cuts work finer when
                    there are fewer natural tasks than workers */
    bool distributed; /* tasks run in other processes: keep tasks coarse */
};

/* The sequential reference backend: tasks in order, on the calling thread.
 * NULL when out of memory. */
fvm_backend *fvm_backend_seq(void);

/* A pool of 'threads' worker threads (0: one per online core); tasks are
 * handed out in increasing order as workers become free. NULL when out of
 * memory. */
fvm_backend *fvm_backend_threads(int threads);

static inline void fvm_backend_free(fvm_backend *b)
{
    if (b)
        b->iface->free(b);
}

#endif
