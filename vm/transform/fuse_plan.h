/* fuse_plan.h - planning chains of elementwise instructions that run as one pass over memory (once per function, after checking).
 *
 * An elementwise instruction (an FVM_EW row of ops.def: unary, binary,
 * select, cast, zeros_like, ones_like) whose value is used once, by another
 * elementwise instruction, and nowhere else, need not exist as a tensor: the
 * two can be computed together, block by block (fvm_k_fused). A chain is
 * such a tree of instructions: its root is the instruction whose value
 * leaves the chain, its members the others. Members are deferred to their
 * root, which computes the whole chain where the root stands; since every
 * instruction is pure, the values are those of running the instructions
 * one by one, bit for bit. The SGD step x - lr * g, a bias add and its ReLU,
 * a ReLU's mask applied to a cotangent and a cast and scaling of pixels are
 * such chains. The interpreter runs them (vm/exec/fuse.h). A chain that is
 * an SGD update of a matrix takes the product it updates with, when only
 * the chain reads it: the weight gradient's product and the step then make
 * one pass (in a function whose derivatives are inlined: inline_body.h). */
#ifndef FVM_FUSE_PLAN_H
#define FVM_FUSE_PLAN_H

#include "../core/arena.h"
#include "../ir/elementwise.h"
#include "../ir/ir.h"

typedef struct fvm_fused {
    int root; /* the instruction computing the chain; its slot gets the value */
    int nmembers; /* the other instructions, in written order */
    int *members;
    int nin; /* the chain's inputs, as slots */
    int *in;
    int nsteps; /* members then root, in written order */
    fvm_fstep *steps; /* operands: inputs by their index in 'in' */
    int nrelease; /* slots whose last use is in the chain: released after the root */
    int *release;
    /* The update base - scale * product, or the accumulation base +
     * product, of a matmul only the chain reads (the chain is mul(scale,
     * product), or mul(product, scale), then sub from base; or add(base,
     * product); f32 matrices and an f32 scalar, by their types): that
     * matmul instruction, deferred to the root, which makes the product
     * and its update together (fvm_k_matmul_update), and which of 'in'
     * are the scale (-1 for an accumulation), the base and the product;
     * product is -1 for every other chain. */
    int product, scale_in, base_in, product_in;
} fvm_fused;

typedef struct fvm_fusion {
    fvm_fused **chain_at; /* per instruction: the chain it is the root of, or NULL */
    bool *deferred; /* per instruction: a member, computed by its root */
} fvm_fusion;

/* The chains of a checked function (slots, types and liveness filled), in
 * arena a; NULL when it has none, when it runs in phases (phases.h), or
 * when out of memory (the instructions then run one by one, which is always
 * correct). */
fvm_fusion *fvm_fusion_plan(fvm_arena *a, const fvm_func *f);

#endif
