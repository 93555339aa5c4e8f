/* bind.h - binding textual arguments (JSON or YAML text, or @file) to a function's parameters. */
#ifndef FVM_BIND_H
#define FVM_BIND_H

#include "../vm/ir/ir.h"
#include "../vm/ir/value.h"
#include "../vm/runtime/named_text.h"

/* Parameters that get a value without being given (keys.h's fvm_given):
 * - "key", of type u32[2] (unplaced or @SERVER): the key fvm_prng_key(seed);
 * - "client_keys", of type {u32[2]}@CLIENTS: client c's key is
 *   fvm_prng_fold_in(fvm_prng_key(seed), c);
 * - "client_indices", {i64[]}@CLIENTS: client c's is c;
 * - "num_clients", i64[] (or @SERVER): the number of clients.
 * ("client_states" only a training round gives.) */
FVM_API bool fvm_bind_is_key(const fvm_type *t);
FVM_API bool fvm_bind_is_client_keys(const fvm_type *t);

typedef struct fvm_bind_opts {
    int first; /* bind parameters first.. (values[i < first] stay NULL) */
    uint64_t seed; /* for "key" and "client_keys" */
    bool leave_keys; /* leave the parameters above (and "client_states") NULL: a round driver sets them */
    bool *used; /* NULL: an argument naming no parameter is an error; else
                         such arguments are skipped and used[k] is set for the others */
    struct fvm_data_cache *cache; /* NULL, or where datasets are bound through (data_bind.h) */
} fvm_bind_opts;

/* Builds one value per parameter of f (values[i] owned by the caller, release
 * each; the array is malloc'd). Parameters not given are an error, except the
 * keys above. *nclients is set from {T}@CLIENTS data (or checked against it
 * when already >= 0). Every problem is reported; errors in a value point into
 * its text or file. */
FVM_API fvm_status fvm_bind_params(const fvm_func *f, int nargs, const fvm_named_text *args, const fvm_bind_opts *o,
                                   int64_t *nclients, fvm_value ***out_values, fvm_diag *d);

/* fvm_bind_params with every parameter bound and no argument left over. */
FVM_API fvm_status fvm_bind_args(const fvm_func *f, int nargs, const fvm_named_text *args, uint64_t seed,
                                 int64_t *nclients, fvm_value ***out_values, fvm_diag *d);

#endif
