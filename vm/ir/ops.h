/* ops.h - the op enum, attribute registry and op descriptors, generated from ops.def and attrs.def. */
#ifndef FVM_OPS_H
#define FVM_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/status.h"
#include "tensor.h"
#include "types.h"

typedef enum fvm_attr_id {
#define FVM_ATTR(ID, NAME, KIND, FIELD, DOMAIN) FVM_ATTR_##ID,
#include "attrs.def"
#undef FVM_ATTR
    FVM_ATTR_COUNT
} fvm_attr_id;

typedef enum fvm_attr_kind {
    FVM_AK_FUNC,
    FVM_AK_INT,
    FVM_AK_BOOL,
    FVM_AK_INTS,
    FVM_AK_DTYPE,
    FVM_AK_PLACEMENT,
    FVM_AK_STRING,
    FVM_AK_STRINGS,
    FVM_AK_REAL,
    FVM_AK_VALUE
} fvm_attr_kind;

#define A(ID) (UINT64_C(1) << FVM_ATTR_##ID)

/* layer_norm's epsilon when the attribute is absent. */
#define FVM_LAYER_NORM_EPSILON 1e-5

struct fvm_func;
struct fvm_doc;

/* A list of at most FVM_MAX_RANK integers (shape, axes, perm, start, ...). */
typedef struct fvm_ints {
    int n;
    int64_t v[FVM_MAX_RANK];
} fvm_ints;

typedef struct fvm_strings {
    int n;
    const char **v;
} fvm_strings;

#define FVM_ATTR_CTYPE_FUNC struct fvm_func *
#define FVM_ATTR_CTYPE_INT int64_t
#define FVM_ATTR_CTYPE_BOOL bool
#define FVM_ATTR_CTYPE_INTS fvm_ints
#define FVM_ATTR_CTYPE_DTYPE fvm_dtype
#define FVM_ATTR_CTYPE_PLACEMENT fvm_placement
#define FVM_ATTR_CTYPE_STRING const char *
#define FVM_ATTR_CTYPE_STRINGS fvm_strings
#define FVM_ATTR_CTYPE_VALUE const struct fvm_doc *
#define FVM_ATTR_CTYPE_REAL double

/* An instruction's attributes, decoded by the checker. 'present' has bit
 * A(ID) for every attribute given; absent ones are zero. */
typedef struct fvm_attrs {
    uint64_t present;
#define FVM_ATTR(ID, NAME, KIND, FIELD, DOMAIN) FVM_ATTR_CTYPE_##KIND FIELD;
#include "attrs.def"
#undef FVM_ATTR
} fvm_attrs;

/* The values an attribute may take beyond its kind (the DOMAIN column of
 * attrs.def and op_attrs.def). Bounds apply to an INT, a REAL and each entry
 * of an INTS; they are whole numbers for the integer kinds. */
typedef struct fvm_attr_domain {
    bool has_min, min_open; /* >= min (> min when open) */
    bool has_max, max_open; /* <= max (< max when open) */
    double min, max;
    bool has_len; /* INTS: min_len to max_len entries (otherwise 0 to FVM_MAX_RANK) */
    int min_len, max_len;
    const char *one_of; /* STRING, DTYPE: the allowed values, '|'-separated; NULL: any */
} fvm_attr_domain;

typedef struct fvm_attr_info {
    const char *name;
    fvm_attr_kind kind;
    size_t offset; /* of the field in fvm_attrs */
    fvm_attr_domain dom; /* in every op that does not give its own (fvm_attr_domain_of) */
} fvm_attr_info;

/* The FUNC attributes come first in attrs.def (ops.c asserts it), so that
 * an instruction keeps their locations in an array of this many. */
#define FVM_NFUNC_ATTRS 8

FVM_API extern const fvm_attr_info fvm_attr_table[FVM_ATTR_COUNT];
/* FVM_ATTR_COUNT when unknown. */
FVM_API fvm_attr_id fvm_attr_lookup(const char *name);

typedef enum fvm_op {
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) FVM_OP_##ID,
#include "ops.def"
#undef FVM_OP
    FVM_OP_COUNT
} fvm_op;

enum {
    OPF_LIFT = 1 << 0,
    OPF_PLACED = 1 << 1,
    OPF_FED = 1 << 2,
    OPF_AGG = 1 << 3,
    OPF_LIT = 1 << 4,
};

/* Static facts about an op (from ops.def). The rule and exec pointers are
 * attached by the checker and interpreter modules through their own tables
 * generated from the same list. */
typedef struct fvm_op_info {
    const char *name;
    int min_args, max_args; /* max -1: unbounded */
    unsigned flags;
    uint64_t attrs, required;
} fvm_op_info;

FVM_API extern const fvm_op_info fvm_op_table[FVM_OP_COUNT];
/* FVM_OP_COUNT when unknown. */
FVM_API fvm_op fvm_op_lookup(const char *name);

/* Row op of fvm_op_table and row id of fvm_attr_table, or NULL past the
 * end: for a language binding, which sees neither FVM_OP_COUNT nor
 * FVM_ATTR_COUNT (it walks the rows until NULL and reads their first
 * members, which keep their place as the structs grow). */
FVM_API const fvm_op_info *fvm_op_info_at(int op);
FVM_API const fvm_attr_info *fvm_attr_info_at(int id);

/* The domain of attribute id in op: the op's own (op_attrs.def) or the
 * attribute's (attrs.def). Static storage. */
FVM_API const fvm_attr_domain *fvm_attr_domain_of(fvm_op op, fvm_attr_id id);

#endif
