/* ops.c - the op and attribute tables and their name lookups. */
#include "ops.h"

#include "aggregation.h"

#include <stddef.h>
#include <string.h>

/* The DOMAIN column of attrs.def and op_attrs.def, as designated initializers. */
#define D(...) \
    { \
        __VA_ARGS__ \
    }
#define ANY .one_of = NULL
#define MIN(x) .has_min = true, .min = (x)
#define ABOVE(x) .has_min = true, .min_open = true, .min = (x)
#define MAX(x) .has_max = true, .max = (x)
#define BELOW(x) .has_max = true, .max_open = true, .max = (x)
#define LEN(lo, hi) .has_len = true, .min_len = (lo), .max_len = (hi)
#define ONE_OF(values) .one_of = (values)

const fvm_attr_info fvm_attr_table[FVM_ATTR_COUNT] = {
#define FVM_ATTR(ID, NAME, KIND, FIELD, DOMAIN) \
    [FVM_ATTR_##ID] = {NAME, FVM_AK_##KIND, offsetof(fvm_attrs, FIELD), DOMAIN},
#include "attrs.def"
#undef FVM_ATTR
};

/* The FUNC attributes are the first FVM_NFUNC_ATTRS of attrs.def. */
#define FVM_ATTR(ID, NAME, KIND, FIELD, DOMAIN) \
    _Static_assert((FVM_AK_##KIND == FVM_AK_FUNC) == (FVM_ATTR_##ID < FVM_NFUNC_ATTRS), \
                   "attrs.def: the FUNC attributes come first, FVM_NFUNC_ATTRS of them (" #ID ")");
#include "attrs.def"
#undef FVM_ATTR

static const struct {
    fvm_op op;
    fvm_attr_id id;
    fvm_attr_domain dom;
} op_domains[] = {
#define FVM_OP_ATTR(OP, ATTR, DOMAIN) {FVM_OP_##OP, FVM_ATTR_##ATTR, DOMAIN},
#include "op_attrs.def"
#undef FVM_OP_ATTR
};

#undef D
#undef ANY
#undef MIN
#undef ABOVE
#undef MAX
#undef BELOW
#undef LEN
#undef ONE_OF

_Static_assert(FVM_ATTR_COUNT <= 64, "attribute masks are 64-bit");

const fvm_op_info fvm_op_table[FVM_OP_COUNT] = {
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) \
    [FVM_OP_##ID] = {NAME, MINA, MAXA, FLAGS, ATTRS, REQ},
#include "ops.def"
#undef FVM_OP
};

fvm_attr_id fvm_attr_lookup(const char *name)
{
    for (int i = 0; i < FVM_ATTR_COUNT; i++)
        if (strcmp(fvm_attr_table[i].name, name) == 0)
            return (fvm_attr_id)i;
    return FVM_ATTR_COUNT;
}

fvm_op fvm_op_lookup(const char *name)
{
    for (int i = 0; i < FVM_OP_COUNT; i++)
        if (strcmp(fvm_op_table[i].name, name) == 0)
            return (fvm_op)i;
    return FVM_OP_COUNT;
}

const fvm_op_info *fvm_op_info_at(int op)
{
    return op >= 0 && op < FVM_OP_COUNT ? &fvm_op_table[op] : NULL;
}

const fvm_attr_info *fvm_attr_info_at(int id)
{
    return id >= 0 && id < FVM_ATTR_COUNT ? &fvm_attr_table[id] : NULL;
}

const fvm_attr_domain *fvm_attr_domain_of(fvm_op op, fvm_attr_id id)
{
    for (size_t i = 0; i < sizeof op_domains / sizeof *op_domains; i++)
        if (op_domains[i].op == op && op_domains[i].id == id)
            return &op_domains[i].dom;
    return &fvm_attr_table[id].dom;
}

/* ---- aggregations ----------------------------------------------------------------- */

#define FVM_AGG_OP_ADD FVM_OP_ADD
#define FVM_AGG_OP_MINIMUM FVM_OP_MINIMUM
#define FVM_AGG_OP_MAXIMUM FVM_OP_MAXIMUM
#define FVM_AGG_OP_ADD_MODULO FVM_OP_COUNT
#define FVM_AGG_OP_ADD_EXACT FVM_OP_COUNT
#define FVM_AGG_OP_USER FVM_OP_COUNT

static const struct {
    bool valid;
    fvm_agg_rule rule;
} agg_rules[FVM_OP_COUNT] = {
#define FVM_AGG(OP, CLIENT_ARGS, LIFT, COMBINE, REPORT, EMPTY) \
    [FVM_OP_##OP] = {true, \
                     {CLIENT_ARGS, FVM_AGG_LIFT_##LIFT, FVM_AGG_COMBINE_##COMBINE, FVM_AGG_OP_##COMBINE, \
                      FVM_AGG_REPORT_##REPORT, FVM_AGG_EMPTY_##EMPTY}},
#include "aggregations.def"
#undef FVM_AGG
};

/* Every row is an OPF_AGG op, and there are as many rows as OPF_AGG ops:
 * each aggregating op has exactly one rule. */
enum {
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) FVM_OP_FLAGS_##ID = (FLAGS),
#include "ops.def"
#undef FVM_OP
};
#define FVM_AGG(OP, CLIENT_ARGS, LIFT, COMBINE, REPORT, EMPTY) \
    _Static_assert(FVM_OP_FLAGS_##OP & OPF_AGG, "aggregations.def: " #OP " is not OPF_AGG in ops.def");
#include "aggregations.def"
#undef FVM_AGG
enum {
    NAGG_OPS = 0
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) +(((FLAGS)&OPF_AGG) != 0)
#include "ops.def"
#undef FVM_OP
    ,
    NAGG_ROWS = 0
#define FVM_AGG(OP, CLIENT_ARGS, LIFT, COMBINE, REPORT, EMPTY) +1
#include "aggregations.def"
#undef FVM_AGG
};
_Static_assert(NAGG_OPS == NAGG_ROWS, "every OPF_AGG op of ops.def needs its row in aggregations.def");

const fvm_agg_rule *fvm_agg_rule_of(fvm_op op)
{
    return (unsigned)op < FVM_OP_COUNT && agg_rules[op].valid ? &agg_rules[op].rule : NULL;
}

int fvm_modsum_bits(const fvm_type *t)
{
    if (t->kind == FVM_T_TENSOR)
        return t->u.tensor.dtype == FVM_DTYPE_U8                                          ? 8
               : t->u.tensor.dtype == FVM_DTYPE_I32 || t->u.tensor.dtype == FVM_DTYPE_U32 ? 32
               : t->u.tensor.dtype == FVM_DTYPE_I64                                       ? 64
                                                                                          : 0;
    if (t->kind != FVM_T_STRUCT)
        return 0;
    int bits = 64;
    for (int i = 0; i < t->u.strct.n; i++) {
        int b = fvm_modsum_bits(t->u.strct.elems[i]);
        if (b < bits)
            bits = b;
    }
    return bits;
}

uint64_t fvm_int_leaf_max(const fvm_type *t)
{
    if (t->kind == FVM_T_TENSOR)
        switch (t->u.tensor.dtype) {
        case FVM_DTYPE_U8:
            return UINT8_MAX;
        case FVM_DTYPE_I32:
            return INT32_MAX;
        case FVM_DTYPE_U32:
            return UINT32_MAX;
        case FVM_DTYPE_I64:
            return INT64_MAX;
        default:
            return 0;
        }
    if (t->kind != FVM_T_STRUCT)
        return 0;
    uint64_t m = INT64_MAX;
    for (int i = 0; i < t->u.strct.n; i++) {
        uint64_t b = fvm_int_leaf_max(t->u.strct.elems[i]);
        if (b < m)
            m = b;
    }
    return m;
}

bool fvm_agg_is_secure(const fvm_agg_rule *r)
{
    return r && (r->lift == FVM_AGG_LIFT_MODULO || r->lift == FVM_AGG_LIFT_BOUNDED);
}

fvm_secure fvm_secure_of(fvm_op op, const fvm_attrs *a)
{
    fvm_secure s = {.op = op};
    switch (op) {
    case FVM_OP_FEDERATED_SECURE_SUM_BITWIDTH:
        s.lift = FVM_AGG_LIFT_MODULO;
        s.modulus = a->bitwidth >= 64 ? 0 : UINT64_C(1) << a->bitwidth;
        break;
    case FVM_OP_FEDERATED_SECURE_MODULAR_SUM:
        s.lift = FVM_AGG_LIFT_MODULO;
        s.modulus = (uint64_t)a->modulus;
        break;
    case FVM_OP_FEDERATED_SECURE_SUM:
        s.lift = FVM_AGG_LIFT_BOUNDED;
        s.max_input = (a->present & A(MAX_INPUT)) ? a->max_input : -1;
        break;
    default:
        s.op = FVM_OP_COUNT;
    }
    return s;
}
