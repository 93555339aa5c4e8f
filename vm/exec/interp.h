/* interp.h - the interpreter: runs checked functions over runtime values on a backend. */
#ifndef FVM_INTERP_H
#define FVM_INTERP_H

#include "backend.h"
#include "../ir/ir.h"
#include "../ir/value.h"
#include "../kernels/providers.h"

typedef struct fvm_vm fvm_vm;

typedef struct fvm_vm_config {
    int64_t nclients; /* clients in {T}@CLIENTS values; -1: not known yet (taken from bound data) */
    fvm_backend *backend; /* borrowed; NULL: the sequential backend */
    const fvm_kernels *kernels; /* the kernel provider (provider.h): fvm_kernels_cpu() (NULL
                              too) or fvm_kernels_portable(), or a device's */
    bool unfused; /* run every function one instruction at a time: federated
                              ones with every {T}@CLIENTS list held whole, elementwise
                              chains (fuse.h) one op at a time (tests compare the two ways) */
    fvm_log_fn log; /* optional */
    void *log_user;
    /* Bounds on a run, for programs whose loops would run too long: 0 means
     * none. max_steps counts instructions as their functions are entered (a
     * call counts its instructions plus one) over the VM's life, on every
     * thread; time_limit is seconds of wall time from fvm_vm_new. Passing
     * either stops every call with FVM_ERR_LIMIT at the next function entry. */
    int64_t max_steps;
    double time_limit;
} fvm_vm_config;

/* A VM for a checked program (borrowed: it must outlive the VM). It runs
 * its kernel provider's init (the CPU provider's sets OpenBLAS to one thread
 * for the whole process: BLAS results change in their last bits with
 * OpenBLAS's thread count, and fedvm's results must not depend on the
 * machine; parallelism comes from the backends instead). */
FVM_API fvm_status fvm_vm_new(const fvm_program *p, const fvm_vm_config *cfg, fvm_vm **out, fvm_diag *d);
/* NULL is a no-op. */
FVM_API void fvm_vm_free(fvm_vm *vm);

/* The number of clients, once known (-1 before). Binding a {T}@CLIENTS value
 * sets it; a later value with another count is an error. */
FVM_API int64_t fvm_vm_clients(const fvm_vm *vm);
FVM_API fvm_status fvm_vm_set_clients(fvm_vm *vm, int64_t n, fvm_diag *d);
/* Forgets the number of clients, for a call over other clients (a round
 * driver runs next over a round's clients and evaluate over all of them). */
FVM_API void fvm_vm_forget_clients(fvm_vm *vm);

/* Calls f with args (borrowed; one per parameter, of compatible types) and
 * returns its result in *out (owned by the caller). Runtime errors (a bad
 * index, integer division by zero, a loop past max_iter) are reported in d
 * with the location of the instruction that failed. */
FVM_API fvm_status fvm_vm_call(fvm_vm *vm, const fvm_func *f, fvm_value *const *args, fvm_value **out, fvm_diag *d);

#endif
