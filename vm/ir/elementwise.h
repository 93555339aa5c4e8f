/* elementwise.h - the elementwise ops of the op table (the FVM_EW rows of ops.def) as kernel steps: the unary and binary kernel enums, their names, each instruction's step.
 *
 * Everything here is generated from ops.def: adding an FVM_EW row adds its
 * enum value, its name and its step; vm/kernels/ compiles its scalar kernel
 * from the same row, the interpreter dispatches on these enums, and the
 * fusion planner (vm/transform/fuse_plan.h) chains the steps. */
#ifndef FVM_ELEMENTWISE_H
#define FVM_ELEMENTWISE_H

#include <stdbool.h>

#include "ir.h"
#include "ops.h"

/* For generators over the FVM_EW rows of ops.def: FVM_EW_IF_UNARY_##STEP(text)
 * is text in the rows whose step is UNARY and nothing in the others;
 * FVM_EW_IF_BINARY_##STEP(text) likewise for BINARY and COMPARE (the
 * binary kernel ops). */
#define FVM_EW_IF_UNARY_UNARY(...) __VA_ARGS__
#define FVM_EW_IF_UNARY_BINARY(...)
#define FVM_EW_IF_UNARY_COMPARE(...)
#define FVM_EW_IF_UNARY_SELECT(...)
#define FVM_EW_IF_UNARY_CAST(...)
#define FVM_EW_IF_UNARY_FILL(...)
#define FVM_EW_IF_BINARY_UNARY(...)
#define FVM_EW_IF_BINARY_BINARY(...) __VA_ARGS__
#define FVM_EW_IF_BINARY_COMPARE(...) __VA_ARGS__
#define FVM_EW_IF_BINARY_SELECT(...)
#define FVM_EW_IF_BINARY_CAST(...)
#define FVM_EW_IF_BINARY_FILL(...)

/* The ops whose step is UNARY, in ops.def order: FVM_UN_<ID>. */
typedef enum fvm_unary {
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    FVM_EW_IF_UNARY_##STEP(FVM_UN_##ID, )
#include "ops.def"
#undef FVM_EW
    FVM_UN_COUNT
} fvm_unary;

/* The ops whose step is BINARY or COMPARE, in ops.def order: FVM_BIN_<ID>. */
typedef enum fvm_binary {
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    FVM_EW_IF_BINARY_##STEP(FVM_BIN_##ID, )
#include "ops.def"
#undef FVM_EW
    FVM_BIN_COUNT
} fvm_binary;

/* The kinds of step (the step column of ops.def; COMPARE is a BINARY step
 * whose result is bool). */
typedef enum fvm_fstep_kind {
    FVM_FS_UNARY, /* op: an fvm_unary; one operand */
    FVM_FS_BINARY, /* op: an fvm_binary; two operands */
    FVM_FS_SELECT, /* three operands: predicate, then, else */
    FVM_FS_CAST, /* to dtype; one operand */
    FVM_FS_FILL, /* value in the operand's dtype, as fvm_k_fill converts it; the operand is not read */
} fvm_fstep_kind;

/* One elementwise step of a fused chain (fvm_k_fused): step s's operands
 * arg[j] are the chain's inputs (arg >= 0) or earlier steps (arg = -t-1 for
 * step t). */
typedef struct fvm_fstep {
    fvm_fstep_kind kind;
    int op; /* UNARY: an fvm_unary; BINARY: an fvm_binary */
    fvm_dtype dtype; /* CAST: the dtype cast to */
    double value; /* FILL: the value */
    int arg[3];
} fvm_fstep;

/* The most inputs and steps of a fused chain. */
#define FVM_FUSED_MAX_IN 6
#define FVM_FUSED_MAX_STEPS 16

/* The kernel op of an op whose step is UNARY, FVM_UN_COUNT for any other op. */
fvm_unary fvm_elementwise_unary(fvm_op op);
/* The kernel op of an op whose step is BINARY or COMPARE, FVM_BIN_COUNT for any other op. */
fvm_binary fvm_elementwise_binary(fvm_op op);
/* The op's name ("exp"); "?" for a value outside the enum. Static storage. */
const char *fvm_elementwise_unary_name(fvm_unary op);
const char *fvm_elementwise_binary_name(fvm_binary op);
/* Does the binary op compare (a bool result)? false outside the enum. */
bool fvm_elementwise_compares(fvm_binary op);
/* The step of an elementwise instruction (its args not filled in: all 0);
 * false for an instruction whose op is not elementwise. */
bool fvm_elementwise_step(const fvm_instr *in, fvm_fstep *st);

#endif
