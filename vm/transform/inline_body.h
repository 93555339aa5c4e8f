/* inline_body.h - the body the interpreter runs for a local function: its calls and derivatives inlined,
 * the elementwise instructions on structs they meet split field by field.
 *
 * A training step reads
 *   ga = grad[fn=loss, has_aux](model, batch); g = field(ga, 0);
 *   step = mul(lr, g); next = sub(model, step)
 * and the weight gradients are products made inside the pullback the passes
 * derived (a function of its own), while the update runs on whole structs in
 * the caller. A loop's backward body calls the step's pullback and adds its
 * weight gradients to the carried ones the same way. Nothing planned inside
 * one function can then join a product and its update. This pass gives
 * such a function a second body, for the interpreter only, in which
 *   1. every grad and value_and_grad of an unplaced pullback is replaced by
 *      the pullback's instructions (its cotangent the constant 1, as the op
 *      passes it), and the op's result built from the pullback's; every
 *      call of an unplaced function by the callee's instructions (at most
 *      8 deep; a callee whose entry check its operands' types might
 *      fail stays a call);
 *   2. a field of a struct the body builds is that struct's operand (no
 *      instruction), and a field taken already is the same instruction's
 *      value (each field of a struct is taken once);
 *   3. an elementwise instruction on structs, one of whose operands the
 *      body builds, becomes one instruction per field (fields of the other
 *      struct operands taken; a tensor operand meets every field, as the
 *      struct-lifted op has it) and a struct of them;
 *   4. the structs and fields the previous steps leave unused, and the
 *      inlined instructions whose values are not used and that cannot fail
 *      (constants, elementwise ops of fully known shapes but an integer
 *      division), are dropped: an unused instruction that might fail stays,
 *      so that the written function's error is never turned into a result;
 *   5. an elementwise instruction or product used once, by an elementwise
 *      instruction, moves to just before it;
 *   6. every field instruction moves to just after the instruction binding
 *      its struct (a parameter's: to the top), so that a struct whose uses
 *      are fields dies before the body's work.
 * So `next` becomes, per weight, sub(w, mul(lr, matmul(...))), and the
 * backward body's sum add(acc_w, matmul(...)): a product and its update
 * together, which the fusion planner joins (fuse_plan.h); and w (acc_w),
 * held by its slot alone where the loop gives its state to the body,
 * dies there, so that the update is written into its buffer (vm/exec/fuse.c). Every
 * instruction keeps its op, attributes, operands and location, and the
 * values are those of the written function bit for bit: struct-lifted
 * elementwise ops are defined field by field, every op is pure, and the
 * inlined instructions are the ones the call runs.
 *
 * What is written (fedvm fmt, plans, 'fedvm grad') never sees this body: it
 * hangs off the function (fvm_func.inlined), outside the program's list of
 * functions. A run with fusion off (fvm_vm_config.unfused) runs the written
 * bodies. A run's step count (--max-steps) counts the written function's
 * instructions as it is entered, and no entry of an inlined callee. */
#ifndef FVM_INLINE_BODY_H
#define FVM_INLINE_BODY_H

#include "../ir/ir.h"

/* The instructions a body may have: a call or derivative that would take
 * it past this (by its callee's size with everything inlined) stays a call.
 * And the instructions all of a program's bodies may have: past it,
 * functions run as written. Both bound the time and memory a program's
 * passes take (a call tree 30 deep that calls each level twice would
 * inline into 2^30 copies). */
#define FVM_INLINE_MAX 4096
#define FVM_INLINE_TOTAL (1L << 18)

/* Sets f->inlined (and plans its fusion) when f is a checked, unplaced
 * function with a derivative or call step 1 inlines; otherwise leaves it
 * NULL. Running out of memory, or a body that
 * would not check (which the tests assert never happens on the programs
 * they run), leaves it NULL too: f then runs as written, with the same
 * values. */
void fvm_inline_body(fvm_program *p, fvm_func *f);

#endif
