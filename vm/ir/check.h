/* check.h - the static checker: names, arities, attributes, dtypes, shapes, placements, recursion. */
#ifndef FVM_CHECK_H
#define FVM_CHECK_H

#include "ir.h"

/* Checks a loaded program completely before anything runs, reporting every
 * error (file:line:col, JSON pointer, what was expected and what was found).
 * Fills in the checker's fields of every function and instruction (slots,
 * types, decoded attributes, liveness). Also checks the conventions of
 * iterative programs: initialize ( -> S@SERVER) and next (S@SERVER, ...) ->
 * <S@SERVER, M@SERVER>. FVM_OK when the program is valid. */
fvm_status fvm_check(fvm_program *p, fvm_diag *d);

/* Derives, in a checked program, the pullback of function fn with respect to
 * its parameter wrt (NULL: the first) as a grad instruction would:
 *   fn'(params..., ct) -> <value=fn(params...), grads=<cotangent of wrt>>
 * The new function and the helpers it uses are added to p and checked. */
fvm_status fvm_check_derive(fvm_program *p, const char *fn, const char *wrt, fvm_func **out, fvm_diag *d);

/* The context a type rule sees (rules.c). */
typedef struct fvm_rctx {
    fvm_arena *a;
    fvm_diag *d;
    const fvm_program *p;
    fvm_func *f;   /* the function being checked */
    fvm_instr *in; /* the instruction */
    const fvm_type **args;
    int nargs;
    /* Checks a function the rule adds to the program (derived functions). */
    fvm_status (*check_new)(void *ctx, fvm_func *f);
    void *check_ctx;
} fvm_rctx;

/* A type rule: computes the result type of c->in into *out, or reports why
 * it can't. *out == NULL with FVM_OK means "already reported elsewhere"
 * (a callee that failed its own check), so errors don't cascade. */
typedef fvm_status (*fvm_rule_fn)(fvm_rctx *c, const fvm_type **out);

/* Reports an error at argument i (i >= 0), the attributes (FVM_RLOC_ATTRS) or
 * the instruction (FVM_RLOC_INSTR). Prefixes the message with the op name. */
enum { FVM_RLOC_INSTR = -1, FVM_RLOC_ATTRS = -2 };
fvm_status fvm_rerr(fvm_rctx *c, int i, fvm_status code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A type as text for messages (arena string). */
const char *fvm_rtype(fvm_rctx *c, const fvm_type *t);

#endif
