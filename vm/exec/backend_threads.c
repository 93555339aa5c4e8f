/* backend_threads.c - a pool of worker threads: tasks handed out in increasing order to whichever worker is free. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "exec.h"

/* One run: shared by its workers. */
typedef struct job {
    fvm_ctx *caller;
    int64_t n;
    fvm_task_fn task;
    void *u;
    fvm_value **out;
    pthread_mutex_t lock;
    int64_t next; /* the next task to hand out */
    int64_t failed; /* the lowest failing task so far, or n */
    fvm_diag errors; /* that task's errors */
} job;

/* The workers live as long as the backend, so that what they keep between
 * runs (their caches of tensor buffers, bufcache.h) stays warm from one run
 * to the next. The calling thread works on every run too. */
typedef struct pool {
    int threads; /* the caller and the workers */
    int nworkers; /* workers started */
    pthread_t *tids;
    pthread_mutex_t run_lock; /* one run at a time */
    pthread_mutex_t lock; /* the fields below */
    pthread_cond_t posted; /* a job was posted, or stop was set */
    pthread_cond_t finished; /* the last worker left the job */
    job *job; /* the current job */
    unsigned long generation; /* jobs posted so far: a worker joins each once */
    int busy; /* workers still on the current job */
    bool stop;
} pool;

/* Set on the pool's threads and on a caller while it works: a run started
 * from inside a task runs inline. */
static _Thread_local bool in_worker;

/* Takes tasks of j until none is left. */
static void work(job *j)
{
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
    fvm_ctx_end(&x);
    in_worker = was;
}

static void *worker(void *arg)
{
    pool *p = arg;
    unsigned long seen = 0;
    in_worker = true; /* for the thread's life */
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->posted, &p->lock);
        if (p->stop)
            break;
        seen = p->generation;
        job *j = p->job;
        pthread_mutex_unlock(&p->lock);
        work(j);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->finished);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static fvm_status threads_run(fvm_backend *b, fvm_ctx *x, int64_t n, fvm_task_fn task, void *u, fvm_value **out)
{
    pool *p = b->impl;
    job j = {.caller = x, .n = n, .task = task, .u = u, .out = out, .failed = n};
    pthread_mutex_init(&j.lock, NULL);
    if (in_worker || n < 2 || p->nworkers == 0) {
        work(&j);
    } else {
        pthread_mutex_lock(&p->run_lock);
        pthread_mutex_lock(&p->lock);
        p->job = &j;
        p->busy = p->nworkers;
        p->generation++;
        pthread_cond_broadcast(&p->posted);
        pthread_mutex_unlock(&p->lock);
        work(&j);
        pthread_mutex_lock(&p->lock);
        while (p->busy > 0)
            pthread_cond_wait(&p->finished, &p->lock);
        p->job = NULL;
        pthread_mutex_unlock(&p->lock);
        pthread_mutex_unlock(&p->run_lock);
    }
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
    if (!b)
        return;
    pool *p = b->impl;
    if (p) {
        pthread_mutex_lock(&p->lock);
        p->stop = true;
        pthread_cond_broadcast(&p->posted);
        pthread_mutex_unlock(&p->lock);
        for (int k = 0; k < p->nworkers; k++)
            pthread_join(p->tids[k], NULL);
        pthread_cond_destroy(&p->posted);
        pthread_cond_destroy(&p->finished);
        pthread_mutex_destroy(&p->lock);
        pthread_mutex_destroy(&p->run_lock);
        free(p->tids);
        free(p);
    }
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
    pthread_t *tids = threads > 1 ? calloc((size_t)threads - 1, sizeof *tids) : NULL;
    if (!b || !p || (threads > 1 && !tids)) {
        free(b);
        free(p);
        free(tids);
        return NULL;
    }
    p->threads = threads;
    p->tids = tids;
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->posted, NULL);
    pthread_cond_init(&p->finished, NULL);
    while (p->nworkers < threads - 1 && pthread_create(&tids[p->nworkers], NULL, worker, p) == 0)
        p->nworkers++;
    b->iface = &threads_iface;
    b->impl = p;
    b->workers = threads;
    return b;
}
