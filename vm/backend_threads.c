/* backend_threads.c - a pool of worker threads: tasks handed out in increasing order to whichever worker is free. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "exec.h"

typedef struct pool {
    int threads;
} pool;

/* One run: shared by its workers. */
typedef struct job {
    fvm_ctx *caller;
    int64_t n;
    fvm_task_fn task;
    void *u;
    fvm_value **out;
    pthread_mutex_t lock;
    int64_t next;      /* the next task to hand out */
    int64_t failed;    /* the lowest failing task so far, or n */
    fvm_diag errors;   /* that task's errors */
} job;

/* Set on the pool's workers: a run started from inside a task runs inline. */
static _Thread_local bool in_worker;

static void *work(void *arg)
{
    job *j = arg;
    bool was = in_worker;
    in_worker = true;
    fvm_diag d = {0};
    fvm_ctx x = {.vm = j->caller->vm, .d = &d, .depth = j->caller->depth};
    for (;;) {
        pthread_mutex_lock(&j->lock);
        /* once task k failed, tasks above k need not run: every task below
         * it has been handed out, so the lowest failure is still found */
        int64_t i = j->next < j->failed ? j->next++ : -1;
        pthread_mutex_unlock(&j->lock);
        if (i < 0)
            break;
        fvm_status s = j->task(&x, j->u, i, &j->out[i]);
        if (s) {
            pthread_mutex_lock(&j->lock);
            if (i < j->failed) {
                j->failed = i;
                fvm_diag_clear(&j->errors);
                fvm_diag_append(&j->errors, &d);
            }
            pthread_mutex_unlock(&j->lock);
        }
        fvm_diag_clear(&d);
    }
    in_worker = was;
    return NULL;
}

static fvm_status threads_run(fvm_backend *b, fvm_ctx *x, int64_t n, fvm_task_fn task, void *u, fvm_value **out)
{
    pool *p = b->impl;
    job j = {.caller = x, .n = n, .task = task, .u = u, .out = out, .failed = n};
    int extra = in_worker || n < 2 ? 0 : (int)(p->threads - 1 < n - 1 ? p->threads - 1 : n - 1);
    pthread_t *tids = extra ? malloc((size_t)extra * sizeof *tids) : NULL;
    if (extra && !tids)
        return fvm_nomem(x);
    pthread_mutex_init(&j.lock, NULL);
    int started = 0;
    while (started < extra && pthread_create(&tids[started], NULL, work, &j) == 0)
        started++;
    work(&j); /* the calling thread works too */
    for (int k = 0; k < started; k++)
        pthread_join(tids[k], NULL);
    free(tids);
    pthread_mutex_destroy(&j.lock);
    if (j.failed == n)
        return FVM_OK;
    for (int64_t i = 0; i < n; i++) {
        fvm_value_release(out[i]);
        out[i] = NULL;
    }
    fvm_diag_append(x->d, &j.errors);
    fvm_status s = j.errors.n ? j.errors.errs[0].code : FVM_ERR_RUNTIME;
    if (!j.errors.n)
        fvm_diag_add(x->d, FVM_ERR_RUNTIME, NULL, "task %lld failed", (long long)j.failed);
    fvm_diag_clear(&j.errors);
    return s;
}

static void threads_free(fvm_backend *b)
{
    if (b)
        free(b->impl);
    free(b);
}

static const struct fvm_backend_i threads_iface = {
    .name = "threads",
    .run = threads_run,
    .free = threads_free,
};

fvm_backend *fvm_backend_threads(int threads)
{
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores > 0 ? (int)cores : 1;
    }
    fvm_backend *b = calloc(1, sizeof *b);
    pool *p = calloc(1, sizeof *p);
    if (!b || !p) {
        free(b);
        free(p);
        return NULL;
    }
    p->threads = threads;
    b->iface = &threads_iface;
    b->impl = p;
    b->workers = threads;
    return b;
}
