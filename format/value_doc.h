/* value_doc.h - document trees <-> runtime values: arguments, results and constants. */
#ifndef FVM_VALUE_DOC_H
#define FVM_VALUE_DOC_H

#include "../vm/ir/ops.h"
#include "../vm/ir/value.h"
#include "../vm/core/doc.h"

/* A tensor from a number, a boolean, a rectangular nested array of them, or
 * for floats the strings "nan", "inf", "-inf". Without has_dtype the dtype is
 * f32 if any element is a real, i32 for integers, bool for booleans. With
 * shape, a scalar fills that shape and an array must have it. The size is
 * checked before anything is allocated. Errors carry the location of the
 * offending node (file from 'file', pointer built under 'ptr'). */
FVM_API fvm_status fvm_tensor_from_doc(const fvm_doc *v, bool has_dtype, fvm_dtype dtype, const fvm_ints *shape,
                                       const char *file, const char *ptr, fvm_tensor *out, fvm_diag *d);

/* A value of type t from a document: tensors as above; structs as objects by
 * field name (or arrays, by position); sequences as arrays of elements;
 * {T}@CLIENTS as an array with one member per client (its length sets or must
 * match *nclients; *nclients < 0 means not yet known); T@CLIENTS and T@SERVER
 * as the member itself. Shapes must be compatible with t. */
FVM_API fvm_status fvm_value_from_doc(const fvm_doc *v, const fvm_type *t, const char *file, const char *ptr,
                                      int64_t *nclients, fvm_value **out, fvm_diag *d);

/* A document for a value of type t: tensors as (nested) numbers, named structs
 * as objects, positional structs, sequences and client lists as arrays.
 * Floats are written with the fewest digits that read back exactly. */
FVM_API fvm_doc *fvm_value_to_doc(fvm_arena *a, const fvm_value *v, const fvm_type *t);

#endif
