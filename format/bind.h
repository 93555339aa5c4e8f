/* bind.h - binding textual arguments (JSON or YAML text, or @file) to a function's parameters. */
#ifndef FVM_BIND_H
#define FVM_BIND_H

#include "../vm/ir.h"
#include "../vm/value.h"

/* One NAME=VALUE argument: text is JSON, or "@path" to read a .json/.yaml file. */
typedef struct fvm_named_text {
    const char *name;
    const char *text;
} fvm_named_text;

/* Builds one value per parameter of f (values[i] owned by the caller, release
 * each; the array is malloc'd). Parameters not given are an error, except a
 * parameter named "key" of type u32[2] (unplaced or @SERVER), which gets the
 * random key of 'seed'. *nclients is set from {T}@CLIENTS data (or checked
 * against it when already >= 0). Every problem is reported; errors in a value
 * point into its text or file. */
fvm_status fvm_bind_args(const fvm_func *f, int nargs, const fvm_named_text *args, uint64_t seed, int64_t *nclients,
                         fvm_value ***out_values, fvm_diag *d);

/* Releases values[0..n) and frees the array. NULL is a no-op. */
void fvm_values_free(fvm_value **values, int n);

#endif
