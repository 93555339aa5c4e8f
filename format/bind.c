/* bind.c - NAME=VALUE arguments to parameter values. */
#include "bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/prng.h"
#include "../vm/suggest.h"
#include "doc.h"
#include "value_doc.h"

static bool is_key_param(const fvm_func *f, int i)
{
    const fvm_type *t = f->param_types[i];
    if (t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_SERVER)
        t = t->u.fed.member;
    return !strcmp(f->param_names[i], "key") && t->kind == FVM_T_TENSOR && t->u.tensor.dtype == FVM_DTYPE_U32 &&
           t->u.tensor.dims.rank == 1 && t->u.tensor.dims.d[0] == 2;
}

static fvm_status key_value(uint64_t seed, fvm_value **out, fvm_diag *d)
{
    fvm_dims dims = {.rank = 1, .d = {2}};
    fvm_tensor t;
    fvm_status s = fvm_tensor_alloc(&t, FVM_DTYPE_U32, &dims, d);
    if (s)
        return s;
    fvm_prng_key(seed, fvm_tensor_data(&t));
    if (!(*out = fvm_value_tensor_take(&t))) {
        fvm_tensor_release(&t);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    return FVM_OK;
}

static fvm_status parse_one(const fvm_func *f, int i, const fvm_named_text *arg, int64_t *nclients, fvm_value **out,
                            fvm_diag *d)
{
    fvm_arena a = {0};
    char *owned = NULL;
    size_t len;
    const char *file;
    fvm_doc_src src;
    char label[300];
    if (arg->text[0] == '@') {
        file = arg->text + 1;
        fvm_status s = fvm_read_file(file, &owned, &len, d);
        if (s)
            return s;
        src = (fvm_doc_src){.file = file, .text = owned, .len = len};
    } else {
        snprintf(label, sizeof label, "--arg %s", arg->name);
        file = label;
        src = (fvm_doc_src){.file = label, .text = arg->text, .len = strlen(arg->text)};
    }
    fvm_doc *doc = NULL;
    fvm_status s = fvm_doc_parse(&a, &src, &doc, d);
    if (s == FVM_OK)
        s = fvm_value_from_doc(doc, f->param_types[i], file, "", nclients, out, d);
    fvm_arena_free(&a);
    free(owned);
    return s;
}

void fvm_values_free(fvm_value **values, int n)
{
    if (!values)
        return;
    for (int i = 0; i < n; i++)
        fvm_value_release(values[i]);
    free(values);
}

fvm_status fvm_bind_args(const fvm_func *f, int nargs, const fvm_named_text *args, uint64_t seed, int64_t *nclients,
                         fvm_value ***out_values, fvm_diag *d)
{
    *out_values = NULL;
    fvm_value **vals = calloc((size_t)f->nparams + 1, sizeof *vals);
    if (!vals)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    fvm_status first = FVM_OK;
    for (int k = 0; k < nargs; k++) {
        int i = 0;
        while (i < f->nparams && strcmp(f->param_names[i], args[k].name))
            i++;
        fvm_status s;
        if (i == f->nparams) {
            fvm_suggest sg;
            fvm_suggest_init(&sg, args[k].name);
            for (int j = 0; j < f->nparams; j++)
                fvm_suggest_add(&sg, f->param_names[j]);
            s = sg.best ? fvm_diag_add(d, FVM_ERR_USAGE, NULL, "'%s' has no parameter '%s'; did you mean '%s'?",
                                       f->name, args[k].name, sg.best)
                        : fvm_diag_add(d, FVM_ERR_USAGE, NULL, "'%s' has no parameter '%s'", f->name, args[k].name);
        } else if (vals[i]) {
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "parameter '%s' is given twice", args[k].name);
        } else {
            s = parse_one(f, i, &args[k], nclients, &vals[i], d);
        }
        if (s && !first)
            first = s;
    }
    for (int i = 0; i < f->nparams; i++) {
        if (vals[i])
            continue;
        fvm_status s;
        if (is_key_param(f, i)) {
            s = key_value(seed, &vals[i], d);
        } else if (!first) {
            char buf[256];
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "missing --arg %s=VALUE (parameter of type %s)",
                             f->param_names[i], fvm_type_format(f->param_types[i], true, buf, sizeof buf));
        } else {
            continue;
        }
        if (s && !first)
            first = s;
    }
    if (first) {
        fvm_values_free(vals, f->nparams);
        return first;
    }
    *out_values = vals;
    return FVM_OK;
}
