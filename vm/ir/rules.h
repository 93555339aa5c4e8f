/* rules.h - declarations of the type rules named in ops.def (rules.c). */
#ifndef FVM_RULES_H
#define FVM_RULES_H

#include <stdio.h>
#include <stdlib.h>

#include "check.h"

/* Helpers the rule files share (rules.c). */
const fvm_type *fvm_rule_tensor(fvm_rctx *c, fvm_dtype dt, const fvm_dims *dims);
/* Argument i must be a tensor (else an error naming 'what'). */
fvm_status fvm_rule_want_tensor(fvm_rctx *c, int i, const char *what);
/* Argument i must be a random key u32[2]. */
fvm_status fvm_rule_want_key(fvm_rctx *c, int i);
/* Gives an error reported without a location (by a shape rule) the location of argument argi, of the attributes
 * (FVM_RLOC_ATTRS) or of the instruction, and the op's name; returns s. */
fvm_status fvm_rule_located(fvm_rctx *c, fvm_status s, int argi);

#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) fvm_status RULE(fvm_rctx *c, const fvm_type **out);
#include "ops.def"
#undef FVM_OP

#endif
