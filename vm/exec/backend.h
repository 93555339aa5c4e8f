/* backend.h - where work over clients runs: the backend interface and its constructors. */
#ifndef FVM_BACKEND_H
#define FVM_BACKEND_H

#include "../ir/ir.h"
#include "../ir/value.h"

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
    /* Optional (NULL: s is returned as it is). For a distributed backend,
     * whose processes all run the same program: every process calls it at
     * the same point with its own status s and its errors in d, and all of
     * them return the status of the lowest-numbered failing process, with
     * that process's errors in d (in place of their own). Callers use it
     * after work that can fail in one process only (a file only process 0
     * writes, a file each process reads), so that all stop at the same
     * point instead of waiting for one another. */
    fvm_status (*agree)(fvm_backend *b, fvm_status s, fvm_diag *d);
    /* Required. Frees the backend. */
    void (*free)(fvm_backend *b);
};

struct fvm_backend {
    const struct fvm_backend_i *iface;
    void *impl;
    int workers; /* tasks it runs at once (1 for seq): the interpreter cuts work finer when
                    there are fewer natural tasks than workers */
    int rank; /* this process's number among a distributed backend's processes, 0
                    otherwise: only process 0 prints and writes files */
};

/* The sequential reference backend: tasks in order, on the calling thread.
 * NULL when out of memory. */
FVM_API fvm_backend *fvm_backend_seq(void);

/* A pool of 'threads' worker threads (0: one per online core); tasks are
 * handed out in increasing order as workers become free. NULL when out of
 * memory. */
FVM_API fvm_backend *fvm_backend_threads(int threads);

/* Open MPI's processes (the ranks of mpirun, or one process started
 * alone). Every rank runs the whole program: the server part is replicated
 * (the same values in every rank, as execution is deterministic), and each
 * run of n tasks is cut into one contiguous range per rank, rank r running
 * tasks [n*r/P, n*(r+1)/P); each rank reads only its own clients' data.
 * Every rank then sends its tasks' results to every other (wire.h, MPI
 * broadcasts), so each holds every result and merges them in the fixed
 * order of aggregate.h: the bits are those of seq. A failing task makes the
 * run fail on every rank with the errors of the lowest-numbered failing
 * task. A run started inside a task runs in its rank alone. workers is the
 * number of ranks, rank this process's.
 * MPI is initialised here when it is not yet, and then finalised by
 * fvm_backend_free (MPI allows that once per process: make one such
 * backend per process). FVM_ERR_USAGE when this build of fedvm has no MPI.
 * A lost rank: with more than one rank, rank 0 handles SIGTERM (what mpirun
 * sends the survivors when a rank dies). Received while rank 0 waits for the
 * others to finish their tasks, it makes the run fail at once with an error
 * naming the ranks not heard from and their hosts ("lost rank 3 (host h1):
 * ..."); every later run and agreement then fails without calling MPI, and
 * fvm_backend_free does not finalise it. Received anywhere else, SIGTERM
 * ends the process as it would without fedvm. */
FVM_API fvm_status fvm_backend_mpi(fvm_backend **out, fvm_diag *d);

/* b's agree, or s when it has none. */
static inline fvm_status fvm_backend_agree(fvm_backend *b, fvm_status s, fvm_diag *d)
{
    return b->iface->agree ? b->iface->agree(b, s, d) : s;
}

static inline void fvm_backend_free(fvm_backend *b)
{
    if (b)
        b->iface->free(b);
}

#endif
