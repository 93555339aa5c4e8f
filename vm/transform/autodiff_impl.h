/* autodiff_impl.h - autodiff's internals, shared by autodiff.c (the derivation) and ad_helpers.c (the
 * generated helpers and the derivative ops as functions); internal, not for the rules (autodiff.h). */
#ifndef FVM_AUTODIFF_IMPL_H
#define FVM_AUTODIFF_IMPL_H

#include "autodiff.h"
#include "../core/names.h"

/* ---- caches (one per program, in its arena) ------------------------------------------ */

typedef struct pb_entry {
    const fvm_func *f;
    uint64_t mask;
    bool jvp; /* pb is f's forward derivative F.jvp(P), not its pullback */
    bool aux; /* pb is the pullback of f's <value, aux> for its value (fvm_ad_env.has_aux) */
    fvm_func *pb;
    struct pb_entry *next;
} pb_entry;

typedef struct helper_entry {
    const char *key;
    fvm_func *fn;
    struct helper_entry *next;
} helper_entry;

/* A function's size with every call inlined, up to FVM_AD_MAX_INLINE + 1. */
typedef struct size_entry {
    const fvm_func *f;
    int size;
} size_entry;

struct fvm_ad_cache {
    pb_entry *pullbacks;
    helper_entry *helpers;
    size_entry *sizes; /* open addressing by function */
    size_t scap, nsizes;
    long emitted; /* instructions derived into the program so far (FVM_AD_MAX_DERIVED) */
};

/* ---- building a function ------------------------------------------------------------ */

typedef struct builder {
    fvm_func *f;
    int cap;
    fvm_names names; /* the names bound so far */
    const fvm_loc *loc; /* of the instruction being differentiated */
    const char *hint; /* base of the names fvm_ad_op gives: "d.<value>" in a backward step */
    struct builder *outer;
} builder;

struct fvm_ad {
    const fvm_ad_env *env;
    fvm_program *p;
    fvm_arena *a;
    struct fvm_ad_cache *cache;
    builder *b;
    int depth;
    bool failed;
    fvm_status status; /* of the first error, when failed */
    const fvm_func *top; /* the function whose derivation was asked for */
};

/* Reports running out of memory (once) and marks the derivation failed. */
void fvm_ad_nomem(fvm_ad *ad);

/* Field i of s, and op[{"fn": fn}](args) (NULL when fn is), emitted. */
const char *fvm_ad_field(fvm_ad *ad, const char *s, int i);
const char *fvm_ad_fn_op(fvm_ad *ad, fvm_op op, const fvm_func *fn, int nargs, const char *const *args);

#endif
