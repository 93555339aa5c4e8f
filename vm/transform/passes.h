/* passes.h - the transforms after checking that a program needs before it runs, in order.
 *
 * The data path: load (format/ir_read.h: documents to the IR, attributes
 * decoded) -> check (vm/ir/check.h: names, types, placements) -> these
 * passes -> run (vm/exec) or lower into a plan (vm/transform/plan_*.c):
 *
 *   1. derived functions: every grad, value_and_grad and vjp instruction
 *      gets the pullback it calls (vm/transform/autodiff.h), every
 *      federated_select its client half (what a round form maps over the
 *      clients): plain-IR functions added to the program, decoded and
 *      checked like loaded ones;
 *   2. phases: each federated function's client work fused with the
 *      aggregations that consume it (vm/transform/phases.h);
 *   3. fusion: chains of elementwise instructions run as one pass;
 *   4. inlined bodies: a local function taking gradients gets a body with
 *      its pullbacks inlined, for the interpreter (inline_body.h).
 *
 * Each pass sees only functions that checked whole (f->ok). */
#ifndef FVM_PASSES_H
#define FVM_PASSES_H

#include "../ir/ir.h"

/* Runs the passes over checked program p (fvm_check returned FVM_OK).
 * Errors (an op that cannot be differentiated on the way from a parameter to
 * the result, a derivation past its limits) are located at the instruction
 * at fault. Once per program: again is a no-op (p->compiled). */
FVM_API fvm_status fvm_passes_run(fvm_program *p, fvm_diag *d);

/* fvm_check, then fvm_passes_run: what a loaded program needs before
 * anything runs it, and what 'fedvm check' reports. */
FVM_API fvm_status fvm_compile(fvm_program *p, fvm_diag *d);

/* Derives, in a compiled program, the pullback of function fn with respect
 * to its parameter wrt (NULL: the first) as a grad instruction would:
 *   fn'(params..., ct) -> <value=fn(params...), grads=<cotangent of wrt>>
 * The new function and the helpers it uses are added to p and checked
 * ('fedvm grad'). */
FVM_API fvm_status fvm_passes_pullback(fvm_program *p, const char *fn, const char *wrt, fvm_func **out, fvm_diag *d);

#endif
