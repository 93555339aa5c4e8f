/* ops.c - the op and attribute tables and their name lookups. */
#include "ops.h"

#include <stddef.h>
#include <string.h>

const fvm_attr_info fvm_attr_table[FVM_ATTR_COUNT] = {
#define FVM_ATTR(ID, NAME, KIND, FIELD) [FVM_ATTR_##ID] = {NAME, FVM_AK_##KIND, offsetof(fvm_attrs, FIELD)},
#include "attrs.def"
#undef FVM_ATTR
};

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
