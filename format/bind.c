/* bind.c - NAME=VALUE arguments to parameter values. */
#include "bind.h"
#include "doc_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/core/prng.h"
#include "../vm/ir/keys.h"
#include "../vm/core/suggest.h"
#include "data_bind.h"
#include "../vm/core/doc.h"
#include "value_doc.h"

bool fvm_bind_is_key(const fvm_type *t)
{
    return fvm_given_param("key", t) == FVM_GIVEN_KEY;
}

bool fvm_bind_is_client_keys(const fvm_type *t)
{
    return fvm_given_param("client_keys", t) == FVM_GIVEN_CLIENT_KEYS;
}

/* Binds a dataset; {T}@CLIENTS data sets or must agree with *nclients. */
static fvm_status data_one(const fvm_func *f, int i, const fvm_named_text *arg, fvm_data_cache *cache,
                           int64_t *nclients, fvm_value **out, fvm_diag *d)
{
    char *file, *split;
    fvm_status s = fvm_data_spec(arg->text, &file, &split, d);
    if (s == FVM_OK)
        s = fvm_data_bind_cached(cache, file, split, f->param_names[i], f->param_types[i], out, d);
    if (s == FVM_OK && (*out)->kind == FVM_V_CLIENTS) {
        if (*nclients >= 0 && (*out)->n != *nclients) {
            fvm_loc loc = {.file = file};
            s = fvm_diag_add(d, FVM_ERR_TYPE, &loc, "parameter '%s': the dataset has %lld clients, other data %lld",
                             arg->name, (long long)(*out)->n, (long long)*nclients);
            fvm_value_release(*out);
            *out = NULL;
        } else {
            *nclients = (*out)->n;
        }
    }
    free(file);
    free(split);
    return s;
}

static fvm_status parse_one(const fvm_func *f, int i, const fvm_named_text *arg, fvm_data_cache *cache,
                            int64_t *nclients, fvm_value **out, fvm_diag *d)
{
    if (arg->kind == FVM_ARG_DATA)
        return data_one(f, i, arg, cache, nclients, out, d);
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

fvm_status fvm_bind_params(const fvm_func *f, int nargs, const fvm_named_text *args, const fvm_bind_opts *o,
                           int64_t *nclients, fvm_value ***out_values, fvm_diag *d)
{
    *out_values = NULL;
    fvm_value **vals = calloc((size_t)f->nparams + 1, sizeof *vals);
    if (!vals)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    fvm_status first = FVM_OK;
    for (int k = 0; k < nargs; k++) {
        int i = o->first;
        while (i < f->nparams && strcmp(f->param_names[i], args[k].name))
            i++;
        fvm_status s;
        if (i == f->nparams && o->used) {
            continue;
        } else if (i == f->nparams) {
            fvm_suggest sg;
            fvm_suggest_init(&sg, args[k].name);
            for (int j = o->first; j < f->nparams; j++)
                fvm_suggest_add(&sg, f->param_names[j]);
            s = sg.best ? fvm_diag_add(d, FVM_ERR_USAGE, NULL, "'%s' has no parameter '%s'; did you mean '%s'?",
                                       f->name, args[k].name, sg.best)
                        : fvm_diag_add(d, FVM_ERR_USAGE, NULL, "'%s' has no parameter '%s'", f->name, args[k].name);
        } else if (vals[i]) {
            s = fvm_diag_add(d, FVM_ERR_USAGE, NULL, "parameter '%s' is given twice", args[k].name);
        } else {
            s = parse_one(f, i, &args[k], o->cache, nclients, &vals[i], d);
            if (o->used)
                o->used[k] = true;
        }
        if (s && !first)
            first = s;
    }
    uint32_t key[2];
    fvm_prng_key(o->seed, key);
    /* the parameters the run fills (keys.h) after the data: their number of
     * clients comes from it */
    for (int pass = 0; pass < 2; pass++)
        for (int i = o->first; i < f->nparams; i++) {
            if (vals[i])
                continue;
            const fvm_type *t = f->param_types[i];
            fvm_given g = fvm_given_param(f->param_names[i], t);
            if (g != FVM_GIVEN_NONE && o->leave_keys)
                continue;
            bool per_client = g == FVM_GIVEN_CLIENT_KEYS || g == FVM_GIVEN_CLIENT_INDICES || g == FVM_GIVEN_NUM_CLIENTS;
            fvm_status s = FVM_OK;
            if (pass == 0 && g == FVM_GIVEN_KEY) {
                s = fvm_key_value(key, &vals[i], d);
            } else if (pass == 1 && per_client && *nclients < 0) {
                s = fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                                 "parameter '%s' needs the number of clients: bind client data or give --clients N",
                                 f->param_names[i]);
            } else if (pass == 1 && g == FVM_GIVEN_CLIENT_KEYS) {
                s = fvm_client_keys_value(key, NULL, *nclients, &vals[i], d);
            } else if (pass == 1 && g == FVM_GIVEN_CLIENT_INDICES) {
                s = fvm_client_indices_value(NULL, *nclients, &vals[i], d);
            } else if (pass == 1 && g == FVM_GIVEN_NUM_CLIENTS) {
                s = fvm_i64_value(*nclients, &vals[i], d);
            } else if (pass == 1 && g == FVM_GIVEN_CLIENT_STATES && !first) {
                s = fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                                 "parameter 'client_states' is given by a training run (initialize_client and next), "
                                 "or with --arg client_states=VALUE");
            } else if (pass == 1 && g == FVM_GIVEN_NONE && !first) {
                char buf[256];
                const fvm_type *m = t->kind == FVM_T_FED ? t->u.fed.member : t;
                s = m->kind == FVM_T_SEQ
                        ? fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                                       "missing --arg %s=VALUE or --data %s=FILE[:SPLIT] (parameter of type %s)",
                                       f->param_names[i], f->param_names[i], fvm_type_format(t, true, buf, sizeof buf))
                        : fvm_diag_add(d, FVM_ERR_USAGE, NULL, "missing --arg %s=VALUE (parameter of type %s)",
                                       f->param_names[i], fvm_type_format(t, true, buf, sizeof buf));
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

fvm_status fvm_bind_args(const fvm_func *f, int nargs, const fvm_named_text *args, uint64_t seed, int64_t *nclients,
                         fvm_value ***out_values, fvm_diag *d)
{
    fvm_bind_opts o = {.seed = seed};
    return fvm_bind_params(f, nargs, args, &o, nclients, out_values, d);
}
