/* plans.h - the plan formats: each lowers a checked program (the round forms) and serializes it (format/PLANS.md).
 *
 * The formats are listed once, in fvm_plan_formats (plans.c). Adding a
 * format means writing its writer (format/plan_<format>.c when it only
 * serializes a program or a lowered plan, vm/transform/plan_<format>.c when
 * it lowers) and adding its entry. */
#ifndef FVM_PLANS_H
#define FVM_PLANS_H

#include "../vm/transform/plan.h"

/* Every format, in the order help texts list them; fvm_plan_nformats entries. */
FVM_API extern const fvm_plan_format fvm_plan_formats[];
FVM_API extern const int fvm_plan_nformats;

/* The format named name, or NULL when there is none (static storage). */
FVM_API const fvm_plan_format *fvm_plan_format_lookup(const char *name);

#endif
