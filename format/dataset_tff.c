/* dataset_tff.c - reading TFF SQLite datasets: clients in client_id order, one tf.train.Example per row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"
#include "example.pb-c.h"

static fvm_status prepare(fvm_dataset *ds, const char *sql, sqlite3_stmt **st, fvm_diag *d)
{
    int rc = sqlite3_prepare_v2(ds->db, sql, -1, st, NULL);
    return rc ? ds_sql_err(ds, d, rc, "reading the TFF tables") : FVM_OK;
}

/* Both tables must have the columns TFF's reader uses. */
static fvm_status check_columns(fvm_dataset *ds, const char *table, const char *const cols[3], fvm_diag *d)
{
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", table);
    sqlite3_stmt *st = NULL;
    fvm_status s = prepare(ds, sql, &st, d);
    if (s)
        return s;
    bool have[3] = {false, false, false};
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        for (int k = 0; k < 3; k++)
            have[k] = have[k] || (name && !strcmp(name, cols[k]));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return ds_sql_err(ds, d, rc, "reading the TFF tables");
    for (int k = 0; k < 3; k++)
        if (!have[k])
            return ds_err(ds, d, FVM_ERR_FORMAT, "table %s lacks the column %s (TFF's table has %s, %s and %s)", table,
                          cols[k], cols[0], cols[1], cols[2]);
    return FVM_OK;
}

/* Client i's id (kept in ds->id) and count from client_metadata. */
static fvm_status fetch_client(fvm_dataset *ds, int64_t i, int64_t *examples, bool *text, char who[DS_WHO],
                               fvm_diag *d)
{
    sqlite3_stmt *st = ds->st_row;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, ds->rowids[i]);
    int rc = sqlite3_step(st);
    fvm_status s = FVM_OK;
    if (rc != SQLITE_ROW) {
        s = rc == SQLITE_DONE ? ds_err(ds, d, FVM_ERR_IO, "client %lld vanished from client_metadata while the file "
                                       "was open", (long long)i)
                              : ds_sql_err(ds, d, rc, "reading client_metadata");
        goto done;
    }
    int t = sqlite3_column_type(st, 0);
    const void *id = t == SQLITE_BLOB ? sqlite3_column_blob(st, 0) : sqlite3_column_text(st, 0);
    size_t len = (size_t)sqlite3_column_bytes(st, 0);
    if (t != SQLITE_TEXT && t != SQLITE_BLOB) {
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client at index %lld: client_id is not text", (long long)i);
        goto done;
    }
    *text = t == SQLITE_TEXT;
    if ((s = ds_keep_id(ds, id, len, d)))
        goto done;
    ds_who(ds->id, ds->id_len, i, who);
    if (sqlite3_column_type(st, 1) != SQLITE_INTEGER || sqlite3_column_int64(st, 1) < 0)
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: num_examples is not a non-negative integer", who);
    else
        *examples = sqlite3_column_int64(st, 1);
done:
    sqlite3_reset(st);
    return s;
}

fvm_status ds_tff_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                         fvm_diag *d)
{
    char who[DS_WHO];
    bool text;
    fvm_status s = fetch_client(ds, i, examples, &text, who, d);
    if (s)
        return s;
    *id = ds->id;
    *id_len = ds->id_len;
    return FVM_OK;
}

/* SQLite's BINARY collation: memcmp, then the shorter first. */
static int compare_ids(const void *a, size_t na, const void *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

int64_t ds_tff_find(fvm_dataset *ds, const void *id, size_t id_len)
{
    /* The clients are sorted by client_id: binary search. */
    int64_t lo = 0, hi = ds->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2, count;
        bool text;
        char who[DS_WHO];
        fvm_diag quiet = {0};
        fvm_status s = fetch_client(ds, mid, &count, &text, who, &quiet);
        fvm_diag_clear(&quiet);
        if (s)
            return -1;
        int c = compare_ids(ds->id, ds->id_len, id, id_len);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* The parsed examples of one client. */
typedef struct examples {
    Tensorflow__Example **v;
    int64_t n;
} examples;

static void examples_free(examples *e)
{
    for (int64_t i = 0; i < e->n; i++)
        tensorflow__example__free_unpacked(e->v[i], NULL);
    free(e->v);
    memset(e, 0, sizeof *e);
}

static fvm_status read_examples(fvm_dataset *ds, bool text, int64_t count, const char *who, examples *out,
                                fvm_diag *d)
{
    sqlite3_stmt *st = ds->st_examples;
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, ds->split, -1, SQLITE_STATIC);
    if (text)
        sqlite3_bind_text(st, 2, (const char *)ds->id, (int)ds->id_len, SQLITE_STATIC);
    else
        sqlite3_bind_blob(st, 2, ds->id, (int)ds->id_len, SQLITE_STATIC);
    out->v = calloc((size_t)(count ? count : 1), sizeof *out->v);
    if (!out->v)
        return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
    int rc;
    fvm_status s = FVM_OK;
    int64_t rows = 0;
    while (s == FVM_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (rows++ >= count)
            continue; /* counted for the message below */
        const void *blob = sqlite3_column_blob(st, 0);
        size_t len = (size_t)sqlite3_column_bytes(st, 0);
        Tensorflow__Example *ex = tensorflow__example__unpack(NULL, len, blob);
        if (!ex)
            s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s, example %lld: not a valid serialized tf.train.Example", who,
                       (long long)out->n);
        else
            out->v[out->n++] = ex;
    }
    if (s == FVM_OK && rc != SQLITE_DONE)
        s = ds_sql_err(ds, d, rc, "reading examples");
    if (s == FVM_OK && rows != count)
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: client_metadata says %lld examples, but table examples has %lld",
                   who, (long long)count, (long long)rows);
    sqlite3_reset(st);
    return s;
}

/* Feature 'name' of an example (the last entry wins, as for protobuf maps), or NULL. */
static const Tensorflow__Feature *feature(const Tensorflow__Example *ex, const char *name)
{
    if (!ex->features)
        return NULL;
    for (size_t k = ex->features->n_feature; k-- > 0;) {
        const Tensorflow__Features__FeatureEntry *e = ex->features->feature[k];
        if (e->key && !strcmp(e->key, name))
            return e->value;
    }
    return NULL;
}

/* The values of a feature: dtype, length, data. */
static bool feature_values(const Tensorflow__Feature *f, fvm_dtype *dt, int64_t *len, const void **data)
{
    switch (f ? f->kind_case : TENSORFLOW__FEATURE__KIND__NOT_SET) {
    case TENSORFLOW__FEATURE__KIND_FLOAT_LIST:
        *dt = FVM_DTYPE_F32;
        *len = f->float_list ? (int64_t)f->float_list->n_value : 0;
        *data = f->float_list ? f->float_list->value : NULL;
        return true;
    case TENSORFLOW__FEATURE__KIND_INT64_LIST:
        *dt = FVM_DTYPE_I64;
        *len = f->int64_list ? (int64_t)f->int64_list->n_value : 0;
        *data = f->int64_list ? f->int64_list->value : NULL;
        return true;
    case TENSORFLOW__FEATURE__KIND_BYTES_LIST:
        if (!f->bytes_list || f->bytes_list->n_value != 1)
            return false;
        *dt = FVM_DTYPE_U8;
        *len = (int64_t)f->bytes_list->value[0].len;
        *data = f->bytes_list->value[0].data;
        return true;
    default:
        return false;
    }
}

/* Column 'name' of every example into c. */
static fvm_status gather(fvm_dataset *ds, const examples *ex, const char *name, const char *who, ds_col *c,
                         fvm_dtype *dt, fvm_diag *d)
{
    int64_t n = ex->n, len0 = 0;
    bool same = true;
    for (int64_t i = 0; i < n; i++) {
        const Tensorflow__Feature *f = feature(ex->v[i], name);
        fvm_dtype t;
        int64_t len;
        const void *data;
        if (!f)
            return ds_err(ds, d, FVM_ERR_TYPE, "client %s, example %lld lacks feature '%s'", who, (long long)i, name);
        if (!feature_values(f, &t, &len, &data))
            return ds_err(ds, d, FVM_ERR_TYPE, "client %s, example %lld, feature '%s': %s", who, (long long)i, name,
                          f->kind_case == TENSORFLOW__FEATURE__KIND_BYTES_LIST
                              ? "a bytes_list must hold exactly one value"
                              : "the feature holds no list");
        if (i == 0) {
            *dt = t;
            len0 = len;
        } else if (t != *dt) {
            return ds_err(ds, d, FVM_ERR_TYPE, "client %s, example %lld, feature '%s': a %s list, but example 0 "
                          "has a %s list", who, (long long)i, name, fvm_dtype_name(t), fvm_dtype_name(*dt));
        }
        same = same && len == len0;
    }
    if (same) {
        fvm_dims shape = {.rank = 2, .d = {n, len0}};
        fvm_status s = fvm_tensor_alloc(&c->full, *dt, &shape, d);
        if (s)
            return s;
        size_t row = (size_t)len0 * fvm_dtype_size(*dt);
        for (int64_t i = 0; i < n && row; i++) {
            fvm_dtype t;
            int64_t len;
            const void *data;
            feature_values(feature(ex->v[i], name), &t, &len, &data);
            memcpy((unsigned char *)fvm_tensor_data(&c->full) + (size_t)i * row, data, row);
        }
        return FVM_OK;
    }
    if (!(c->rows = calloc((size_t)n, sizeof *c->rows)))
        return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
    c->nrows = n;
    for (int64_t i = 0; i < n; i++) {
        fvm_dtype t;
        int64_t len;
        const void *data;
        feature_values(feature(ex->v[i], name), &t, &len, &data);
        fvm_dims shape = {.rank = 1, .d = {len}};
        fvm_status s = fvm_tensor_alloc(&c->rows[i], t, &shape, d);
        if (s)
            return s;
        if (len)
            memcpy(fvm_tensor_data(&c->rows[i]), data, (size_t)len * fvm_dtype_size(t));
    }
    return FVM_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sets the schema from the first client: its first example's feature names, sorted. */
static fvm_status first_schema(fvm_dataset *ds, const examples *ex, const char *who, fvm_diag *d)
{
    if (ex->n == 0)
        return ds_err(ds, d, FVM_ERR_FORMAT, "client %s, the first, has no examples to take the columns from", who);
    const Tensorflow__Features *fs = ex->v[0]->features;
    size_t n = fs ? fs->n_feature : 0;
    if (n == 0)
        return ds_err(ds, d, FVM_ERR_FORMAT, "client %s: example 0 has no features", who);
    const char **names = calloc(n, sizeof *names);
    size_t *lens = calloc(n, sizeof *lens);
    ds_col *cols = calloc(n, sizeof *cols);
    fvm_dtype *dts = calloc(n, sizeof *dts);
    fvm_status s = FVM_OK;
    if (!names || !lens || !cols || !dts) {
        s = ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n; k++)
        names[k] = fs->feature[k]->key ? fs->feature[k]->key : "";
    qsort(names, n, sizeof *names, by_name);
    size_t m = 0; /* distinct names */
    for (size_t k = 0; k < n; k++)
        if (names[k][0] && (m == 0 || strcmp(names[m - 1], names[k])))
            names[m++] = names[k];
    for (size_t k = 0; k < m && s == FVM_OK; k++) {
        lens[k] = strlen(names[k]);
        s = gather(ds, ex, names[k], who, &cols[k], &dts[k], d);
    }
    if (s == FVM_OK)
        s = ds_set_schema(ds, (int)m, names, lens, cols, d);
    /* Byte strings differ in length between examples and clients. */
    for (size_t k = 0; s == FVM_OK && k < m; k++)
        if (dts[k] == FVM_DTYPE_U8)
            ds->cols[k].shape.d[0] = -1;
done:
    for (size_t k = 0; cols && k < n; k++)
        ds_col_clear(&cols[k]);
    free(names);
    free(lens);
    free(cols);
    free(dts);
    return s;
}

/* Decodes client i's examples into columns in schema order. */
static fvm_status decode_client(fvm_dataset *ds, int64_t i, int64_t *n, ds_col **out, fvm_diag *d)
{
    char who[DS_WHO];
    bool text;
    examples ex = {0};
    ds_col *cols = NULL;
    *out = NULL;
    fvm_status s = fetch_client(ds, i, n, &text, who, d);
    if (s == FVM_OK)
        s = read_examples(ds, text, *n, who, &ex, d);
    if (s == FVM_OK && !ds->cols)
        s = first_schema(ds, &ex, who, d);
    if (s == FVM_OK && !(cols = calloc((size_t)(ds->ncols ? ds->ncols : 1), sizeof *cols)))
        s = ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
    for (int k = 0; s == FVM_OK && k < ds->ncols; k++) {
        fvm_dtype dt = ds->cols[k].dtype;
        if (ex.n == 0) { /* no examples: empty columns of the schema's type */
            fvm_dims shape = {.rank = 2, .d = {0, ds->cols[k].shape.d[0] < 0 ? 0 : ds->cols[k].shape.d[0]}};
            s = fvm_tensor_alloc(&cols[k].full, dt, &shape, d);
        } else if ((s = gather(ds, &ex, ds->cols[k].name, who, &cols[k], &dt, d)) == FVM_OK) {
            s = ds_col_check(ds, &ds->cols[k], &cols[k], who, d);
        }
    }
    /* Features the schema lacks. */
    for (int64_t e = 0; s == FVM_OK && e < ex.n; e++) {
        const Tensorflow__Features *fs = ex.v[e]->features;
        for (size_t k = 0; s == FVM_OK && fs && k < fs->n_feature; k++) {
            const char *key = fs->feature[k]->key ? fs->feature[k]->key : "";
            int c = 0;
            while (c < ds->ncols && strcmp(ds->cols[c].name, key))
                c++;
            if (c == ds->ncols)
                s = ds_err(ds, d, FVM_ERR_TYPE, "client %s, example %lld has a feature '%s' that the dataset's "
                           "schema (from its first client) lacks", who, (long long)e, key);
        }
    }
    examples_free(&ex);
    if (s && cols) {
        for (int k = 0; k < ds->ncols; k++)
            ds_col_clear(&cols[k]);
        free(cols);
        cols = NULL;
    }
    *out = cols;
    return s;
}

fvm_status ds_tff_read(fvm_dataset *ds, int64_t i, fvm_value **out, fvm_diag *d)
{
    int64_t n;
    ds_col *cols;
    fvm_status s = decode_client(ds, i, &n, &cols, d);
    if (s)
        return s;
    s = ds_build(ds, n, cols, out, d);
    free(cols);
    return s;
}

fvm_status ds_tff_open(fvm_dataset *ds, fvm_diag *d)
{
    static const char *const ex_cols[3] = {"split_name", "client_id", "serialized_example_proto"};
    static const char *const meta_cols[3] = {"client_id", "split_name", "num_examples"};
    fvm_status s;
    if ((s = check_columns(ds, "examples", ex_cols, d)) || (s = check_columns(ds, "client_metadata", meta_cols, d)))
        return s;
    /* TFF lists a split's clients as sorted(DISTINCT client_id). */
    sqlite3_stmt *st = NULL;
    if ((s = prepare(ds, "SELECT min(rowid) FROM client_metadata WHERE split_name = ?1 GROUP BY client_id "
                     "ORDER BY client_id", &st, d)))
        return s;
    sqlite3_bind_text(st, 1, ds->split, -1, SQLITE_STATIC);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((size_t)ds->n == cap) {
            cap = cap ? 2 * cap : 1024;
            int64_t *p = cap <= FVM_MAX_CLIENTS ? realloc(ds->rowids, cap * sizeof *p) : NULL;
            if (!p) {
                sqlite3_finalize(st);
                return ds_err(ds, d, cap > FVM_MAX_CLIENTS ? FVM_ERR_LIMIT : FVM_ERR_NOMEM,
                              "too many clients for the client index");
            }
            ds->rowids = p;
        }
        ds->rowids[ds->n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return ds_sql_err(ds, d, rc, "reading client_metadata");
    if ((s = prepare(ds, "SELECT client_id, num_examples FROM client_metadata WHERE rowid = ?1", &ds->st_row, d)) ||
        (s = prepare(ds, "SELECT serialized_example_proto FROM examples WHERE split_name = ?1 AND client_id = ?2 "
                     "ORDER BY rowid", &ds->st_examples, d)))
        return s;
    if (ds->n == 0)
        return FVM_OK;
    int64_t n;
    ds_col *cols;
    if ((s = decode_client(ds, 0, &n, &cols, d)))
        return s;
    for (int k = 0; k < ds->ncols; k++)
        ds_col_clear(&cols[k]);
    free(cols);
    return FVM_OK;
}
