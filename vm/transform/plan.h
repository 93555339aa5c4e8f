/* plan.h - plan writers: a checked program re-emitted for another system, one writer per format (PLANS.md).
 *
 * What every writer shares: its options, its signature, and the choice of
 * the function a plan is made of. The formats are listed once, in
 * format/plans.c. */
#ifndef FVM_PLAN_H
#define FVM_PLAN_H

#include <stddef.h>

#include "../ir/ir.h"
#include "../core/status.h"

/* What a plan is made of. All strings borrowed. */
typedef struct fvm_plan_opts {
    const char *fn; /* the function to emit; NULL: the program's default (fvm_plan_entry) */
} fvm_plan_opts;

/* A plan writer: the plan of checked program p (fvm_check returned FVM_OK)
 * as text in *out (malloc'd, NUL-terminated, the caller frees it) and its
 * length in *len. On failure *out is NULL and the errors are in d. */
typedef fvm_status (*fvm_plan_writer)(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len,
                                      fvm_diag *d);

typedef struct fvm_plan_format {
    const char *name; /* as given to 'fedplan --to' */
    const char *summary; /* one line for help texts */
    fvm_plan_writer write;
} fvm_plan_format;

/* The function a plan is made of: the one named fn, or (fn NULL) the
 * iterative process's 'next', else 'main'. When there is no such function:
 * FVM_ERR_NAME located at the program's "functions" object (file:line:col,
 * pointer /functions), with a suggestion for a misspelt fn or else the
 * names of the functions the program's file defines. *out is borrowed from p. */
FVM_API fvm_status fvm_plan_entry(const fvm_program *p, const char *fn, const fvm_func **out, fvm_diag *d);

#endif
