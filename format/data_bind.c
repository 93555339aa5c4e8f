/* data_bind.c - dataset splits as parameter values: clients read on demand, or a split in memory. */
#include "data_bind.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "dataset_impl.h"

fvm_status fvm_data_spec(const char *text, char **file, char **split, fvm_diag *d)
{
    *file = *split = NULL;
    const char *colon = strrchr(text, ':');
    bool has_split = colon && colon[1] && colon != text;
    for (const char *p = colon ? colon + 1 : NULL; has_split && *p; p++)
        has_split =
            (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
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

/* One field of the parameter's examples: its column and type. */
typedef struct field_spec {
    char name[256]; /* escaped, for messages */
    int col;
    fvm_dtype dtype;
    fvm_dims dims;
    bool check; /* a dim the field fixes is '?' in the file: checked per client */
} field_spec;

/* For each field of elem (a struct), its column and type; errors name the
 * parameter and the file. A '?' dim in the file's schema (a length the file
 * does not fix, as every TFF feature's) accepts a known dim of the field:
 * each client is then checked when read (check_client). */
static fvm_status match_columns(const fvm_dataset *ds, const char *path, const char *param, const fvm_type *elem,
                                field_spec *fs, fvm_diag *d)
{
    fvm_loc loc = {.file = path};
    const fvm_column *cols;
    int ncols = fvm_dataset_columns(ds, &cols);
    char have[1024];
    size_t len = 0;
    have[0] = 0;
    for (int k = 0; k < ncols && len + 1 < sizeof have; k++) {
        char dims[FVM_DIMS_STR], esc[160];
        fvm_dims_format(&cols[k].shape, dims);
        fvm_dataset_escape(cols[k].name, strlen(cols[k].name), esc, sizeof esc);
        len += (size_t)snprintf(have + len, sizeof have - len, "%s%s %s%s", k ? ", " : "", esc,
                                fvm_dtype_name(cols[k].dtype), dims);
    }
    if (len + 1 >= sizeof have)
        snprintf(have + sizeof have - 5, 5, "...");
    if (elem->kind != FVM_T_STRUCT || elem->u.strct.n == 0)
        return fvm_diag_add(d, FVM_ERR_TYPE, &loc,
                            "parameter '%s': the examples must be a struct of named fields, one per column (the file "
                            "has %s)",
                            param, have);
    fvm_status first = FVM_OK;
    for (int f = 0; f < elem->u.strct.n; f++) {
        const char *name = elem->u.strct.names[f];
        const fvm_type *ft = elem->u.strct.elems[f];
        int k = name ? fvm_dataset_column_find(ds, name) : -1;
        fvm_status s = FVM_OK;
        if (name)
            fvm_dataset_escape(name, strlen(name), fs[f].name, sizeof fs[f].name);
        fs[f].col = k;
        if (!name) {
            s = fvm_diag_add(d, FVM_ERR_TYPE, &loc, "parameter '%s': field %d has no name; name it after a column (%s)",
                             param, f, have);
        } else if (k < 0) {
            s = fvm_diag_add(d, FVM_ERR_TYPE, &loc, "parameter '%s': the file has no column '%s' (it has %s)", param,
                             fs[f].name, have);
        } else {
            bool ok = ft->kind == FVM_T_TENSOR && ft->u.tensor.dtype == cols[k].dtype &&
                      ft->u.tensor.dims.rank == cols[k].shape.rank;
            fs[f].check = false;
            for (int a = 0; ok && a < cols[k].shape.rank; a++) {
                int64_t want = ft->u.tensor.dims.d[a], have_dim = cols[k].shape.d[a];
                ok = want < 0 || have_dim < 0 || want == have_dim;
                fs[f].check = fs[f].check || (want >= 0 && have_dim < 0);
            }
            if (ok) {
                fs[f].dtype = ft->u.tensor.dtype;
                fs[f].dims = ft->u.tensor.dims;
            } else {
                char want[256], got[FVM_DIMS_STR];
                fvm_type_format(ft, true, want, sizeof want);
                fvm_dims_format(&cols[k].shape, got);
                s = fvm_diag_add(d, FVM_ERR_TYPE, &loc,
                                 "parameter '%s': field '%s' is %s, but column '%s' holds %s%s per example "
                                 "(convert in the program: cast, reshape)",
                                 param, fs[f].name, want, fs[f].name, fvm_dtype_name(cols[k].dtype), got);
            }
        }
        if (s && !first)
            first = s;
    }
    return first;
}

/* Does one example's tensor t (dims from axis 'from') fit the field's dims? */
static bool fits(const fvm_tensor *t, int from, const field_spec *f)
{
    if (t->shape.rank - from != f->dims.rank)
        return false;
    for (int a = 0; a < f->dims.rank; a++)
        if (f->dims.d[a] >= 0 && t->shape.d[a + from] != f->dims.d[a])
            return false;
    return true;
}

/* Client i's examples against the dims the fields fix where the file's
 * schema does not: an error names the file, the client, the column and the
 * field. */
static fvm_status check_client(fvm_dataset *ds, int64_t i, const fvm_value *seq, const field_spec *fs, int nf,
                               const char *path, const char *param, fvm_diag *d)
{
    for (int f = 0; f < nf; f++) {
        if (!fs[f].check)
            continue;
        const fvm_tensor *bad = NULL;
        int64_t e = 0;
        if (seq->cols) {
            if (seq->n > 0 && !fits(&seq->cols->items[fs[f].col]->t, 1, &fs[f]))
                bad = &seq->cols->items[fs[f].col]->t;
        } else {
            for (e = 0; e < seq->n && !bad; e++)
                if (!fits(&seq->items[e]->items[fs[f].col]->t, 0, &fs[f]))
                    bad = &seq->items[e]->items[fs[f].col]->t;
            e--;
        }
        if (!bad)
            continue;
        fvm_dims got = bad->shape, want = fs[f].dims;
        if (seq->cols) { /* per example: without the leading axis */
            got.rank--;
            memmove(got.d, got.d + 1, (size_t)got.rank * sizeof got.d[0]);
        }
        char gs[FVM_DIMS_STR], ws[FVM_DIMS_STR], who[DS_WHO], where[64] = "";
        const void *id;
        size_t id_len;
        int64_t count;
        fvm_diag quiet = {0};
        if (fvm_dataset_client(ds, i, &id, &id_len, &count, &quiet) == FVM_OK)
            ds_who(id, id_len, i, who);
        else
            snprintf(who, sizeof who, "at index %lld", (long long)i);
        fvm_diag_clear(&quiet);
        if (!seq->cols)
            snprintf(where, sizeof where, ", example %lld", (long long)e);
        fvm_dims_format(&got, gs);
        fvm_dims_format(&want, ws);
        fvm_loc loc = {.file = path};
        return fvm_diag_add(d, FVM_ERR_TYPE, &loc,
                            "parameter '%s': client %s%s, column '%s': %s%s per example, but "
                            "field '%s' is %s%s",
                            param, who, where, fs[f].name, fvm_dtype_name(bad->dtype), gs, fs[f].name,
                            fvm_dtype_name(fs[f].dtype), ws);
    }
    return FVM_OK;
}

/* A client's examples (as the dataset gives them, fields in column order)
 * with the fields of the parameter's struct, in its order. */
static fvm_status project(const fvm_value *seq, int nf, const field_spec *fs, fvm_value **out, fvm_diag *d)
{
    if (seq->cols) {
        fvm_value *st = fvm_value_list(FVM_V_STRUCT, nf);
        if (!st)
            goto nomem;
        for (int f = 0; f < nf; f++) {
            fvm_value *c = seq->cols->items[fs[f].col];
            if (seq->n > 0 || !fs[f].check) {
                st->items[f] = fvm_value_retain(c);
                continue;
            }
            /* No examples: the dims the field fixes, not the file's '?' (read as 0). */
            fvm_dims shape = c->t.shape;
            for (int a = 0; a < fs[f].dims.rank && a + 1 < shape.rank; a++)
                if (fs[f].dims.d[a] >= 0)
                    shape.d[a + 1] = fs[f].dims.d[a];
            fvm_tensor t = {0};
            if (fvm_tensor_alloc(&t, c->t.dtype, &shape, d) || !(st->items[f] = fvm_value_tensor_take(&t))) {
                fvm_tensor_release(&t);
                fvm_value_release(st);
                goto nomem;
            }
        }
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
            st->items[f] = fvm_value_retain(seq->items[i]->items[fs[f].col]);
        l->items[i] = st;
    }
    *out = l;
    return FVM_OK;
nomem:
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

/* Reads client i, checks it against the fields and projects it. */
static fvm_status read_client(fvm_dataset *ds, int64_t i, const field_spec *fs, int nf, const char *path,
                              const char *param, fvm_value **out, fvm_diag *d)
{
    fvm_value *seq = NULL;
    fvm_status st = fvm_dataset_read(ds, i, &seq, d);
    if (st == FVM_OK)
        st = check_client(ds, i, seq, fs, nf, path, param, d);
    if (st == FVM_OK)
        st = project(seq, nf, fs, out, d);
    fvm_value_release(seq);
    return st;
}

/* ---- what the runs of a sweep share (fvm_data_cache) ---------------------------------- */

typedef struct cache_entry {
    char *key; /* path, split, parameter and type, each ended by a NUL */
    size_t klen;
    fvm_value *v;
} cache_entry;

struct fvm_data_cache {
    pthread_mutex_t lock;
    size_t max_bytes, bytes; /* decoded clients kept, at most max_bytes */
    cache_entry *entries;
    int n, cap;
};

fvm_data_cache *fvm_data_cache_new(size_t max_bytes)
{
    fvm_data_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->lock, NULL)) {
        free(c);
        return NULL;
    }
    c->max_bytes = max_bytes;
    return c;
}

void fvm_data_cache_free(fvm_data_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        fvm_value_release(c->entries[i].v);
        free(c->entries[i].key);
    }
    free(c->entries);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

size_t fvm_data_cache_bytes(fvm_data_cache *c)
{
    pthread_mutex_lock(&c->lock);
    size_t b = c->bytes;
    pthread_mutex_unlock(&c->lock);
    return b;
}

/* The bytes of v's tensors. */
static size_t value_bytes(const fvm_value *v)
{
    if (!v)
        return 0;
    if (v->kind == FVM_V_TENSOR)
        return fvm_tensor_bytes(&v->t);
    if (v->cols)
        return value_bytes(v->cols);
    size_t b = 0;
    for (int64_t k = 0; v->items && k < v->n; k++)
        b += value_bytes(v->items[k]);
    return b;
}

/* ---- {T*}@CLIENTS: clients read on demand ------------------------------------------- */

/* Dataset handles are not thread-safe: each read takes a free handle (opening
 * one when none is free) and gives it back, so concurrent reads use separate
 * handles and the pool grows to the number of concurrent readers. */
typedef struct data_source {
    fvm_source base;
    char *path, *split;
    char *param;
    int nfields;
    field_spec *fields;
    pthread_mutex_t lock;
    fvm_dataset **idle;
    int nidle, cap;
    fvm_data_cache *cache; /* NULL, or where decoded clients are kept (decoded[i], under cache->lock) */
    fvm_value **decoded;
    int64_t n;
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
    fvm_data_cache *c = s->cache;
    if (c) { /* decoded already, by this run or another */
        pthread_mutex_lock(&c->lock);
        *out = s->decoded[i] ? fvm_value_retain(s->decoded[i]) : NULL;
        pthread_mutex_unlock(&c->lock);
        if (*out)
            return FVM_OK;
    }
    fvm_dataset *ds = take_handle(s);
    fvm_status st = ds ? FVM_OK : fvm_dataset_open(s->path, s->split, &ds, d);
    if (st)
        return st;
    st = read_client(ds, i, s->fields, s->nfields, s->path, s->param, out, d);
    give_handle(s, ds);
    if (st == FVM_OK && c) { /* kept while the cache has room; values are immutable */
        size_t b = value_bytes(*out);
        pthread_mutex_lock(&c->lock);
        if (!s->decoded[i] && b <= c->max_bytes - c->bytes) {
            s->decoded[i] = fvm_value_retain(*out);
            c->bytes += b;
        }
        pthread_mutex_unlock(&c->lock);
    }
    return st;
}

static void source_free(fvm_source *src)
{
    data_source *s = (data_source *)src;
    for (int64_t i = 0; s->decoded && i < s->n; i++)
        fvm_value_release(s->decoded[i]); /* the cache is freed after (fvm_data_cache_free) */
    free(s->decoded);
    for (int k = 0; k < s->nidle; k++)
        fvm_dataset_close(s->idle[k]);
    free(s->idle);
    pthread_mutex_destroy(&s->lock);
    free(s->fields);
    free(s->param);
    free(s->path);
    free(s->split);
    free(s);
}

static const struct fvm_source_i source_iface = {.get = source_get, .free = source_free};

static fvm_status bind_clients(fvm_dataset *ds_take, const char *path, const char *split, const char *param,
                               const field_spec *fs, int nf, fvm_data_cache *cache, fvm_value **out, fvm_diag *d)
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
    s->param = strdup(param);
    s->fields = malloc((size_t)(nf ? nf : 1) * sizeof *s->fields);
    int64_t n = fvm_dataset_clients(ds_take);
    if (s->fields)
        memcpy(s->fields, fs, (size_t)nf * sizeof *fs);
    if (cache) {
        s->cache = cache;
        s->n = n;
        s->decoded = calloc((size_t)(n ? n : 1), sizeof *s->decoded);
    }
    if (!s->path || (split && !s->split) || !s->param || !s->fields || (cache && !s->decoded) ||
        !(*out = fvm_value_clients_source_take(n, &s->base))) {
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

/* Do two clients' columns have the same per-example shapes (so that their
 * rows can be put in one tensor)? Both by columns. */
static bool same_rows(const fvm_value *a, const fvm_value *b)
{
    for (int64_t k = 0; k < a->cols->n; k++) {
        const fvm_tensor *x = &a->cols->items[k]->t, *y = &b->cols->items[k]->t;
        if (x->dtype != y->dtype || x->shape.rank != y->shape.rank)
            return false;
        for (int j = 1; j < x->shape.rank; j++)
            if (x->shape.d[j] != y->shape.d[j])
                return false;
    }
    return true;
}

/* Every client's examples in order: by columns when every client is and
 * all have one shape per column, else a list of examples. */
static fvm_status bind_pooled(fvm_dataset *ds, const char *path, const char *param, const field_spec *fs, int nf,
                              fvm_value **out, fvm_diag *d)
{
    int64_t nc = fvm_dataset_clients(ds), total = 0;
    fvm_value **parts = calloc((size_t)(nc ? nc : 1), sizeof *parts);
    if (!parts)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    fvm_status s = FVM_OK;
    bool by_columns = true;
    int64_t ref = 0; /* the first client with examples: the others' rows must be shaped alike */
    for (int64_t i = 0; i < nc && s == FVM_OK; i++) {
        if ((s = read_client(ds, i, fs, nf, path, param, &parts[i], d)) == FVM_OK) {
            total += parts[i]->n;
            if (parts[ref]->n == 0)
                ref = i;
            by_columns = by_columns && parts[i]->cols && (parts[i]->n == 0 || same_rows(parts[ref], parts[i]));
        }
    }
    fvm_value *res = NULL;
    if (s == FVM_OK && by_columns && nc > 0) {
        /* every client's columns have one per-example shape, the file's */
        fvm_value *cols = NULL;
        s = alloc_like(parts[ref]->cols, total, &cols, d);
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

static fvm_status bind(const char *path, const char *split, const char *param, const fvm_type *t, fvm_data_cache *cache,
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
    field_spec *fs = calloc((size_t)(nf ? nf : 1), sizeof *fs);
    if (!fs)
        s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    if (s == FVM_OK)
        s = match_columns(ds, path, param, elem, fs, d);
    if (s == FVM_OK && clients) {
        s = bind_clients(ds, path, split, param, fs, nf, cache, out, d);
        ds = NULL; /* taken */
    } else if (s == FVM_OK) {
        s = bind_pooled(ds, path, param, fs, nf, out, d);
    }
    fvm_dataset_close(ds);
    free(fs);
    return s;
}

fvm_status fvm_data_bind(const char *path, const char *split, const char *param, const fvm_type *t, fvm_value **out,
                         fvm_diag *d)
{
    return bind(path, split, param, t, NULL, out, d);
}

fvm_status fvm_data_bind_cached(fvm_data_cache *c, const char *path, const char *split, const char *param,
                                const fvm_type *t, fvm_value **out, fvm_diag *d)
{
    if (!c)
        return bind(path, split, param, t, NULL, out, d);
    *out = NULL;
    fvm_arena a = {0};
    const char *type = fvm_type_str(&a, t, false); /* whole: two types never share a key */
    size_t klen = type ? strlen(path) + strlen(split ? split : "") + strlen(param) + strlen(type) + 4 : 0;
    char *key = type ? malloc(klen) : NULL;
    if (!key) {
        fvm_arena_free(&a);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    size_t at = 0; /* the four parts, each ended by its NUL */
    const char *parts[4] = {path, split ? split : "", param, type};
    for (int k = 0; k < 4; k++) {
        size_t n = strlen(parts[k]) + 1;
        memcpy(key + at, parts[k], n);
        at += n;
    }
    fvm_arena_free(&a);
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->n && !*out; i++)
        if (c->entries[i].klen == klen && !memcmp(c->entries[i].key, key, klen))
            *out = fvm_value_retain(c->entries[i].v);
    pthread_mutex_unlock(&c->lock);
    if (*out) {
        free(key);
        return FVM_OK;
    }
    fvm_status s = bind(path, split, param, t, c, out, d);
    if (s) {
        free(key);
        return s;
    }
    pthread_mutex_lock(&c->lock);
    bool room = c->n < c->cap;
    if (!room) {
        int cap = c->cap ? 2 * c->cap : 4;
        cache_entry *e = realloc(c->entries, (size_t)cap * sizeof *e);
        if ((room = e != NULL)) {
            c->entries = e;
            c->cap = cap;
        }
    }
    if (room) /* two runs binding at once each keep their own; the first is shared from then on */
        c->entries[c->n++] = (cache_entry){key, klen, fvm_value_retain(*out)};
    else
        free(key);
    pthread_mutex_unlock(&c->lock);
    return FVM_OK;
}
