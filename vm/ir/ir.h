/* ir.h - the in-memory IR: programs, modules (one per file), functions, instructions. */
#ifndef FVM_IR_H
#define FVM_IR_H

#include "../core/arena.h"
#include "ops.h"
#include "../core/status.h"
#include "types.h"

struct fvm_doc;
typedef struct fvm_func fvm_func;
typedef struct fvm_module fvm_module;

/* A destructuring as written, [[n1, ..., nk], "fields", {"names"?}, s]: the
 * loader makes it k field instructions, one per bound name (format/SPEC.md,
 * "fields"), which share this. */
typedef struct fvm_fields {
    int n; /* bound names */
    const char **names; /* as written */
    fvm_loc *name_locs;
    const struct fvm_doc *attrs; /* the attribute object as written, or NULL */
    fvm_loc attrs_loc;
    fvm_strings fields; /* the decoded "names" attribute: field k is bound to names[k]; n 0 when absent */
} fvm_fields;

/* One instruction: binds 'name' to op(args) with attributes. */
typedef struct fvm_instr {
    const char *name;
    fvm_op op;
    const struct fvm_doc *attrs; /* OBJECT as written, or NULL: what writers write; decoded into 'a' at load */
    int nargs;
    const char **arg_names;
    fvm_loc loc; /* of the instruction array */
    fvm_loc name_loc; /* of the bound name */
    fvm_loc *arg_locs; /* of each argument */
    fvm_loc attrs_loc; /* of the attribute object (or the instruction) */
    fvm_loc *fn_locs; /* of each FUNC attribute given, by fvm_attr_id (< FVM_NFUNC_ATTRS), or NULL */
    fvm_attrs a; /* decoded attributes (fvm_ir_decode_attrs, format/ir_read.h) */
    bool attrs_bad; /* ... with errors, reported: the instruction is not typed */
    fvm_tensor konst; /* const: the value (owned; released by fvm_program_free) */
    /* Made by the loader from what was written, and written back as written
     * (format/SPEC.md, "Literals" and "fields"):
     * - literal: a const for a scalar literal argument (this number or
     *   boolean) of the instruction lit_user places later, whose argument
     *   lit_arg it is; the checker gives it the dtype of that instruction's
     *   other operands (attributes value and dtype);
     * - arg_literals: per argument, the literal written there (its value is
     *   the const before), or NULL for a name; NULL when there is none;
     * - fields, field_pos: field field_pos of a destructuring, a field
     *   instruction whose name or index the checker sets from fields. */
    const struct fvm_doc *literal;
    int lit_user, lit_arg;
    const struct fvm_doc **arg_literals;
    const fvm_fields *fields;
    int field_pos;
    /* Set when a pass lowered the instruction into another op (a field of
     * placed structs into federated_apply or _map: passes.c): the op and
     * attributes as written, which the source's writer writes. */
    bool lowered;
    fvm_op written_op;
    const struct fvm_doc *written_attrs;
    /* Where a generator made the instruction (its attribute object's member
     * "loc", "FILE:LINE": a Python front end's traced line; format/SPEC.md,
     * "Source locations"), or file NULL. The checker's errors at the
     * instruction name it after their message. */
    fvm_loc origin;

    /* Filled by the checker: */
    int slot; /* the slot this instruction writes */
    int *args; /* slot of each argument */
    const fvm_type **arg_types;
    const fvm_type *type; /* result type */
    fvm_func *derived; /* grad, value_and_grad, vjp: the pullback; federated_select: its client half
                             (both made by the passes after checking, vm/transform/passes.h) */
    int nrelease; /* slots whose last use is this instruction */
    int *release;
} fvm_instr;

struct fvm_func {
    const char *name;
    const char *doc;
    int nparams;
    const char **param_names;
    const fvm_type **param_types;
    const char **param_type_text; /* as written */
    const struct fvm_doc **param_type_nodes;
    fvm_loc *param_locs; /* of each type string */
    fvm_loc *param_name_locs; /* of each name */
    int ninstrs;
    fvm_instr *instrs;
    const char *result_name;
    fvm_loc result_loc;
    fvm_loc loc; /* of the function object */
    fvm_module *module;

    /* Filled by the checker: */
    const fvm_type *result_type;
    int result_slot;
    int nslots; /* params then one per instruction */
    int nparam_release; /* params never used: released at entry */
    int *param_release;
    bool federated; /* uses placed values or intrinsics (directly or through calls) */
    bool entry_check; /* some caller passes a less specific type (a '?' dim): check arguments at entry */
    const struct fvm_phases *phases; /* client work fused with its aggregations (phases.h), or NULL */
    const struct fvm_fusion *fusion; /* elementwise chains run as one pass (fuse_plan.h), or NULL */
    const struct fvm_func *inlined; /* the body the interpreter runs instead, derivatives inlined
                                       (vm/transform/inline_body.h), or NULL: this one */
    int state; /* checker bookkeeping */
    int height; /* functions on its longest call chain, itself included */
    int mark; /* scratch of the passes that walk the call graph (vm/transform/passes.c) */
    int inline_size; /* its instructions, calls and derivatives inlined, up to FVM_INLINE_MAX + 1;
                        0 until known (vm/transform/inline_body.c) */
    bool ok; /* checked without errors */
};

/* A type alias. */
typedef struct fvm_alias {
    const char *name;
    const char *text;
    const struct fvm_doc *node; /* the type string */
    fvm_loc loc;
    const fvm_type *type; /* resolved by the loader */
    int height; /* nesting levels its definition uses */
    int state;
    fvm_module *module;
} fvm_alias;

/* A hyperparameter: a named, typed value the program reads with the op
 * hparam and integer or real attributes reference as {"hparam": name}; fixed
 * for a run (format/SPEC.md, "Hyperparameters"). */
typedef struct fvm_hparam {
    const char *name;
    const char *doc;
    const char *type_text; /* as written */
    const struct fvm_doc *type_node;
    const struct fvm_doc *def; /* the default value, as written */
    fvm_loc loc; /* of the declaration (its name) */
    fvm_loc type_loc; /* of the type string */
    fvm_loc def_loc; /* of the default value */
    const fvm_type *type; /* resolved by the loader: a tensor type with a static shape */
    fvm_tensor value; /* bound by the loader: the default or the override (owned) */
    const char *set; /* the override's text ("name=value", fvm_load_opts.sets), or NULL: the default */
    bool bound; /* value holds the bound value */
    fvm_module *module;
    /* A declaration without a type in the program's own file: a new default
     * for the hyperparameter of that name an included file declares. It is
     * not in the program's list; that declaration's default_from points to
     * it, and the loader binds its def instead of the declaration's. */
    bool new_default;
    const struct fvm_hparam *default_from;
} fvm_hparam;

/* One source file. */
struct fvm_module {
    const char *path; /* as given (display name) */
    const char *real; /* canonical path, identifies the file */
    const char *doc;
    const struct fvm_doc *form; /* "form": what fedplan wrote this program as (format/PLANS.md), or NULL */
    /* "privacy" (format/SPEC.md "Differential privacy"), or NULL; of the root
     * module the loader binds privacy_z: the number written, or the value of
     * the hyperparameter privacy_z_hparam names */
    const struct fvm_doc *privacy;
    const char *privacy_z_hparam;
    double privacy_z, privacy_delta;
    fvm_loc privacy_z_loc;
    int version;
    int nincludes;
    const char **includes;
    fvm_loc *include_locs;
    fvm_module **included;
    int naliases;
    fvm_alias *aliases;
    int nhparams;
    fvm_hparam *hparams;
    int nfuncs;
    fvm_func **funcs;
    const struct fvm_doc *root; /* the parsed document (the program's member of it, see base) */
    const char *base; /* the JSON pointer of the program in its file: "" for a whole file, else
                            the member fvm_program_load_member read (error pointers start with it) */
};

/* A loaded program: the root module, everything it includes, and one merged
 * namespace of functions and aliases. Everything lives in 'arena'. */
typedef struct fvm_program {
    fvm_arena arena;
    fvm_module *root;
    int nmodules;
    fvm_module **modules;
    int nfuncs;
    fvm_func **funcs; /* every module's functions, root's first */
    int naliases;
    fvm_alias **aliases;
    int nhparams;
    fvm_hparam **hparams; /* every module's, root's first */
    bool load_errors; /* the loader reported errors: check may add more, but it cannot run */
    bool compiled; /* the passes after checking ran (vm/transform/passes.h) */
    int cap_funcs; /* capacity of funcs (0: exactly nfuncs, as loaded) */
    struct fvm_ad_cache *ad; /* derived functions, by (function, parameters) (autodiff.c) */
    long inlined; /* instructions of the bodies inline_body.c made so far (FVM_INLINE_TOTAL) */
    /* Decodes an instruction's attributes from their documents into typed
     * fields: format/ir_read.h's fvm_ir_decode_attrs, set by the loader that
     * made the program. The passes decode the instructions they make with it. */
    fvm_status (*decode_attrs)(const struct fvm_program *p, fvm_arena *a, fvm_instr *in, fvm_diag *d);
} fvm_program;

/* p->decode_attrs for every instruction of f; the first error's status. */
FVM_API fvm_status fvm_ir_decode_func(const fvm_program *p, fvm_arena *a, fvm_func *f, fvm_diag *d);

/* Adds a function (derived or generated, in p's arena) to the namespace;
 * its name must be new. FVM_ERR_NOMEM when the arena cannot grow. */
FVM_API fvm_status fvm_program_add_func(fvm_program *p, fvm_func *f);

/* Function or alias by name in the merged namespace, or NULL. */
FVM_API fvm_func *fvm_program_func(const fvm_program *p, const char *name);
FVM_API fvm_alias *fvm_program_alias(const fvm_program *p, const char *name);
FVM_API fvm_hparam *fvm_program_hparam(const fvm_program *p, const char *name);

/* Frees the program and everything in it. NULL is a no-op. */
FVM_API void fvm_program_free(fvm_program *p);

#endif
