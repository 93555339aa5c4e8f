/* rules.h - declarations of the type rules named in ops.def (rules.c). */
#ifndef FVM_RULES_H
#define FVM_RULES_H

#include <stdio.h>
#include <stdlib.h>

#include "check.h"

/* The context a type rule sees (rules.c). */
typedef struct fvm_rctx {
    fvm_arena *a;
    fvm_diag *d;
    const fvm_program *p;
    fvm_func *f; /* the function being checked */
    fvm_instr *in; /* the instruction */
    const fvm_type **args;
    int nargs;
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

/* Helpers the rule files share (rules.c). */
const fvm_type *fvm_rule_tensor(fvm_rctx *c, fvm_dtype dt, const fvm_dims *dims);
/* Argument i must be a tensor (else an error naming 'what'). */
fvm_status fvm_rule_want_tensor(fvm_rctx *c, int i, const char *what);
/* Argument i must be a random key u32[2]. */
fvm_status fvm_rule_want_key(fvm_rctx *c, int i);
/* Gives an error reported without a location (by a shape rule) the location of argument argi, of the attributes
 * (FVM_RLOC_ATTRS) or of the instruction, and the op's name; returns s. */
fvm_status fvm_rule_located(fvm_rctx *c, fvm_status s, int argi);

#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) \
    fvm_status RULE(fvm_rctx *c, const fvm_type **out);
#include "ops.def"
#undef FVM_OP

#endif
