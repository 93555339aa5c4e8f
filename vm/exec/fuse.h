/* fuse.h - chains of elementwise instructions run as one pass over memory: planned once per function, run by the interpreter.
 *
 * An elementwise instruction (unary, binary, select, cast, zeros_like,
 * ones_like) whose value is used once, by another elementwise instruction,
 * and nowhere else, need not exist as a tensor: the two can be computed
 * together, block by block (fvm_k_fused). A chain is such a tree of
 * instructions: its root is the instruction whose value leaves the chain,
 * its members the others. Members are deferred to their root, which
 * computes the whole chain where the root stands; since every instruction
 * is pure, the values are those of running the instructions one by one,
 * bit for bit. The SGD step x - lr * g, a bias add and its ReLU, a ReLU's
 * mask applied to a cotangent and a cast and scaling of pixels are such
 * chains.
 *
 * The chain's result is written into the buffer of an input that dies with
 * the chain, when nothing else holds that input (refcounts of 1) and it has
 * the result's dtype and shape; otherwise into a new buffer. */
#ifndef FVM_FUSE_H
#define FVM_FUSE_H

#include "../core/arena.h"
#include "../ir/ir.h"
#include "../kernels/kernels.h"

typedef struct fvm_ctx fvm_ctx;
typedef struct fvm_value fvm_value;

typedef struct fvm_fused {
    int root;          /* the instruction computing the chain; its slot gets the value */
    int nmembers;      /* the other instructions, in written order */
    int *members;
    int nin;           /* the chain's inputs, as slots */
    int *in;
    int nsteps;        /* members then root, in written order */
    fvm_fstep *steps;  /* operands: inputs by their index in 'in' */
    int nrelease;      /* slots whose last use is in the chain: released after the root */
    int *release;
} fvm_fused;

typedef struct fvm_fusion {
    fvm_fused **chain_at; /* per instruction: the chain it is the root of, or NULL */
    bool *deferred;       /* per instruction: a member, computed by its root */
} fvm_fusion;

/* The chains of a checked function (slots, types and liveness filled), in
 * arena a; NULL when it has none, when it runs in phases (phases.h), or
 * when out of memory (the instructions then run one by one, which is always
 * correct). */
fvm_fusion *fvm_fusion_plan(fvm_arena *a, const fvm_func *f);

/* Runs chain c of function f with the function's slots: its value goes to
 * the root's slot (the members' slots stay empty). Inputs that are not
 * tensors or structs of them, and chains the fused kernel does not take
 * (an integer division, dtypes that do not fit: see fvm_k_fused_dtype),
 * run one instruction at a time, so errors are those of the instructions. */
fvm_status fvm_exec_fused(fvm_ctx *x, const fvm_func *f, const fvm_fused *c, fvm_value **slots);

#endif
