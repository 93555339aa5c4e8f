/* rules.h - declarations of the type rules named in ops.def (rules.c). */
#ifndef FVM_RULES_H
#define FVM_RULES_H

#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) fvm_status RULE(fvm_rctx *c, const fvm_type **out);
#include "ops.def"
#undef FVM_OP

#endif
