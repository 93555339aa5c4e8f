/* value.h - runtime values: tensors, structs, sequences and per-client lists, refcounted and immutable. */
#ifndef FVM_VALUE_H
#define FVM_VALUE_H

#include "tensor.h"

typedef enum fvm_vkind {
    FVM_V_TENSOR,
    FVM_V_STRUCT, /* fields; names come from the static type */
    FVM_V_SEQ, /* a sequence */
    FVM_V_CLIENTS /* {T}@CLIENTS: one member per client */
} fvm_vkind;

/* Placement is static: T@SERVER and T@CLIENTS (all equal) are represented by
 * the member value itself; only {T}@CLIENTS has a list.
 *
 * A sequence is stored either as a list of elements (items) or by columns:
 * 'cols' is a tensor or struct of tensors whose leaves all have a leading
 * dimension n, and element i is row i of every leaf (views, no copies). */
typedef struct fvm_value fvm_value;

/* Where the members of a {T}@CLIENTS value come from when they are not held
 * in memory: a federated dataset reads and decodes client i when asked, and
 * the caller releases it after use, so memory stays flat in the number of
 * clients. get may be called from several threads at once. */
typedef struct fvm_source fvm_source;
struct fvm_source_i {
    /* Member i (a new reference). */
    fvm_status (*get)(fvm_source *s, int64_t i, fvm_value **out, fvm_diag *d);
    /* Frees the source (when the last value using it is released). */
    void (*free)(fvm_source *s);
};
struct fvm_source {
    const struct fvm_source_i *iface;
};

struct fvm_value {
    int refs;
    fvm_vkind kind;
    fvm_tensor t; /* TENSOR */
    int64_t n; /* STRUCT: fields, SEQ: length, CLIENTS: clients */
    fvm_value **items; /* STRUCT fields, CLIENTS members, SEQ elements (list form) */
    fvm_value *cols; /* SEQ by columns (items NULL) */
    fvm_source *src; /* CLIENTS read on demand (items NULL; owned) */
};

/* New values start with one reference owned by the caller; NULL when out of
 * memory. _take functions take over the caller's reference to what they get. */
FVM_API fvm_value *fvm_value_tensor_take(fvm_tensor *t); /* clears *t on success */
/* A STRUCT, SEQ or CLIENTS list of n empty slots to fill with owned values. */
FVM_API fvm_value *fvm_value_list(fvm_vkind kind, int64_t n);
FVM_API fvm_value *fvm_value_seq_cols_take(int64_t n, fvm_value *cols);
/* A {T}@CLIENTS value of n members read from src on demand (takes src). */
FVM_API fvm_value *fvm_value_clients_source_take(int64_t n, fvm_source *src);
FVM_API fvm_value *fvm_value_retain(fvm_value *v);
/* Drops one reference; NULL is a no-op. Thread-safe. */
FVM_API void fvm_value_release(fvm_value *v);
/* Releases values[0..n) and frees the array (one value per parameter, as
 * bind.h's fvm_bind_params and a session's data give them). NULL is a no-op. */
FVM_API void fvm_values_free(fvm_value **values, int n);

/* The members idx[0..k) of a CLIENTS value, as a new CLIENTS value of k
 * members (held members are shared; a value read on demand stays so). */
FVM_API fvm_status fvm_clients_pick(fvm_value *v, const int64_t *idx, int64_t k, fvm_value **out, fvm_diag *d);

/* Member i of a CLIENTS value (a new reference): held, or read from its source. */
FVM_API fvm_status fvm_clients_get(const fvm_value *v, int64_t i, fvm_value **out, fvm_diag *d);

/* Element i of a sequence (a new reference). */
FVM_API fvm_status fvm_seq_get(const fvm_value *seq, int64_t i, fvm_value **out, fvm_diag *d);
/* Rows [lo, hi) of a column-stored value as a new tensor tree of views. */
FVM_API fvm_status fvm_value_rows(const fvm_value *cols, int64_t lo, int64_t hi, fvm_value **out, fvm_diag *d);

/* Same structure and bit-identical tensors. */
FVM_API bool fvm_value_identical(const fvm_value *a, const fvm_value *b);

#endif
