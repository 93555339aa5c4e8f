/* ir_read.h - loading programs: files (JSON or YAML) to the IR, with includes. */
#ifndef FVM_IR_READ_H
#define FVM_IR_READ_H

#include "../vm/ir/ir.h"

/* Loads the program in 'path' and every file it includes (resolved relative to
 * the including file). Checks the document structure, names, include cycles,
 * name clashes and type strings (aliases resolved); the static checker
 * (fvm_check) does the rest. Reports every error found in d.
 *
 * *out is a new program (free with fvm_program_free) whenever every file could
 * be read and parsed, even when the status is an error: then the program has
 * load_errors set, fvm_check still reports what else is wrong (so a user sees
 * every error at once), and it cannot be run. When a file cannot be read or
 * is not valid JSON/YAML, *out is NULL. */
FVM_API fvm_status fvm_program_load(const char *path, fvm_program **out, fvm_diag *d);

/* The same for a program that is one member of the document in 'path'
 * (a file that holds other things too, such as a cross-device plan): member
 * is a JSON pointer of object keys, "/client/program" ('~' escapes are not
 * read), whose value is written as a program file is. Errors are located in
 * path, with JSON pointers that start with member; a missing member is
 * FVM_ERR_FORMAT and *out NULL. Includes resolve relative to path. */
FVM_API fvm_status fvm_program_load_member(const char *path, const char *member, fvm_program **out, fvm_diag *d);

/* The same from text in memory; display_name names it in errors and decides
 * JSON or YAML by its extension; includes are resolved relative to it. */
FVM_API fvm_status fvm_program_load_text(const char *display_name, const char *text, size_t len, fvm_program **out,
                                         fvm_diag *d);

/* How a program is loaded (arrays and strings borrowed for the call). */
typedef struct fvm_load_opts {
    bool no_include; /* refuse "include" (an error at it; nothing else is read): the program must be
                        self-contained, such as a cross-device plan's phases, which devices read */
    const char *const *sets; /* nsets hyperparameter overrides "name=value", value the JSON text of
                                a value of the hyperparameter's type ("0.1", "[1, 2]"); applied in
                                order after the defaults (the last for a name wins); an unknown
                                name or a value of the wrong type is an error at "--set name=value" */
    int nsets;
    const char *const *include_dirs; /* ninclude_dirs directories searched, in order, for an include
                                        that is not found relative to the including file */
    int ninclude_dirs;
} fvm_load_opts;

/* fvm_program_load_text with options (o may be NULL: the defaults), for the
 * program that is member 'member' of the document text ("" or NULL: all of
 * it; a JSON pointer as fvm_program_load_member takes it). With text NULL,
 * the document is read from the file display_name. */
FVM_API fvm_status fvm_program_load_opts(const char *display_name, const char *text, size_t len, const char *member,
                                         const fvm_load_opts *o, fvm_program **out, fvm_diag *d);

/* Decodes the attributes of instruction in (its 'attrs' document, as written)
 * into in->a, by the tables of attrs.def and op_attrs.def: the op must take
 * each attribute, of its kind and domain, and the op's required ones must be
 * there; a FUNC attribute names a function of p's namespace (in->a.<fn>, its
 * location in in->fn_locs); a const's value becomes in->konst. Errors are
 * located at the value at fault; then in->attrs_bad is set, and the checker
 * types nothing that depends on it. The loader decodes every instruction it
 * reads; code that makes instructions (derivatives) decodes them before
 * checking them. Allocations in arena a. */
FVM_API fvm_status fvm_ir_decode_attrs(const fvm_program *p, fvm_arena *a, fvm_instr *in, fvm_diag *d);
/* fvm_ir_decode_func (vm/ir/ir.h) decodes every instruction of a function
 * with it. */

#endif
