/* check.h - the static checker: names, arities, attributes, dtypes, shapes, placements, recursion. */
#ifndef FVM_CHECK_H
#define FVM_CHECK_H

#include "ir.h"

/* Checks a loaded program (its attributes decoded by the loader) completely
 * before anything runs, reporting every error (file:line:col, JSON pointer,
 * what was expected and what was found). Fills in the checker's fields of
 * every function and instruction (slots, types, liveness). Also checks the
 * conventions of iterative programs: initialize ( -> S@SERVER) and next
 * (S@SERVER, ...) -> <S@SERVER, M@SERVER>. FVM_OK when the program is valid;
 * else d's errors, the loader's and the checker's, are in source order
 * (fvm_diag_sort).
 * What runs a program needs more: the passes after checking
 * (vm/transform/passes.h, fvm_compile does both). */
FVM_API fvm_status fvm_check(fvm_program *p, fvm_diag *d);

/* Checks function f, added to checked program p after fvm_check (a derived
 * function or a generated helper: its attributes decoded, the functions it
 * names checked already). FVM_OK when f checks (f->ok). */
FVM_API fvm_status fvm_check_func(fvm_program *p, fvm_func *f, fvm_diag *d);

/* Can f be differentiated with respect to its parameter k? Its type must
 * hold a float and no sequence; else an error in d at loc (which may be
 * NULL), FVM_ERR_TYPE. The one check of the grad ops and of fedvm grad. */
FVM_API fvm_status fvm_check_wrt(const fvm_func *f, int k, fvm_diag *d, const fvm_loc *loc);

#endif
