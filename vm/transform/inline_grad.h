/* inline_grad.h - the body the interpreter runs for a local function that takes gradients: each
 * derivative inlined and the elementwise instructions on structs it meets split field by field.
 *
 * A training step reads
 *   ga = grad[fn=loss, has_aux](model, batch); g = field(ga, 0);
 *   step = mul(lr, g); next = sub(model, step)
 * and the weight gradients are products made inside the pullback the passes
 * derived (a function of its own), while the update runs on whole structs in
 * the caller. Nothing planned inside one function can then join a product
 * and its update. This pass gives such a function a second body, for the
 * interpreter only, in which
 *   1. every grad and value_and_grad of a local pullback is replaced by the
 *      pullback's instructions (its cotangent the constant 1, as the op
 *      passes it), and the op's result built from the pullback's;
 *   2. a field of a struct the body builds is that struct's operand (no
 *      instruction);
 *   3. an elementwise instruction on structs, one of whose operands the
 *      body builds, becomes one instruction per field (fields of the other
 *      struct operands taken; a tensor operand meets every field, as the
 *      struct-lifted op has it) and a struct of them;
 *   4. the structs and fields the previous steps leave unused, and the
 *      pullback's instructions whose values are not used (the loss, when
 *      only its gradient is), are dropped.
 * So `next` becomes, per weight, sub(w, mul(lr, matmul(...))): a product
 * and its update in one function, which the fusion planner can join
 * (fuse_plan.h). Every instruction keeps its op, attributes, operands and
 * location, and the values are those of the written function bit for bit:
 * struct-lifted elementwise ops are defined field by field, every op is
 * pure, and the pullback's instructions are the ones its call runs.
 *
 * What is written (fedvm fmt, plans, 'fedvm grad') never sees this body: it
 * hangs off the function (fvm_func.inlined), outside the program's list of
 * functions. A run with fusion off (fvm_vm_config.unfused) runs the written
 * bodies. */
#ifndef FVM_INLINE_GRAD_H
#define FVM_INLINE_GRAD_H

#include "../ir/ir.h"

/* The instructions an inlined body may have; a function past it runs as
 * written. */
#define FVM_INLINE_MAX 16384

/* Sets f->inlined (and plans its fusion) when f is a checked, unplaced
 * function with a grad or value_and_grad instruction whose pullback is
 * unplaced; otherwise leaves it NULL. Running out of memory, or a body that
 * would not check (which the tests assert never happens on the programs
 * they run), leaves it NULL too: f then runs as written, with the same
 * values. */
void fvm_inline_grads(fvm_program *p, fvm_func *f);

#endif
