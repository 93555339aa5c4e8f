/* status.h - status codes, source locations and the diagnostics list shared by every module. */
#ifndef FVM_STATUS_H
#define FVM_STATUS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

/* Every fallible function returns one of these; results go to out_ parameters. */
typedef enum fvm_status {
    FVM_OK = 0,
    FVM_ERR_IO, /* a file could not be read or written */
    FVM_ERR_SYNTAX, /* bad JSON/YAML text, or a malformed type string */
    FVM_ERR_FORMAT, /* well-formed text that is not a valid fedvm document */
    FVM_ERR_NAME, /* undefined, duplicate or clashing name */
    FVM_ERR_TYPE, /* dtype, shape, arity or attribute mismatch */
    FVM_ERR_PLACEMENT, /* a federated value used at the wrong placement */
    FVM_ERR_CYCLE, /* recursion, cyclic calls or cyclic includes/aliases */
    FVM_ERR_LIMIT, /* a size or depth limit was exceeded */
    FVM_ERR_NOMEM, /* an allocation failed */
    FVM_ERR_RUNTIME, /* an error while executing (bad index, division by zero, ...) */
    FVM_ERR_USAGE, /* a caller passed something the API does not accept */
    FVM_STATUS_COUNT
} fvm_status;

/* Evaluates x, a fvm_status, and returns it from the enclosing function unless FVM_OK. */
#define FVM_TRY(x) \
    do { \
        fvm_status fvm_try_ = (x); \
        if (fvm_try_ != FVM_OK) \
            return fvm_try_; \
    } while (0)

/* Short lowercase name of a status ("type", "placement", ...). Never NULL. */
FVM_API const char *fvm_status_name(fvm_status s);

/* Where something is in a source document. Strings are borrowed (they live in
 * the program's arena or are static). line/col are 1-based; 0 means unknown.
 * col counts Unicode code points. ptr is an RFC 6901 JSON pointer ("" = root). */
typedef struct fvm_loc {
    const char *file;
    int line, col;
    const char *ptr;
} fvm_loc;

/* One reported error. msg and the strings in loc are owned by the diag. */
typedef struct fvm_error {
    fvm_status code;
    fvm_loc loc;
    char *msg;
} fvm_error;

/* An ordered list of errors. Zero-initialise, then fvm_diag_clear() to free.
 * Adding past max_errors (0 = 1000) only counts the error in 'dropped'. */
typedef struct fvm_diag {
    fvm_error *errs;
    int n, cap;
    int max_errors;
    int dropped;
} fvm_diag;

/* Append an error; loc may be NULL (unknown location). Copies every string.
 * Returns code, so callers can write 'return fvm_diag_add(...)'. If d is NULL
 * nothing is recorded. */
FVM_API fvm_status fvm_diag_add(fvm_diag *d, fvm_status code, const fvm_loc *loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
FVM_API fvm_status fvm_diag_vadd(fvm_diag *d, fvm_status code, const fvm_loc *loc, const char *fmt, va_list ap);

/* Give the last error a location if it has none (used when a kernel reports an
 * error and the interpreter knows which instruction ran it). */
FVM_API void fvm_diag_locate_last(fvm_diag *d, const fvm_loc *loc);
/* The same, also making its message say "what: " first, once: a message
 * that starts with the word what is kept; one that starts with another
 * label ("gather: index 5 ...", from a kernel or helper that what used) gets
 * what in place of that label; any other gets "what: " in front. When code
 * is not FVM_OK it replaces the error's code. Only an error that has no
 * location yet is changed. */
FVM_API void fvm_diag_place_last(fvm_diag *d, const fvm_loc *loc, const char *what, fvm_status code);

/* Orders the errors from index 'from' on by where they are: file (in the
 * order files first appear among them), then line and column. An error
 * without a line stays after the one before it. Stable: errors at one place
 * keep their order. What the loader and the checker report separately then
 * reads as one pass over the source. */
FVM_API void fvm_diag_sort(fvm_diag *d, int from);

/* Appends copies of src's errors to dst (a worker's errors to its caller's). */
FVM_API void fvm_diag_append(fvm_diag *dst, const fvm_diag *src);

/* Free all errors; the diag is empty and reusable afterwards. */
FVM_API void fvm_diag_clear(fvm_diag *d);

/* Format one error as "file:line:col: pointer: message" into a malloc'd string
 * (caller frees), or NULL when out of memory. */
FVM_API char *fvm_error_format(const fvm_error *e);

/* Library log sink: the library never prints, it calls this when set. */
typedef enum fvm_log_level { FVM_LOG_DEBUG, FVM_LOG_INFO, FVM_LOG_WARN } fvm_log_level;
typedef void (*fvm_log_fn)(void *user, fvm_log_level level, const char *msg);

/* Limits on what a user-supplied document may ask for. */
#define FVM_MAX_RANK 8 /* tensor rank */
#define FVM_MAX_TENSOR_BYTES (1ull << 32) /* 4 GiB per tensor */
#define FVM_MAX_DEPTH 512 /* nesting of documents and types */
#define FVM_MAX_DOC_NODES 10000000 /* nodes in a document after YAML alias expansion */
#define FVM_MAX_CLIENTS 100000000 /* clients in one federated value */
#define FVM_MAX_SEQ_LEN 2147483647LL /* elements of a sequence made by sequence_repeat */
#define FVM_MAX_CALL_DEPTH 256 /* functions on one call chain */

#endif
