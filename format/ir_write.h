/* ir_write.h - the canonical writer: one module (a file) back to JSON or YAML text. */
#ifndef FVM_IR_WRITE_H
#define FVM_IR_WRITE_H

#include "../vm/ir/ir.h"
#include "../vm/core/doc.h"

/* The canonical document of a module, as written (instructions that the
 * passes lowered into others as their source has them): top-level keys in the order fedvm, doc, form,
 * include, hparams, types, functions; function keys doc, params, body, result; type
 * strings in canonical notation (aliases by name); each instruction on one
 * line as [name, op, {attributes}?, args...] with attributes in the order of
 * attrs.def. NULL when out of memory. */
FVM_API fvm_doc *fvm_module_to_doc(fvm_arena *a, const fvm_module *m);

/* The canonical text (malloc'd; caller frees). */
FVM_API fvm_status fvm_module_write(const fvm_module *m, bool yaml, char **out, size_t *out_len, fvm_diag *d);

/* A whole program as one module, as it runs (lowered instructions as
 * lowered, with the functions the passes made): every hyperparameter (its bound value as
 * its default), every type alias and every function of every file (derived
 * functions included), in program order. */
FVM_API fvm_doc *fvm_program_to_doc(fvm_arena *a, const fvm_program *p, const char *doc);

/* The program's hyperparameters and their bound values, {"lr": 0.1, ...}
 * on one line (flow), or NULL when out of memory. */
FVM_API fvm_doc *fvm_hparams_doc(fvm_arena *a, const fvm_program *p);

/* A function alone as a canonical fragment {"name": {...}} (used to print
 * derived functions). */
FVM_API fvm_doc *fvm_func_to_doc(fvm_arena *a, const fvm_func *f);

#endif
