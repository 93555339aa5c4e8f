/* elementwise.c - the elementwise ops' kernel enums mapped to and from the op table, and each instruction's step (generated from the FVM_EW rows of ops.def). */
#include "elementwise.h"

#include <string.h>

/* Every FVM_EW row names its kernel, its dtypes and its VJP rule: a rule
 * of its own, or vjp_none when no gradient flows, never vjp_unsupported
 * (EW_UNSUPPORTED(v) is 1 for that name and 0 for any other, the
 * preprocessor's probe idiom). Its step is one of fvm_fstep_kind's (any
 * other name does not compile: see ew_of below). */
#define EW_PROBE_vjp_unsupported ~, 1
#define EW_SECOND(a, b, ...) b
#define EW_PROBE(...) EW_SECOND(__VA_ARGS__, 0, ~)
#define EW_UNSUPPORTED(v) EW_PROBE(EW_PROBE_##v)
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    _Static_assert(sizeof #KERNEL > 1 && sizeof #DTYPES > 1 && sizeof #VJP > 1 && !EW_UNSUPPORTED(VJP), \
                   NAME ": an elementwise op names its kernel, its dtypes and its VJP rule in ops.def");
#include "ops.def"
#undef FVM_EW

/* Per op: its step's kind + 1 (0: not elementwise), its kernel op (an
 * fvm_unary or fvm_binary), its fill value. */
typedef struct ew_info {
    signed char kind;
    signed char kernel;
    bool compares;
    double value;
} ew_info;

#define EW_UNARY(ID, KERNEL) \
    { \
        FVM_FS_UNARY + 1, FVM_UN_##ID, false, 0 \
    }
#define EW_BINARY(ID, KERNEL) \
    { \
        FVM_FS_BINARY + 1, FVM_BIN_##ID, false, 0 \
    }
#define EW_COMPARE(ID, KERNEL) \
    { \
        FVM_FS_BINARY + 1, FVM_BIN_##ID, true, 0 \
    }
#define EW_SELECT(ID, KERNEL) \
    { \
        FVM_FS_SELECT + 1, 0, false, 0 \
    }
#define EW_CAST(ID, KERNEL) \
    { \
        FVM_FS_CAST + 1, 0, false, 0 \
    }
#define EW_FILL(ID, KERNEL) \
    { \
        FVM_FS_FILL + 1, 0, false, (KERNEL) \
    }

static const ew_info ew_of[FVM_OP_COUNT] = {
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    [FVM_OP_##ID] = EW_##STEP(ID, KERNEL),
#include "ops.def"
#undef FVM_EW
};

_Static_assert(FVM_UN_COUNT <= 127 && FVM_BIN_COUNT <= 127, "kernel ops fit a signed char");

/* The op of each kernel op. */
static const fvm_op unary_op[FVM_UN_COUNT] = {
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    FVM_EW_IF_UNARY_##STEP([FVM_UN_##ID] = FVM_OP_##ID, )
#include "ops.def"
#undef FVM_EW
};

static const fvm_op binary_op[FVM_BIN_COUNT] = {
#define FVM_EW(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP, STEP, KERNEL, DTYPES) \
    FVM_EW_IF_BINARY_##STEP([FVM_BIN_##ID] = FVM_OP_##ID, )
#include "ops.def"
#undef FVM_EW
};

fvm_unary fvm_elementwise_unary(fvm_op op)
{
    return (unsigned)op < FVM_OP_COUNT && ew_of[op].kind == FVM_FS_UNARY + 1 ? (fvm_unary)ew_of[op].kernel
                                                                             : FVM_UN_COUNT;
}

fvm_binary fvm_elementwise_binary(fvm_op op)
{
    return (unsigned)op < FVM_OP_COUNT && ew_of[op].kind == FVM_FS_BINARY + 1 ? (fvm_binary)ew_of[op].kernel
                                                                              : FVM_BIN_COUNT;
}

const char *fvm_elementwise_unary_name(fvm_unary op)
{
    return (unsigned)op < FVM_UN_COUNT ? fvm_op_table[unary_op[op]].name : "?";
}

const char *fvm_elementwise_binary_name(fvm_binary op)
{
    return (unsigned)op < FVM_BIN_COUNT ? fvm_op_table[binary_op[op]].name : "?";
}

bool fvm_elementwise_compares(fvm_binary op)
{
    return (unsigned)op < FVM_BIN_COUNT && ew_of[binary_op[op]].compares;
}

bool fvm_elementwise_step(const fvm_instr *in, fvm_fstep *st)
{
    memset(st, 0, sizeof *st);
    if ((unsigned)in->op >= FVM_OP_COUNT || !ew_of[in->op].kind)
        return false;
    const ew_info *e = &ew_of[in->op];
    st->kind = (fvm_fstep_kind)(e->kind - 1);
    st->op = e->kernel;
    st->value = e->value;
    if (st->kind == FVM_FS_CAST)
        st->dtype = in->a.dtype;
    return true;
}
