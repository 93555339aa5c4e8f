/* dataset.c - opening FedJAX and TFF SQLite datasets, their splits and schema, and building client sequences. */
#include "dataset.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dataset_impl.h"

/* ---- shared helpers ---------------------------------------------------------- */

void ds_col_clear(ds_col *c)
{
    fvm_tensor_release(&c->full);
    for (int64_t i = 0; i < c->nrows; i++)
        fvm_tensor_release(&c->rows[i]);
    free(c->rows);
    memset(c, 0, sizeof *c);
}

const char *ds_who(const void *id, size_t len, int64_t i, char buf[DS_WHO])
{
    const unsigned char *p = id;
    bool text = true;
    for (size_t k = 0; k < len && text; k++)
        text = p[k] >= 0x20 && p[k] < 0x7f;
    size_t n = 0;
    if (text) {
        n = (size_t)snprintf(buf, DS_WHO, "'%.*s", (int)(len < 100 ? len : 100), (const char *)p);
        if (len > 100)
            n += (size_t)snprintf(buf + n, DS_WHO - n, "...");
        n += (size_t)snprintf(buf + n, DS_WHO - n, "'");
    } else {
        n = (size_t)snprintf(buf, DS_WHO, "0x");
        for (size_t k = 0; k < len && k < 40; k++)
            n += (size_t)snprintf(buf + n, DS_WHO - n, "%02x", p[k]);
        if (len > 40)
            n += (size_t)snprintf(buf + n, DS_WHO - n, "...");
    }
    snprintf(buf + n, DS_WHO - n, " (index %lld)", (long long)i);
    return buf;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t c = len == 1 ? p[0] : p[0] & (0x7f >> len);
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (p[k] & 0x3f);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return len;
}

void ds_clean(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len((const unsigned char *)s + i, n - i);
        if (len == 0 || (len == 1 && (unsigned char)s[i] < 0x20)) {
            s[i++] = '?';
            continue;
        }
        i += len;
    }
}

fvm_status ds_err(const fvm_dataset *ds, fvm_diag *d, fvm_status code, const char *fmt, ...)
{
    fvm_loc loc = {.file = ds->path};
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ds_clean(msg);
    fvm_diag_add(d, code, &loc, "%s", msg);
    return code;
}

fvm_status ds_sql_err(const fvm_dataset *ds, fvm_diag *d, int rc, const char *what)
{
    int prim = rc & 0xff;
    const char *msg = ds->db ? sqlite3_errmsg(ds->db) : sqlite3_errstr(rc);
    if (prim == SQLITE_NOTADB)
        return ds_err(ds, d, FVM_ERR_FORMAT, "not a SQLite database (%s)", msg);
    if (prim == SQLITE_CORRUPT)
        return ds_err(ds, d, FVM_ERR_FORMAT, "%s: the database is corrupt (%s)", what, msg);
    if (prim == SQLITE_NOMEM)
        return ds_err(ds, d, FVM_ERR_NOMEM, "%s: out of memory", what);
    return ds_err(ds, d, FVM_ERR_IO, "%s: %s", what, msg);
}

fvm_status ds_keep_id(fvm_dataset *ds, const void *id, size_t len, fvm_diag *d)
{
    if (len + 1 > ds->id_cap) {
        unsigned char *p = realloc(ds->id, len + 1);
        if (!p)
            return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
        ds->id = p;
        ds->id_cap = len + 1;
    }
    if (len)
        memcpy(ds->id, id, len);
    ds->id[len] = 0;
    ds->id_len = len;
    return FVM_OK;
}

void ds_col_shape(const ds_col *c, fvm_dtype *dtype, fvm_dims *shape)
{
    if (!c->rows) {
        *dtype = c->full.dtype;
        shape->rank = c->full.shape.rank - 1;
        for (int k = 0; k < shape->rank; k++)
            shape->d[k] = c->full.shape.d[k + 1];
        return;
    }
    *dtype = c->rows[0].dtype;
    *shape = c->rows[0].shape;
    for (int64_t i = 1; i < c->nrows; i++)
        for (int k = 0; k < shape->rank; k++)
            if (c->rows[i].shape.d[k] != shape->d[k])
                shape->d[k] = -1;
}

fvm_status ds_col_check(const fvm_dataset *ds, const fvm_column *schema, const ds_col *c, const char *who,
                        fvm_diag *d)
{
    fvm_dtype dt;
    fvm_dims shape;
    ds_col_shape(c, &dt, &shape);
    bool ok = dt == schema->dtype && shape.rank == schema->shape.rank;
    for (int k = 0; ok && k < shape.rank; k++)
        ok = schema->shape.d[k] < 0 || shape.d[k] == schema->shape.d[k];
    if (ok)
        return FVM_OK;
    char got[FVM_DIMS_STR], want[FVM_DIMS_STR];
    fvm_dims_format(&shape, got);
    fvm_dims_format(&schema->shape, want);
    return ds_err(ds, d, FVM_ERR_TYPE, "client %s, column '%s': examples are %s%s, but the dataset's schema (from its "
                  "first client) has %s%s", who, schema->name, fvm_dtype_name(dt), got,
                  fvm_dtype_name(schema->dtype), want);
}

fvm_status ds_set_schema(fvm_dataset *ds, int ncols, const char *const *names, const size_t *name_lens,
                         const ds_col *cols, fvm_diag *d)
{
    ds->cols = calloc((size_t)(ncols ? ncols : 1), sizeof *ds->cols);
    if (!ds->cols)
        return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
    ds->ncols = ncols;
    for (int k = 0; k < ncols; k++) {
        char *name = strndup(names[k], name_lens[k]);
        if (!name)
            return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
        ds->cols[k].name = name;
        ds_col_shape(&cols[k], &ds->cols[k].dtype, &ds->cols[k].shape);
    }
    return FVM_OK;
}

fvm_status ds_build(const fvm_dataset *ds, int64_t n, ds_col *cols, fvm_value **out, fvm_diag *d)
{
    int ncols = ds->ncols;
    bool by_columns = true;
    for (int k = 0; k < ncols; k++)
        by_columns = by_columns && !cols[k].rows;
    fvm_value *seq = NULL;
    if (by_columns) {
        fvm_value *st = fvm_value_list(FVM_V_STRUCT, ncols);
        if (!st)
            goto nomem;
        for (int k = 0; k < ncols; k++)
            if (!(st->items[k] = fvm_value_tensor_take(&cols[k].full))) {
                fvm_value_release(st);
                goto nomem;
            }
        if (!(seq = fvm_value_seq_cols_take(n, st))) {
            fvm_value_release(st);
            goto nomem;
        }
    } else {
        if (!(seq = fvm_value_list(FVM_V_SEQ, n)))
            goto nomem;
        for (int64_t i = 0; i < n; i++) {
            fvm_value *st = fvm_value_list(FVM_V_STRUCT, ncols);
            if (!st)
                goto nomem;
            seq->items[i] = st;
            for (int k = 0; k < ncols; k++) {
                fvm_tensor t = {0};
                if (cols[k].rows) {
                    t = cols[k].rows[i];
                    memset(&cols[k].rows[i], 0, sizeof t);
                } else if (fvm_tensor_row(&cols[k].full, i, &t)) {
                    goto nomem; /* cannot happen: i is within the leading axis */
                }
                if (!(st->items[k] = fvm_value_tensor_take(&t))) {
                    fvm_tensor_release(&t);
                    goto nomem;
                }
            }
        }
    }
    for (int k = 0; k < ncols; k++)
        ds_col_clear(&cols[k]);
    *out = seq;
    return FVM_OK;
nomem:
    fvm_value_release(seq);
    for (int k = 0; k < ncols; k++)
        ds_col_clear(&cols[k]);
    return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory building a client's examples");
}

char *ds_fedjax_table(const char *split, const char *path, fvm_diag *d)
{
    if (!split || !strcmp(split, "default"))
        return strdup("federated_data");
    size_t n = strlen(split);
    bool ok = n >= 1 && n <= 64;
    for (size_t k = 0; k < n && ok; k++)
        ok = (split[k] >= 'a' && split[k] <= 'z') || (split[k] >= 'A' && split[k] <= 'Z') ||
             (split[k] >= '0' && split[k] <= '9') || split[k] == '_';
    if (!ok) {
        fvm_loc loc = {.file = path};
        fvm_diag_add(d, FVM_ERR_USAGE, &loc, "split name '%s': use 1 to 64 letters, digits or underscores", split);
        return NULL;
    }
    char *t = malloc(n + 16);
    if (t)
        snprintf(t, n + 16, "federated_data_%s", split);
    return t;
}

/* ---- splits ---------------------------------------------------------------------- */

typedef struct names {
    char **v;
    int n, cap;
} names;

static int names_push(names *s, const char *text, size_t len)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        char **v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strndup(text, len)))
        return -1;
    s->n++;
    return 0;
}

static bool has_table(sqlite3 *db, const char *name, int *rc)
{
    sqlite3_stmt *st = NULL;
    *rc = sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", -1, &st, NULL);
    if (*rc)
        return false;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    *rc = r == SQLITE_ROW || r == SQLITE_DONE ? SQLITE_OK : r;
    sqlite3_finalize(st);
    return r == SQLITE_ROW;
}

/* Which format ds->db holds; an error when neither. */
static fvm_status detect(fvm_dataset *ds, fvm_diag *d)
{
    int rc;
    if (has_table(ds->db, "federated_data", &rc)) {
        ds->kind = DS_FEDJAX;
        return FVM_OK;
    }
    if (rc)
        return ds_sql_err(ds, d, rc, "reading the tables");
    bool ex = has_table(ds->db, "examples", &rc);
    bool meta = !rc && has_table(ds->db, "client_metadata", &rc);
    if (rc)
        return ds_sql_err(ds, d, rc, "reading the tables");
    if (ex && meta) {
        ds->kind = DS_TFF;
        return FVM_OK;
    }
    return ds_err(ds, d, FVM_ERR_FORMAT, "not a federated dataset: it has no table federated_data (FedJAX) and "
                  "no tables examples and client_metadata (TFF)%s", ex || meta ? " (only one of the two)" : "");
}

static fvm_status list_splits(fvm_dataset *ds, names *out, fvm_diag *d)
{
    const char *sql = ds->kind == DS_FEDJAX
                          ? "SELECT substr(name, 16) FROM sqlite_master WHERE type = 'table' AND "
                            "name LIKE 'federated\\_data\\_%' ESCAPE '\\' ORDER BY name"
                          : "SELECT DISTINCT split_name FROM client_metadata ORDER BY split_name";
    if (ds->kind == DS_FEDJAX && names_push(out, "default", 7))
        return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(ds->db, sql, -1, &st, NULL);
    if (rc)
        return ds_sql_err(ds, d, rc, "listing the splits");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *s = (const char *)sqlite3_column_text(st, 0);
        if (ds->kind == DS_FEDJAX && s) { /* only tables a split name can open */
            char *table = strcmp(s, "default") ? ds_fedjax_table(s, ds->path, NULL) : NULL;
            free(table);
            if (!table)
                continue;
        }
        if (s && names_push(out, s, (size_t)sqlite3_column_bytes(st, 0))) {
            sqlite3_finalize(st);
            return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? FVM_OK : ds_sql_err(ds, d, rc, "listing the splits");
}

static void names_free(names *s)
{
    fvm_dataset_free_splits(s->v, s->n);
    memset(s, 0, sizeof *s);
}

static char *names_join(const names *s)
{
    size_t len = 1;
    for (int i = 0; i < s->n; i++)
        len += strlen(s->v[i]) + 2;
    char *out = malloc(len), *p = out;
    if (!out)
        return NULL;
    *p = 0;
    for (int i = 0; i < s->n; i++)
        p += sprintf(p, "%s%s", i ? ", " : "", s->v[i]);
    return out;
}

/* Opens path read-only and detects its format. */
static fvm_status open_db(const char *path, fvm_dataset **out, fvm_diag *d)
{
    *out = NULL;
    fvm_loc loc = {.file = path};
    struct stat sb;
    if (stat(path, &sb) != 0)
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot open: %s", strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot open: is a directory");
    fvm_dataset *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->path = strdup(path))) {
        free(ds);
        return fvm_diag_add(d, FVM_ERR_NOMEM, &loc, "out of memory");
    }
    int rc = sqlite3_open_v2(path, &ds->db, SQLITE_OPEN_READONLY, NULL);
    fvm_status s = rc ? ds_sql_err(ds, d, rc, "cannot open") : detect(ds, d);
    if (s) {
        fvm_dataset_close(ds);
        return s;
    }
    *out = ds;
    return FVM_OK;
}

fvm_status fvm_dataset_splits(const char *path, char ***out, int *n, fvm_diag *d)
{
    *out = NULL;
    *n = 0;
    fvm_dataset *ds;
    fvm_status s = open_db(path, &ds, d);
    if (s)
        return s;
    names list = {0};
    s = list_splits(ds, &list, d);
    fvm_dataset_close(ds);
    if (s) {
        names_free(&list);
        return s;
    }
    *out = list.v;
    *n = list.n;
    return FVM_OK;
}

void fvm_dataset_free_splits(char **splits, int n)
{
    for (int i = 0; i < n; i++)
        free(splits[i]);
    free(splits);
}

/* ---- open, close, queries -------------------------------------------------------- */

/* Chooses the split: a known name, or for NULL the default (FedJAX) or the
 * only one (TFF). The error lists the file's splits. */
static fvm_status choose_split(fvm_dataset *ds, const char *split, fvm_diag *d)
{
    names list = {0};
    fvm_status s = list_splits(ds, &list, d);
    if (s)
        return s;
    const char *want = split ? split : ds->kind == DS_FEDJAX ? "default" : NULL;
    if (!want && list.n == 1)
        want = list.v[0];
    for (int i = 0; want && i < list.n; i++)
        if (!strcmp(list.v[i], want)) {
            if (!(ds->split = strdup(want)))
                s = ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
            names_free(&list);
            return s;
        }
    char *all = names_join(&list);
    if (!want && list.n == 0)
        s = ds_err(ds, d, FVM_ERR_FORMAT, "the TFF dataset has no splits (client_metadata is empty)");
    else if (!want)
        s = ds_err(ds, d, FVM_ERR_NAME, "the dataset has several splits (%s); choose one", all ? all : "");
    else
        s = ds_err(ds, d, FVM_ERR_NAME, "no split '%s'; the dataset's splits: %s", want, all ? all : "");
    free(all);
    names_free(&list);
    return s;
}

fvm_status fvm_dataset_open(const char *path, const char *split, fvm_dataset **out, fvm_diag *d)
{
    fvm_dataset *ds;
    fvm_status s = open_db(path, &ds, d);
    if (s)
        return s;
    s = choose_split(ds, split, d);
    if (s == FVM_OK && ds->kind == DS_FEDJAX && !(ds->table = ds_fedjax_table(ds->split, path, d)))
        s = d && d->n ? d->errs[d->n - 1].code : FVM_ERR_NOMEM;
    if (s == FVM_OK)
        s = ds->kind == DS_FEDJAX ? ds_fedjax_open(ds, d) : ds_tff_open(ds, d);
    if (s) {
        fvm_dataset_close(ds);
        return s;
    }
    *out = ds;
    return FVM_OK;
}

void fvm_dataset_close(fvm_dataset *ds)
{
    if (!ds)
        return;
    sqlite3_finalize(ds->st_row);
    sqlite3_finalize(ds->st_id);
    sqlite3_finalize(ds->st_find);
    sqlite3_finalize(ds->st_examples);
    sqlite3_close(ds->db);
    for (int k = 0; k < ds->ncols; k++)
        free((char *)ds->cols[k].name);
    free(ds->cols);
    free(ds->rowids);
    free(ds->id);
    free(ds->buf);
    if (ds->inflater)
        libdeflate_free_decompressor(ds->inflater);
    free(ds->split);
    free(ds->table);
    free(ds->path);
    free(ds);
}

const char *fvm_dataset_format(const fvm_dataset *ds)
{
    return ds->kind == DS_FEDJAX ? "fedjax" : "tff";
}

int64_t fvm_dataset_clients(const fvm_dataset *ds)
{
    return ds->n;
}

int fvm_dataset_columns(const fvm_dataset *ds, const fvm_column **cols)
{
    *cols = ds->cols;
    return ds->ncols;
}

static fvm_status check_index(const fvm_dataset *ds, int64_t i, fvm_diag *d)
{
    if (i < 0 || i >= ds->n)
        return ds_err(ds, d, FVM_ERR_USAGE, "client index %lld out of range: split '%s' has %lld clients",
                      (long long)i, ds->split, (long long)ds->n);
    return FVM_OK;
}

fvm_status fvm_dataset_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                              fvm_diag *d)
{
    fvm_status s = check_index(ds, i, d);
    if (s)
        return s;
    return ds->kind == DS_FEDJAX ? ds_fedjax_client(ds, i, id, id_len, examples, d)
                                 : ds_tff_client(ds, i, id, id_len, examples, d);
}

int64_t fvm_dataset_find(fvm_dataset *ds, const void *id, size_t id_len)
{
    return ds->kind == DS_FEDJAX ? ds_fedjax_find(ds, id, id_len) : ds_tff_find(ds, id, id_len);
}

fvm_status fvm_dataset_read(fvm_dataset *ds, int64_t i, fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    fvm_status s = check_index(ds, i, d);
    if (s)
        return s;
    return ds->kind == DS_FEDJAX ? ds_fedjax_read(ds, i, out, d) : ds_tff_read(ds, i, out, d);
}
