/* backend_mpi.c - Open MPI's ranks: each runs a contiguous share of the tasks, results broadcast to all
 * (backend.h). The only file of fedvm that calls MPI; without MPI the constructor says so. */
#include <stdlib.h>

#include "exec.h"

#ifndef FVM_HAVE_MPI

fvm_status fvm_backend_mpi(fvm_backend **out, fvm_diag *d)
{
    *out = NULL;
    return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                        "this fedvm was built without MPI: install Open MPI (make deps) and rebuild (make)");
}

#else

#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "wire.h"

enum { HOST = 64 }; /* bytes of a rank's host name kept (with its NUL) */

typedef struct mpi {
    int rank, size;
    bool finalize; /* MPI was initialised here */
    bool in_task; /* a task of a run is running in this process */
    bool lost; /* a rank was lost: no more MPI calls; every run and agreement fails */
    char *hosts; /* rank r's host name at hosts + r * HOST */
} mpi;

/* A lost rank. When a rank dies, mpirun stops every other rank with SIGTERM
 * (then SIGKILL a second later, Open MPI's odls_base_sigkill_timeout). While
 * rank 0 waits for the others to finish their tasks (collect_failed), a
 * SIGTERM only sets stop_asked: rank 0 then names the ranks it was still
 * waiting for, and its run fails with that error at once, without another MPI
 * call. Anywhere else (and on every other rank) SIGTERM ends the process as
 * it would without fedvm. */
static volatile sig_atomic_t waiting, stop_asked;

static void on_sigterm(int sig)
{
    if (waiting) {
        stop_asked = 1;
        return;
    }
    signal(sig, SIG_DFL); /* delivered again when the handler returns */
    raise(sig);
}

/* The lowest of every rank's *failed into *lowest (an MPI_MIN all-reduce):
 * the others send theirs to rank 0, which polls for them, and broadcasts the
 * lowest. On a SIGTERM while rank 0 waits, it fails naming the ranks not heard
 * from. */
static fvm_status collect_failed(mpi *m, int64_t failed, int64_t *lowest, fvm_diag *d)
{
    if (m->rank != 0) {
        MPI_Send(&failed, 1, MPI_INT64_T, 0, 0, MPI_COMM_WORLD);
        MPI_Bcast(lowest, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
        return FVM_OK;
    }
    int64_t *got = malloc((size_t)m->size * sizeof *got);
    MPI_Request *req = malloc((size_t)m->size * sizeof *req);
    if (!got || !req)
        MPI_Abort(MPI_COMM_WORLD, 1); /* cannot take part */
    req[0] = MPI_REQUEST_NULL;
    got[0] = failed;
    for (int r = 1; r < m->size; r++)
        MPI_Irecv(&got[r], 1, MPI_INT64_T, r, 0, MPI_COMM_WORLD, &req[r]);
    waiting = 1;
    for (int spins = 0, done = 0; !stop_asked;) {
        MPI_Testall(m->size, req, &done, MPI_STATUSES_IGNORE);
        if (done)
            break;
        if (++spins > 1000) /* waited a while: poll every 100 us */
            nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
    }
    waiting = 0;
    fvm_status s = FVM_OK;
    if (stop_asked) {
        m->lost = true;
        char list[256] = "";
        int nlost = 0, first = -1;
        for (int r = 1; r < m->size; r++) {
            int done = 0;
            MPI_Request_get_status(req[r], &done, MPI_STATUS_IGNORE);
            if (done)
                continue;
            if (first < 0)
                first = r;
            size_t at = strlen(list);
            if (at + HOST + 32 < sizeof list)
                snprintf(list + at, sizeof list - at, "%s%d (host %s)", nlost ? ", " : "", r, m->hosts + r * HOST);
            nlost++;
        }
        if (nlost)
            s = fvm_diag_add(d, FVM_ERR_RUNTIME, NULL,
                             "lost rank%s %s: mpirun stopped the job while rank 0 waited for %s", nlost > 1 ? "s" : "",
                             list, nlost > 1 ? "them" : "it");
        else
            s = fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "stopped by a SIGTERM (mpirun's) while every rank was here");
    } else {
        *lowest = failed;
        for (int r = 1; r < m->size; r++)
            if (got[r] < *lowest)
                *lowest = got[r];
        MPI_Bcast(lowest, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    }
    free(got);
    free(req);
    return s;
}

/* Tasks [lo, hi) of n belong to rank r. */
static void share(const mpi *m, int r, int64_t n, int64_t *lo, int64_t *hi)
{
    *lo = n * r / m->size; /* n <= FVM_MAX_CLIENTS: no overflow */
    *hi = n * (r + 1) / m->size;
}

enum { PIECE = 1 << 24 }; /* bytes per broadcast (MPI counts are ints) */

/* Sends root's bytes b to every rank (into their b, replaced), PIECE bytes
 * at a time. A rank that cannot hold them still takes part in every
 * broadcast (the pieces go to a scratch buffer) and returns FVM_ERR_NOMEM,
 * with b empty. */
static fvm_status bcast_bytes(const mpi *m, int root, fvm_bytes *b, fvm_diag *d)
{
    uint64_t len = b->len;
    MPI_Bcast(&len, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
    fvm_status s = FVM_OK;
    unsigned char *scratch = NULL;
    if (m->rank != root) {
        b->len = 0;
        if (len > b->cap) {
            unsigned char *p = len <= SIZE_MAX ? realloc(b->data, (size_t)len) : NULL;
            if (p) {
                b->data = p;
                b->cap = (size_t)len;
            } else {
                s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory for %llu bytes of results from rank %d",
                                 (unsigned long long)len, root);
                if (!(scratch = malloc(PIECE)))
                    MPI_Abort(MPI_COMM_WORLD, 1); /* cannot even take part */
            }
        }
    }
    for (uint64_t at = 0; at < len;) {
        int piece = (int)(len - at < PIECE ? len - at : PIECE);
        MPI_Bcast(scratch ? scratch : b->data + at, piece, MPI_BYTE, root, MPI_COMM_WORLD);
        at += (uint64_t)piece;
    }
    free(scratch);
    if (m->rank != root && s == FVM_OK)
        b->len = (size_t)len;
    return s;
}

/* Root's errors (in its d) into every other rank's d, in place of theirs,
 * and root's status s to all. */
static fvm_status share_errors(const mpi *m, int root, fvm_status s, fvm_diag *d)
{
    int code = (int)s;
    MPI_Bcast(&code, 1, MPI_INT, root, MPI_COMM_WORLD);
    fvm_bytes b = {0};
    fvm_diag scratch = {0};
    if (m->rank == root && fvm_wire_put_diag(&b, d, &scratch))
        b.len = 0; /* out of memory: the others get no message */
    fvm_status got = bcast_bytes(m, root, &b, &scratch);
    if (m->rank != root) {
        fvm_diag_clear(d);
        size_t at = 0;
        if (got || fvm_wire_get_diag(b.data, b.len, &at, d, d))
            fvm_diag_add(d, (fvm_status)code, NULL, "rank %d failed (its errors could not be received)", root);
    }
    fvm_diag_clear(&scratch);
    fvm_bytes_free(&b);
    return (fvm_status)code;
}

/* After a lost rank nothing more is asked of MPI: the others are being stopped. */
static fvm_status lost(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "a rank was lost: the job is stopped");
}

static fvm_status mpi_agree(fvm_backend *b, fvm_status s, fvm_diag *d)
{
    mpi *m = b->impl;
    if (m->lost)
        return s ? s : lost(d);
    int mine = s ? m->rank : m->size, first = m->size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return first == m->size ? FVM_OK : share_errors(m, first, s, d);
}

static void release_all(int64_t n, fvm_value **out)
{
    for (int64_t i = 0; i < n; i++) {
        fvm_value_release(out[i]);
        out[i] = NULL;
    }
}

/* Tasks [lo, hi) in this process, in order, until one fails (its number in
 * *failed, its errors in d; n when none fails). */
static void run_tasks(mpi *m, fvm_ctx *w, int64_t lo, int64_t hi, int64_t n, fvm_task_fn task, void *u, fvm_value **out,
                      int64_t *failed)
{
    bool was = m->in_task;
    m->in_task = true;
    *failed = n;
    for (int64_t i = lo; i < hi; i++)
        if (task(w, u, i, &out[i])) {
            *failed = i;
            break;
        }
    m->in_task = was;
}

static fvm_status mpi_run(fvm_backend *b, fvm_ctx *x, int64_t n, fvm_task_fn task, void *u, fvm_value **out)
{
    mpi *m = b->impl;
    fvm_diag mine = {0};
    fvm_ctx w = {.vm = x->vm, .d = &mine, .depth = x->depth};
    int64_t lo, hi, failed;
    if (m->in_task) { /* inside a task of this rank: the others are not here */
        run_tasks(m, &w, 0, n, n, task, u, out, &failed);
        fvm_ctx_end(&w);
        fvm_status s = failed == n ? FVM_OK : mine.n ? mine.errs[0].code : FVM_ERR_RUNTIME;
        fvm_diag_append(x->d, &mine);
        fvm_diag_clear(&mine);
        if (s)
            release_all(n, out);
        return s;
    }
    if (m->lost)
        return lost(x->d);
    share(m, m->rank, n, &lo, &hi);
    run_tasks(m, &w, lo, hi, n, task, u, out, &failed);
    fvm_ctx_end(&w);
    /* this rank's results as bytes; one that cannot be written fails its task */
    fvm_bytes bytes = {0};
    for (int64_t i = lo; i < hi && failed == n; i++)
        if (fvm_wire_put_value(&bytes, out[i], &mine))
            failed = i;
    int64_t lowest = n;
    fvm_status s = collect_failed(m, failed, &lowest, x->d);
    if (s)
        ; /* a rank was lost */
    else if (lowest < n) {
        int owner = 0;
        for (int64_t olo, ohi; share(m, owner, n, &olo, &ohi), lowest >= ohi;)
            owner++;
        fvm_status code = mine.n ? mine.errs[0].code : FVM_ERR_RUNTIME;
        if (m->rank == owner && !mine.n)
            fvm_diag_add(&mine, code, NULL, "task %lld failed", (long long)lowest);
        s = share_errors(m, owner, code, &mine);
        fvm_diag_append(x->d, &mine);
    } else {
        /* every rank's results, rank by rank, to every rank */
        for (int r = 0; r < m->size; r++) {
            fvm_bytes got = {0};
            fvm_bytes *from = r == m->rank ? &bytes : &got;
            fvm_status st = bcast_bytes(m, r, from, x->d);
            int64_t rlo, rhi;
            share(m, r, n, &rlo, &rhi);
            size_t at = 0;
            for (int64_t i = rlo; r != m->rank && i < rhi && st == FVM_OK; i++)
                st = fvm_wire_get_value(got.data, got.len, &at, &out[i], x->d);
            if (st == FVM_OK && at != got.len)
                st = fvm_diag_add(x->d, FVM_ERR_FORMAT, NULL, "rank %d sent %zu bytes past its results", r,
                                  got.len - at);
            if (st && !s)
                s = st;
            fvm_bytes_free(&got);
        }
        s = mpi_agree(b, s, x->d); /* a rank that could not take them in fails them all */
    }
    fvm_bytes_free(&bytes);
    fvm_diag_clear(&mine);
    if (s)
        release_all(n, out);
    return s;
}

static void mpi_free(fvm_backend *b)
{
    mpi *m = b->impl;
    if (m->finalize && !m->lost) /* (MPI_Finalize would wait for the lost rank) */
        MPI_Finalize();
    free(m->hosts);
    free(m);
    free(b);
}

static const struct fvm_backend_i mpi_iface = {
    .name = "mpi",
    .run = mpi_run,
    .agree = mpi_agree,
    .free = mpi_free,
};

fvm_status fvm_backend_mpi(fvm_backend **out, fvm_diag *d)
{
    *out = NULL;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                            "MPI was finalised in this process: an mpi backend can be made once per process");
    fvm_backend *b = calloc(1, sizeof *b);
    mpi *m = calloc(1, sizeof *m);
    if (!b || !m) {
        free(b);
        free(m);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    if (!inited) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(b);
            free(m);
            return fvm_diag_add(d, FVM_ERR_RUNTIME, NULL, "MPI could not be initialised");
        }
        m->finalize = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    /* every rank's host, for naming a lost one: the node mpirun started it on
     * (PMIx's name for it), else the machine's name */
    char host[HOST] = "";
    const char *pmix = getenv("PMIX_HOSTNAME");
    int len = 0;
    if (pmix && *pmix)
        snprintf(host, sizeof host, "%s", pmix);
    else {
        char name[MPI_MAX_PROCESSOR_NAME];
        MPI_Get_processor_name(name, &len);
        snprintf(host, sizeof host, "%.*s", len, name);
    }
    if (!(m->hosts = malloc((size_t)m->size * HOST)))
        MPI_Abort(MPI_COMM_WORLD, 1); /* cannot take part */
    MPI_Allgather(host, HOST, MPI_CHAR, m->hosts, HOST, MPI_CHAR, MPI_COMM_WORLD);
    if (m->rank == 0 && m->size > 1) {
        struct sigaction sa = {.sa_handler = on_sigterm};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
    }
    b->iface = &mpi_iface;
    b->impl = m;
    b->workers = m->size;
    b->rank = m->rank;
    *out = b;
    return FVM_OK;
}

#endif
