/* sweep.h - many training runs of one program in one process: a grid of hyperparameter values
 * times seeds, the runs spread over threads, each run bit-identical to the same run alone.
 *
 * Each run loads the program with its own hyperparameter overrides (after
 * the sweep's), checks it and runs a training session (session.h) on the
 * sequential backend of the thread that took it, writing its own metrics
 * file. The runs bind their datasets once and share the clients decoded
 * from them. Runs start in order; the first run that fails stops the sweep from
 * starting more (the ones running finish). */
#ifndef FVM_SWEEP_H
#define FVM_SWEEP_H

#include "session.h"

/* format/ir_read.h's load options (include directories, overrides). */
typedef struct fvm_load_opts fvm_load_opts;

/* One run: its overrides, its seed and its metrics file (borrowed). */
typedef struct fvm_sweep_run {
    const char *const *sets; /* nsets "name=value", applied after the sweep's load options' */
    int nsets;
    uint64_t seed;
    const char *metrics;
} fvm_sweep_run;

/* Told as each run ends (on the thread that ran it, one call at a time):
 * its index, its status, its session (NULL when it could not start; its
 * figures borrowed for the call) and its errors. */
typedef void (*fvm_sweep_done_fn)(void *user, int run, fvm_status s, const fvm_session *ss, const fvm_diag *d);

typedef struct fvm_sweep_opts {
    const char *program; /* the program's file */
    const fvm_load_opts *load; /* include directories and the overrides of every run (NULL: none) */
    const fvm_session_opts *session; /* every run's options but its seed, metrics file and backend (each run is
                                        sequential); checkpoints, resume and init are refused */
    const fvm_sweep_run *runs;
    int nruns;
    int threads; /* runs at once (0: one per core) */
    size_t data_bytes; /* decoded client data the runs share, at most (0: 1 GiB; data_bind.h's fvm_data_cache) */
    fvm_sweep_done_fn done; /* optional */
    void *user;
} fvm_sweep_opts;

/* Runs o's runs. FVM_OK when every run succeeded; else the first failure's
 * status (its errors went to done). FVM_ERR_USAGE for options a sweep
 * cannot take. */
FVM_API fvm_status fvm_sweep(const fvm_sweep_opts *o, fvm_diag *d);

#endif
