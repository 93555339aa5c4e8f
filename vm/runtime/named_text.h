/* named_text.h - a run's arguments as the command line gives them (NAME=VALUE text, not yet values): what a session's options carry and format/bind.h binds. */
#ifndef FVM_NAMED_TEXT_H
#define FVM_NAMED_TEXT_H

/* One NAME=VALUE argument. FVM_ARG_JSON: text is JSON, or "@path" to read a
 * .json/.yaml file (--arg); FVM_ARG_DATA: text is FILE[:SPLIT], a dataset
 * (--data, see format/data_bind.h). */
typedef enum fvm_arg_kind { FVM_ARG_JSON, FVM_ARG_DATA } fvm_arg_kind;
typedef struct fvm_named_text {
    const char *name;
    const char *text;
    fvm_arg_kind kind;
} fvm_named_text;

#endif
