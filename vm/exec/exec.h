/* exec.h - internal: the execution context and the op implementations named in ops.def. */
#ifndef FVM_EXEC_H
#define FVM_EXEC_H

#include <stdlib.h>

#include "interp.h"
#include "../kernels/provider.h"

struct fvm_vm {
    const fvm_program *p;
    const fvm_kernels *kernels; /* every kernel and result buffer of the run (provider.h) */
    fvm_backend *backend;
    fvm_backend *own_backend; /* when the VM made it */
    int64_t nclients;
    bool unfused;
    fvm_log_fn log;
    void *log_user;
    int64_t max_steps; /* 0: no bound (fvm_vm_config) */
    _Atomic int64_t steps; /* counted on function entry, by every thread */
    double time_limit; /* seconds; 0: no bound */
    double deadline; /* on the monotonic clock, when time_limit > 0 */
};

/* One thread of execution: the VM and where its errors go. Backends that run
 * clients in parallel give each worker its own context. */
struct fvm_ctx {
    fvm_vm *vm;
    fvm_diag *d;
    int depth; /* nested calls, bounded */
    struct fvm_packed *packed; /* transposed copies of matrices (packed.h), or NULL; freed by fvm_ctx_end */
};

/* Frees what context x kept for its products (packed.h): whoever made a
 * context ends it. */
void fvm_ctx_end(fvm_ctx *x);

/* Runs segment sg of f's phases with the function's slots (phases.h): its
 * aggregations' results are stored in their slots (exec_segment.c). */
fvm_status fvm_exec_segment(fvm_ctx *x, const fvm_func *f, int sg, fvm_value **slots);

/* Runs f; args borrowed, *out owned. */
fvm_status fvm_exec_call(fvm_ctx *x, const fvm_func *f, fvm_value *const *args, fvm_value **out);
/* The same, but the caller's reference to args[i] passes to the call for
 * each bit i of given (i < 32), released by it whatever the outcome: a
 * loop's state given to its body is then held by the body alone, which
 * may write a dying part of it in place (fuse.c). */
fvm_status fvm_exec_call_giving(fvm_ctx *x, const fvm_func *f, fvm_value *const *args, unsigned given, fvm_value **out);

/* An op implementation: args borrowed (one per instruction argument), *out a new reference. */
typedef fvm_status (*fvm_exec_fn)(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out);

#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) \
    fvm_status EXEC(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out);
#include "../ir/ops.def"
#undef FVM_OP

/* An argument vector for a call: on the stack up to 8 values, else on the
 * heap. argv_init returns NULL when out of memory; the slots start NULL. The
 * values are borrowed: argv_free frees only the vector. */
typedef struct fvm_argv {
    fvm_value *local[8];
    fvm_value **v;
} fvm_argv;

static inline fvm_value **fvm_argv_init(fvm_argv *a, int n)
{
    for (int i = 0; i < 8; i++)
        a->local[i] = NULL;
    a->v = n <= 8 ? a->local : (fvm_value **)calloc((size_t)n, sizeof *a->v);
    return a->v;
}

static inline void fvm_argv_free(fvm_argv *a)
{
    if (a->v != a->local)
        free(a->v);
}

/* Runs one instruction; its result goes to its slot (interp.c). Errors are
 * placed at the instruction. */
fvm_status fvm_exec_instr(fvm_ctx *x, const fvm_instr *in, fvm_value **slots);

/* Shared helpers (exec_tensor.c). */
fvm_status fvm_nomem(fvm_ctx *x);
/* A new tensor value of the given dtype/shape (uninitialised), from the VM's kernel provider. */
fvm_status fvm_new_tensor(fvm_ctx *x, fvm_dtype dt, const fvm_dims *shape, fvm_value **out);
/* Elementwise a op b lifted over structs (a tensor broadcasts to every leaf).
 * With same_shape, tensors must have equal shapes (aggregating values of
 * different shapes is an error, never a broadcast). */
fvm_status fvm_lift_binary(fvm_ctx *x, fvm_binary op, const fvm_value *a, const fvm_value *b, bool same_shape,
                           fvm_value **out);
/* Zeros of a static tensor-tree type with known dims. */
fvm_status fvm_zeros_of_type(fvm_ctx *x, const fvm_type *t, fvm_value **out);

/* The number of clients, or a runtime error when it is not known. */
fvm_status fvm_need_clients(fvm_ctx *x, int64_t *n);
/* Member i of a value of static type t placed at CLIENTS (a new reference:
 * an all-equal value itself, a held member, or one read from a dataset). */
fvm_status fvm_client_get(fvm_ctx *x, const fvm_value *v, const fvm_type *t, int64_t i, fvm_value **out);

/* Converts a value of static type 'from' for a parameter of type 'to': an
 * all-equal T@CLIENTS becomes a list with one (shared) member per client
 * where {T}@CLIENTS is expected, inside structs too. Otherwise a new
 * reference to v. */
fvm_status fvm_coerce(fvm_ctx *x, fvm_value *v, const fvm_type *from, const fvm_type *to, fvm_value **out);

#endif
