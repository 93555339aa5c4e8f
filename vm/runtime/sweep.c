/* sweep.c - the runs of a sweep on a pool of threads, each a training session of its own program (see sweep.h); the programs, sessions and shared data through sweep_io.h. */
#include "sweep.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sweep_io.h"

typedef struct sweep {
    const fvm_sweep_opts *o;
    const fvm_sweep_io_i *io;
    struct fvm_data_cache *data; /* what the runs share */
    pthread_mutex_t lock;
    int next; /* the next run to start */
    fvm_status first; /* the first failure's status */
} sweep;

/* Run k: load and check the program with its overrides (*p), then the session (*ss). */
static fvm_status one_run(sweep *w, int k, fvm_program **p, fvm_session **ss, fvm_diag *d)
{
    const fvm_sweep_opts *o = w->o;
    const fvm_sweep_run *r = &o->runs[k];
    fvm_status s = w->io->load(o, k, p, d);
    if (!s) {
        fvm_session_opts so = *o->session;
        so.seed = r->seed;
        so.metrics = r->metrics;
        so.backend = NULL; /* sequential, on this thread */
        so.data_cache = w->data;
        so.progress = NULL;
        if (!so.program)
            so.program = o->program;
        s = w->io->session_new(*p, &so, ss, d);
        if (!s)
            s = fvm_session_run(*ss, d);
    }
    return s;
}

static void *worker(void *arg)
{
    sweep *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        int k = w->first ? w->o->nruns : w->next++;
        pthread_mutex_unlock(&w->lock);
        if (k >= w->o->nruns)
            return NULL;
        fvm_diag d = {0};
        fvm_program *p = NULL;
        fvm_session *ss = NULL;
        fvm_status s = one_run(w, k, &p, &ss, &d);
        pthread_mutex_lock(&w->lock);
        if (s && !w->first)
            w->first = s;
        if (w->o->done)
            w->o->done(w->o->user, k, s, ss, &d);
        pthread_mutex_unlock(&w->lock);
        fvm_session_free(ss); /* before the program it borrows */
        fvm_program_free(p);
        fvm_diag_clear(&d);
    }
}

fvm_status fvm_sweep_io(const fvm_sweep_opts *o, const fvm_sweep_io_i *io, fvm_diag *d)
{
    const fvm_session_opts *so = o->session;
    if (so->checkpoint_dir || so->resume || so->init)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                            "a sweep writes one metrics file per run; checkpoints, --resume and --init are for "
                            "single runs");
    if (o->nruns <= 0)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "a sweep needs at least one run");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = o->threads > 0 ? o->threads : cores > 0 ? (int)cores : 1;
    if (nthreads > o->nruns)
        nthreads = o->nruns;
    sweep w = {.o = o, .io = io, .data = io->cache_new(o->data_bytes ? o->data_bytes : (size_t)1 << 30)};
    if (!w.data)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    if (pthread_mutex_init(&w.lock, NULL)) {
        io->cache_free(w.data);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "cannot create a lock");
    }
    pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
    if (!tids) {
        pthread_mutex_destroy(&w.lock);
        io->cache_free(w.data);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    int started = 0;
    for (; started < nthreads; started++)
        if (pthread_create(&tids[started], NULL, worker, &w))
            break;
    if (started == 0) /* no thread: the runs on this one */
        worker(&w);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    pthread_mutex_destroy(&w.lock);
    io->cache_free(w.data); /* after every session that bound through it */
    return w.first;
}
