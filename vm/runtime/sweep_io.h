/* sweep_io.h - what a sweep's pool of runs reads through, as an interface the runtime defines (internal; format/sweep_files.c implements it and wires it under fvm_sweep). */
#ifndef FVM_SWEEP_IO_H
#define FVM_SWEEP_IO_H

#include "sweep.h"

typedef struct fvm_sweep_io_i {
    /* Run k's program (*p, freed with fvm_program_free, also when set on
     * error), loaded with o->load's and the run's overrides and checked. */
    fvm_status (*load)(const fvm_sweep_opts *o, int k, fvm_program **p, fvm_diag *d);
    /* A session of p with options so, its files read and written (session.h's fvm_session_new). */
    fvm_status (*session_new)(const fvm_program *p, const fvm_session_opts *so, fvm_session **out, fvm_diag *d);
    /* The client data the runs share, at most max_bytes decoded (NULL: out
     * of memory), and its end after every session that bound through it. */
    struct fvm_data_cache *(*cache_new)(size_t max_bytes);
    void (*cache_free)(struct fvm_data_cache *c);
} fvm_sweep_io_i;

/* fvm_sweep with its runs' programs, sessions and shared data through io (borrowed; static). */
fvm_status fvm_sweep_io(const fvm_sweep_opts *o, const fvm_sweep_io_i *io, fvm_diag *d);

#endif
