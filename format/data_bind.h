/* data_bind.h - binding a dataset split to a parameter: NAME=FILE[:SPLIT] on the command line. */
#ifndef FVM_DATA_BIND_H
#define FVM_DATA_BIND_H

#include "../vm/ir/types.h"
#include "../vm/ir/value.h"

/* Splits "FILE[:SPLIT]" at its last ':' when what follows is a split name
 * (letters, digits, '_', '-'); *file and *split are malloc'd (*split NULL:
 * the default split). */
FVM_API fvm_status fvm_data_spec(const char *text, char **file, char **split, fvm_diag *d);

/* The value of dataset file 'path' (split 'split', NULL: the default) for a
 * parameter 'param' of type t:
 *   {T*}@CLIENTS        one member per client of the split, in the file's
 *                       client order, read and decoded when the run uses it
 *                       and released after (memory stays flat in the number
 *                       of clients; reads may come from several threads);
 *   T*, T*@SERVER       every client's examples, in client order, as one
 *                       sequence in memory (a centralized test split).
 * T must be a struct with named fields. Each field names a column of the
 * file with the same dtype and per-example shape; a '?' dim of the field
 * accepts any size, and a known dim of the field where the file's is '?'
 * (a length the file does not fix, as every TFF feature's) is checked in
 * each client when it is read: a client that differs is a type error naming
 * the file, the client, the column and the field. Columns T does not name
 * are not used. A mismatch is a type error naming the parameter, the file,
 * the field and both types, and listing the file's columns. *out (owned by
 * the caller) is NULL on error. */
FVM_API fvm_status fvm_data_bind(const char *path, const char *split, const char *param, const fvm_type *t,
                                 fvm_value **out, fvm_diag *d);

/* What the runs of a sweep share (thread-safe): each dataset split bound to
 * a parameter of a type, bound once, and the clients decoded from it, kept
 * while their bytes fit max_bytes (later clients are read each time; values
 * are immutable, so the runs get the same bits). The cache must outlive every
 * value bound through it. */
typedef struct fvm_data_cache fvm_data_cache;
FVM_API fvm_data_cache *fvm_data_cache_new(size_t max_bytes);
FVM_API void fvm_data_cache_free(fvm_data_cache *c);
/* The bytes of the decoded clients it holds. */
FVM_API size_t fvm_data_cache_bytes(fvm_data_cache *c);

/* fvm_data_bind through cache c (NULL: none): the value bound before for the
 * same file, split, parameter and type, or a new one (kept in c). */
FVM_API fvm_status fvm_data_bind_cached(fvm_data_cache *c, const char *path, const char *split, const char *param,
                                        const fvm_type *t, fvm_value **out, fvm_diag *d);

#endif
