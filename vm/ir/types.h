/* types.h - fedvm types in TFF's notation: tensors, structs, sequences, federated and function types. */
#ifndef FVM_TYPES_H
#define FVM_TYPES_H

#include <stdbool.h>

#include "../core/arena.h"
#include "../core/status.h"
#include "tensor.h"

typedef enum fvm_tkind {
    FVM_T_TENSOR, /* f32[784,10], i32[], f32[?,784] */
    FVM_T_STRUCT, /* <w=f32[3],b=f32[]> or <f32[],i32[]> */
    FVM_T_SEQ, /* T* */
    FVM_T_FED, /* {T}@CLIENTS, T@CLIENTS, T@SERVER */
    FVM_T_FN /* (T -> U), ( -> U) */
} fvm_tkind;

typedef enum fvm_placement { FVM_PL_SERVER, FVM_PL_CLIENTS } fvm_placement;

typedef struct fvm_type fvm_type;

/* Types are immutable and live in a program's arena; pointers are shared. */
struct fvm_type {
    fvm_tkind kind;
    const char *alias; /* the alias this node was declared as (for printing), or NULL */
    union {
        struct {
            fvm_dtype dtype;
            fvm_dims dims; /* -1 = unknown ('?') */
        } tensor;
        struct {
            int n;
            const char **names; /* names[i] NULL for a positional element */
            const fvm_type **elems;
        } strct;
        struct {
            const fvm_type *elem;
        } seq;
        struct {
            const fvm_type *member;
            fvm_placement pl;
            bool all_equal; /* T@CLIENTS (one value for all clients); always true at SERVER */
        } fed;
        struct {
            const fvm_type *param; /* NULL for no parameter */
            const fvm_type *result;
        } fn;
    } u;
};

/* Constructors (NULL when out of memory). Arrays passed in are copied. */
FVM_API fvm_type *fvm_type_tensor(fvm_arena *a, fvm_dtype dt, const fvm_dims *dims);
FVM_API fvm_type *fvm_type_scalar(fvm_arena *a, fvm_dtype dt);
FVM_API fvm_type *fvm_type_struct(fvm_arena *a, int n, const char *const *names, const fvm_type *const *elems);
FVM_API fvm_type *fvm_type_seq(fvm_arena *a, const fvm_type *elem);
FVM_API fvm_type *fvm_type_fed(fvm_arena *a, const fvm_type *member, fvm_placement pl, bool all_equal);
FVM_API fvm_type *fvm_type_fn(fvm_arena *a, const fvm_type *param, const fvm_type *result);

/* Resolves an alias name used inside a type string at nesting level 'depth'
 * and sets *levels to the levels its definition uses (1 for a tensor).
 * Returns NULL and records an error (at loc) when the name is unknown, its
 * definition is invalid, or it would nest the type deeper than
 * FVM_MAX_TYPE_DEPTH. */
typedef struct fvm_type_env {
    const fvm_type *(*lookup)(void *ctx, const char *name, const fvm_loc *loc, int depth, int *levels, fvm_diag *d);
    void *ctx;
} fvm_type_env;

/* Parses a type string. loc is the location of the string node in its document
 * (the column of its opening quote); errors point into the string. env may be
 * NULL (no aliases). Checks well-formedness: no placement inside a placement, a
 * sequence or a function; sizes within FVM_MAX_TENSOR_BYTES; nesting within
 * FVM_MAX_TYPE_DEPTH. The result lives in a. */
#define FVM_MAX_TYPE_DEPTH 64
FVM_API fvm_status fvm_type_parse(fvm_arena *a, const char *text, const fvm_type_env *env, const fvm_loc *loc,
                                  const fvm_type **out, fvm_diag *d);

struct fvm_doc;
/* The same for a type written in a document: node (a STRING node, or NULL)
 * places errors exactly through its quotes and escapes; parsing starts at
 * nesting depth 'depth' (the levels of the types around it, when it defines
 * an alias used inside another type); *height (optional) gets the levels this
 * text uses. */
FVM_API fvm_status fvm_type_parse_ex(fvm_arena *a, const char *text, const struct fvm_doc *node,
                                     const fvm_type_env *env, const fvm_loc *loc, int depth, int *height,
                                     const fvm_type **out, fvm_diag *d);

/* Writes t in canonical notation into buf (truncated with "..." if longer than
 * n-1). With use_alias, a node declared as an alias prints as its name. Returns buf. */
FVM_API const char *fvm_type_format(const fvm_type *t, bool use_alias, char *buf, size_t n);
/* The same into the arena (untruncated). */
FVM_API char *fvm_type_str(fvm_arena *a, const fvm_type *t, bool use_alias);

/* Structural equality (aliases ignored; unknown dims equal only unknown dims). */
FVM_API bool fvm_type_equal(const fvm_type *a, const fvm_type *b);
/* Can a value of type 'actual' be passed where 'formal' is expected? As equality,
 * but a dim matches when either side is unknown and struct names must agree
 * where both are named. */
FVM_API bool fvm_type_compatible(const fvm_type *actual, const fvm_type *formal);
/* Where actual does not fit formal (fvm_type_compatible), in words, into buf
 * (returned): "the value has no field 'metrics' (of type f32[])", ".model.w
 * has shape f32[3] where f32[4] is expected"; "" when it fits. */
FVM_API const char *fvm_type_mismatch(const fvm_type *actual, const fvm_type *formal, char *buf, size_t n);

/* Does t contain a federated type anywhere? */
FVM_API bool fvm_type_is_placed(const fvm_type *t);
/* Is t a tensor or a (nested) struct of tensors? (what elementwise ops and aggregations accept) */
FVM_API bool fvm_type_is_tensor_tree(const fvm_type *t);
/* Do all leaves of a tensor tree have a dtype accepted by pred? */
FVM_API bool fvm_type_all_leaves(const fvm_type *t, bool (*pred)(fvm_dtype));
/* Is s an identifier ([A-Za-z_][A-Za-z0-9_]*), as alias and field names must be? */
FVM_API bool fvm_is_identifier(const char *s);

/* The cotangent type of T, ct(T) (what a gradient with respect to a T is):
 * T, except that an all-equal value T@CLIENTS gets one cotangent per client,
 * {T}@CLIENTS, placed structs member by member (vm/transform/autodiff.h).
 * In arena a; NULL when it is full. */
FVM_API const fvm_type *fvm_type_cotangent(fvm_arena *a, const fvm_type *t);
/* Does t hold any float tensor? (Only those carry gradients.) */
FVM_API bool fvm_type_has_floats(const fvm_type *t);
/* Does t hold a sequence? */
FVM_API bool fvm_type_has_seq(const fvm_type *t);

/* Index of the field named name in a struct type, or -1. */
FVM_API int fvm_type_field_index(const fvm_type *t, const char *name);

#endif
