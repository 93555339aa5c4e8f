/* ops.c - the op and attribute tables and their name lookups. */
#include "ops.h"

#include <stddef.h>
#include <string.h>

/* The DOMAIN column of attrs.def and op_attrs.def, as designated initializers. */
#define D(...) {__VA_ARGS__}
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
#define FVM_ATTR(ID, NAME, KIND, FIELD, DOMAIN)                                                       \
    _Static_assert((FVM_AK_##KIND == FVM_AK_FUNC) == (FVM_ATTR_##ID < FVM_NFUNC_ATTRS),              \
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
#define FVM_OP(ID, NAME, MINA, MAXA, FLAGS, ATTRS, REQ, RULE, EXEC, VJP) [FVM_OP_##ID] = {NAME, MINA, MAXA, FLAGS, ATTRS, REQ},
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

const fvm_attr_domain *fvm_attr_domain_of(fvm_op op, fvm_attr_id id)
{
    for (size_t i = 0; i < sizeof op_domains / sizeof *op_domains; i++)
        if (op_domains[i].op == op && op_domains[i].id == id)
            return &op_domains[i].dom;
    return &fvm_attr_table[id].dom;
}
