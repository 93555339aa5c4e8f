/* fuse.h - running the chains of elementwise instructions planned by vm/transform/fuse_plan.h, as one pass over memory.
 *
 * The chain's result is written into the buffer of an input that dies with
 * the chain, when nothing else holds that input (refcounts of 1) and it has
 * the result's dtype and shape; otherwise into a new buffer. */
#ifndef FVM_FUSE_H
#define FVM_FUSE_H

#include "../transform/fuse_plan.h"

typedef struct fvm_ctx fvm_ctx;
typedef struct fvm_value fvm_value;

/* Runs chain c of function f with the function's slots: its value goes to
 * the root's slot (the members' slots stay empty). Inputs that are not
 * tensors or structs of them, and chains the fused kernel does not take
 * (an integer division, dtypes that do not fit: see fvm_k_fused_dtype),
 * run one instruction at a time, so errors are those of the instructions;
 * so do all chains when the VM's kernel provider has no fused kernel. */
fvm_status fvm_exec_fused(fvm_ctx *x, const fvm_func *f, const fvm_fused *c, fvm_value **slots);

#endif
