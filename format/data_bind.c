/* data_bind.c - dataset splits as parameter values: clients read on demand, or a split in memory. */
#include "data_bind.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"

fvm_status fvm_data_spec(const char *text, char **file, char **split, fvm_diag *d)
{
    *file = *split = NULL;
    const char *colon = strrchr(text, ':');
    bool has_split = colon && colon[1] && colon != text;
    for (const char *p = colon ? colon + 1 : NULL; has_split && *p; p++)
        has_split = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
                    *p == '-';
    size_t n = has_split ? (size_t)(colon - text) : strlen(text);
    if (n == 0)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "a dataset needs a file name, found '%s'", text);
    *file = strndup(text, n);
    if (has_split)
        *split = strdup(colon + 1);
    if (!*file || (has_split && !*split)) {
        free(*file);
        *file = NULL;
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    return FVM_OK;
}

/* ---- matching a struct type to a file's columns ----------------------------------- */

/* For each field of elem (a struct), the index of its column; errors name
 * the parameter and the file. */
static fvm_status match_columns(const fvm_dataset *ds, const char *path, const char *param, const fvm_type *elem,
                                int *col_of, fvm_diag *d)
{
    fvm_loc loc = {.file = path};
    const fvm_column *cols;
    int ncols = fvm_dataset_columns(ds, &cols);
    char have[1024];
    size_t len = 0;
    have[0] = 0;
    for (int k = 0; k < ncols && len < sizeof have; k++) {
        char dims[FVM_DIMS_STR];
        fvm_dims_format(&cols[k].shape, dims);
        len += (size_t)snprintf(have + len, sizeof have - len, "%s%s %s%s", k ? ", " : "", cols[k].name,
                                fvm_dtype_name(cols[k].dtype), dims);
    }
    if (elem->kind != FVM_T_STRUCT || elem->u.strct.n == 0)
        return fvm_diag_add(d, FVM_ERR_TYPE, &loc,
                            "parameter '%s': the examples must be a struct of named fields, one per column (the file "
                            "has %s)",
                            param, have);
    fvm_status first = FVM_OK;
    for (int f = 0; f < elem->u.strct.n; f++) {
        const char *name = elem->u.strct.names[f];
        const fvm_type *ft = elem->u.strct.elems[f];
        int k = 0;
        while (name && k < ncols && strcmp(cols[k].name, name))
            k++;
        fvm_status s = FVM_OK;
        if (!name) {
            s = fvm_diag_add(d, FVM_ERR_TYPE, &loc, "parameter '%s': field %d has no name; name it after a column (%s)",
                             param, f, have);
        } else if (k == ncols) {
            s = fvm_diag_add(d, FVM_ERR_TYPE, &loc, "parameter '%s': the file has no column '%s' (it has %s)", param,
                             name, have);
        } else {
            bool ok = ft->kind == FVM_T_TENSOR && ft->u.tensor.dtype == cols[k].dtype &&
                      ft->u.tensor.dims.rank == cols[k].shape.rank;
            for (int a = 0; ok && a < cols[k].shape.rank; a++)
                ok = ft->u.tensor.dims.d[a] < 0 || ft->u.tensor.dims.d[a] == cols[k].shape.d[a];
            if (!ok) {
                char want[256], got[FVM_DIMS_STR];
                fvm_type_format(ft, true, want, sizeof want);
                fvm_dims_format(&cols[k].shape, got);
                s = fvm_diag_add(d, FVM_ERR_TYPE, &loc,
                                 "parameter '%s': field '%s' is %s, but column '%s' holds %s%s per example%s "
                                 "(convert in the program: cast, reshape)",
                                 param, name, want, name, fvm_dtype_name(cols[k].dtype), got,
                                 strchr(got, '?') ? ", of varying size ('?')" : "");
            }
        }
        col_of[f] = k;
        if (s && !first)
            first = s;
    }
    return first;
}

/* A client's examples (as the dataset gives them, fields in column order)
 * with the fields of the parameter's struct, in its order. */
static fvm_status project(const fvm_value *seq, int nf, const int *col_of, fvm_value **out, fvm_diag *d)
{
    if (seq->cols) {
        fvm_value *st = fvm_value_list(FVM_V_STRUCT, nf);
        if (!st)
            goto nomem;
        for (int f = 0; f < nf; f++)
            st->items[f] = fvm_value_retain(seq->cols->items[col_of[f]]);
        if (!(*out = fvm_value_seq_cols_take(seq->n, st))) {
            fvm_value_release(st);
            goto nomem;
        }
        return FVM_OK;
    }
    fvm_value *l = fvm_value_list(FVM_V_SEQ, seq->n);
    if (!l)
        goto nomem;
    for (int64_t i = 0; i < seq->n; i++) {
        fvm_value *st = fvm_value_list(FVM_V_STRUCT, nf);
        if (!st) {
            fvm_value_release(l);
            goto nomem;
        }
        for (int f = 0; f < nf; f++)
            st->items[f] = fvm_value_retain(seq->items[i]->items[col_of[f]]);
        l->items[i] = st;
    }
    *out = l;
    return FVM_OK;
nomem:
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

/* ---- {T*}@CLIENTS: clients read on demand ------------------------------------------- */

/* Dataset handles are not thread-safe: each read takes a free handle (opening
 * one when none is free) and gives it back, so concurrent reads use separate
 * handles and the pool grows to the number of concurrent readers. */
typedef struct data_source {
    fvm_source base;
    char *path, *split;
    int nfields;
    int *col_of;
    pthread_mutex_t lock;
    fvm_dataset **idle;
    int nidle, cap;
} data_source;

static fvm_dataset *take_handle(data_source *s)
{
    fvm_dataset *ds = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->nidle)
        ds = s->idle[--s->nidle];
    pthread_mutex_unlock(&s->lock);
    return ds;
}

static void give_handle(data_source *s, fvm_dataset *ds)
{
    pthread_mutex_lock(&s->lock);
    if (s->nidle == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        fvm_dataset **p = realloc(s->idle, (size_t)cap * sizeof *p);
        if (p) {
            s->idle = p;
            s->cap = cap;
        }
    }
    if (s->nidle < s->cap) {
        s->idle[s->nidle++] = ds;
        ds = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    fvm_dataset_close(ds); /* only when the pool could not grow */
}

static fvm_status source_get(fvm_source *src, int64_t i, fvm_value **out, fvm_diag *d)
{
    data_source *s = (data_source *)src;
    fvm_dataset *ds = take_handle(s);
    fvm_status st = ds ? FVM_OK : fvm_dataset_open(s->path, s->split, &ds, d);
    if (st)
        return st;
    fvm_value *seq = NULL;
    st = fvm_dataset_read(ds, i, &seq, d);
    give_handle(s, ds);
    if (st)
        return st;
    st = project(seq, s->nfields, s->col_of, out, d);
    fvm_value_release(seq);
    return st;
}

static void source_free(fvm_source *src)
{
    data_source *s = (data_source *)src;
    for (int k = 0; k < s->nidle; k++)
        fvm_dataset_close(s->idle[k]);
    free(s->idle);
    pthread_mutex_destroy(&s->lock);
    free(s->col_of);
    free(s->path);
    free(s->split);
    free(s);
}

static const struct fvm_source_i source_iface = {.get = source_get, .free = source_free};

static fvm_status bind_clients(fvm_dataset *ds_take, const char *path, const char *split, const int *col_of, int nf,
                               fvm_value **out, fvm_diag *d)
{
    data_source *s = calloc(1, sizeof *s);
    if (!s) {
        fvm_dataset_close(ds_take);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    s->base.iface = &source_iface;
    pthread_mutex_init(&s->lock, NULL);
    s->nfields = nf;
    s->path = strdup(path);
    s->split = split ? strdup(split) : NULL;
    s->col_of = malloc((size_t)nf * sizeof *s->col_of);
    int64_t n = fvm_dataset_clients(ds_take);
    if (s->col_of)
        memcpy(s->col_of, col_of, (size_t)nf * sizeof *col_of);
    if (!s->path || (split && !s->split) || !s->col_of || !(*out = fvm_value_clients_source_take(n, &s->base))) {
        fvm_dataset_close(ds_take);
        source_free(&s->base);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    give_handle(s, ds_take); /* the handle opened for the check serves the first read */
    return FVM_OK;
}

/* ---- T*: a split in memory ----------------------------------------------------------- */

/* Appends rows of tensor tree src to dst at row 'at' (same structure). */
static void copy_rows(fvm_value *dst, const fvm_value *src, int64_t at)
{
    if (dst->kind == FVM_V_STRUCT) {
        for (int64_t k = 0; k < dst->n; k++)
            copy_rows(dst->items[k], src->items[k], at);
        return;
    }
    size_t bytes = fvm_tensor_bytes(&src->t);
    if (!bytes)
        return;
    size_t row = bytes / (size_t)src->t.shape.d[0];
    memcpy((unsigned char *)fvm_tensor_data(&dst->t) + (size_t)at * row, fvm_tensor_data(&src->t), bytes);
}

/* A tree shaped like cols (a client's columns) with n rows. */
static fvm_status alloc_like(const fvm_value *cols, int64_t n, fvm_value **out, fvm_diag *d)
{
    if (cols->kind == FVM_V_STRUCT) {
        fvm_value *st = fvm_value_list(FVM_V_STRUCT, cols->n);
        if (!st)
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        for (int64_t k = 0; k < cols->n; k++) {
            fvm_status s = alloc_like(cols->items[k], n, &st->items[k], d);
            if (s) {
                fvm_value_release(st);
                return s;
            }
        }
        *out = st;
        return FVM_OK;
    }
    fvm_dims shape = cols->t.shape;
    shape.d[0] = n;
    fvm_tensor t;
    fvm_status s = fvm_tensor_alloc(&t, cols->t.dtype, &shape, d);
    if (s)
        return s;
    if (!(*out = fvm_value_tensor_take(&t))) {
        fvm_tensor_release(&t);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    return FVM_OK;
}

/* Every client's examples in order: by columns when every client is (one
 * shape per column), else a list of examples. */
static fvm_status bind_pooled(fvm_dataset *ds, const int *col_of, int nf, fvm_value **out, fvm_diag *d)
{
    int64_t nc = fvm_dataset_clients(ds), total = 0;
    fvm_value **parts = calloc((size_t)(nc ? nc : 1), sizeof *parts);
    if (!parts)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    fvm_status s = FVM_OK;
    bool by_columns = true;
    for (int64_t i = 0; i < nc && s == FVM_OK; i++) {
        fvm_value *seq = NULL;
        if (!(s = fvm_dataset_read(ds, i, &seq, d))) {
            s = project(seq, nf, col_of, &parts[i], d);
            fvm_value_release(seq);
        }
        if (s == FVM_OK) {
            total += parts[i]->n;
            by_columns = by_columns && parts[i]->cols;
        }
    }
    fvm_value *res = NULL;
    if (s == FVM_OK && by_columns && nc > 0) {
        /* every client's columns have one per-example shape, the file's */
        fvm_value *cols = NULL;
        s = alloc_like(parts[0]->cols, total, &cols, d);
        for (int64_t i = 0, at = 0; s == FVM_OK && i < nc; at += parts[i++]->n)
            copy_rows(cols, parts[i]->cols, at);
        if (s == FVM_OK && !(res = fvm_value_seq_cols_take(total, cols))) {
            fvm_value_release(cols);
            s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        }
    } else if (s == FVM_OK) {
        res = fvm_value_list(FVM_V_SEQ, total);
        for (int64_t i = 0, at = 0; res && i < nc; i++)
            for (int64_t j = 0; j < parts[i]->n && s == FVM_OK; j++)
                s = fvm_seq_get(parts[i], j, &res->items[at++], d);
        if (!res)
            s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    for (int64_t i = 0; i < nc; i++)
        fvm_value_release(parts[i]);
    free(parts);
    if (s) {
        fvm_value_release(res);
        return s;
    }
    *out = res;
    return FVM_OK;
}

fvm_status fvm_data_bind(const char *path, const char *split, const char *param, const fvm_type *t,
                         fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    fvm_loc loc = {.file = path};
    bool clients = t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS && !t->u.fed.all_equal;
    const fvm_type *seq = t->kind == FVM_T_FED && (clients || t->u.fed.pl == FVM_PL_SERVER) ? t->u.fed.member : t;
    if (seq->kind != FVM_T_SEQ) {
        char buf[256];
        return fvm_diag_add(d, FVM_ERR_TYPE, &loc,
                            "parameter '%s' has type %s; a dataset binds {T*}@CLIENTS (clients) or T* (a split in "
                            "memory)",
                            param, fvm_type_format(t, true, buf, sizeof buf));
    }
    const fvm_type *elem = seq->u.seq.elem;
    fvm_dataset *ds = NULL;
    fvm_status s = fvm_dataset_open(path, split, &ds, d);
    if (s)
        return s;
    int nf = elem->kind == FVM_T_STRUCT ? elem->u.strct.n : 0;
    int *col_of = malloc((size_t)(nf ? nf : 1) * sizeof *col_of);
    if (!col_of)
        s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    if (s == FVM_OK)
        s = match_columns(ds, path, param, elem, col_of, d);
    if (s == FVM_OK && clients) {
        s = bind_clients(ds, path, split, col_of, nf, out, d);
        ds = NULL; /* taken */
    } else if (s == FVM_OK) {
        s = bind_pooled(ds, col_of, nf, out, d);
    }
    fvm_dataset_close(ds);
    free(col_of);
    return s;
}
