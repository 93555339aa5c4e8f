/* dataset_tff.c - the TFF SQLite format: clients in client_id order, one tf.train.Example per row. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"
#include "example.pb-c.h"

/* An open TFF split: the format's state (ds->impl). */
typedef struct tff {
    /* The names by which SQL reaches the real rowid of client_metadata and
     * of examples: "rowid", "_rowid_" or "oid", whichever no column of the
     * table hides. */
    const char *rowid, *ex_rowid;
    int64_t *rowids; /* client i's row of client_metadata (clients in client_id order) */
    sqlite3_stmt *st_row; /* id, count by rowid */
    sqlite3_stmt *st_examples; /* a client's serialized examples */
} tff;

static fvm_status prepare(fvm_dataset *ds, const char *sql, sqlite3_stmt **st, fvm_diag *d)
{
    int rc = sqlite3_prepare_v2(ds->db, sql, -1, st, NULL);
    return rc ? ds_sql_err(ds, d, rc, "reading the TFF tables") : FVM_OK;
}

/* Checks both tables' columns, sets the rowid names, and checks every row of
 * client_metadata: client_id and split_name text, num_examples an integer
 * from 0 to DS_MAX_EXAMPLES; an error names the row. */
static fvm_status check_tables(fvm_dataset *ds, fvm_diag *d)
{
    tff *t = ds->impl;
    static const char *const ex_cols[3] = {"split_name", "client_id", "serialized_example_proto"};
    static const char *const meta_cols[3] = {"client_id", "split_name", "num_examples"};
    fvm_status s;
    if ((s = ds_check_table(ds, "examples", ex_cols, 3, &t->ex_rowid, d)) ||
        (s = ds_check_table(ds, "client_metadata", meta_cols, 3, &t->rowid, d)))
        return s;
    /* Every row of client_metadata: names are text (a split name stored as a
     * blob would list as a split of no clients), counts are counts. */
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT %s, typeof(client_id), typeof(split_name), typeof(num_examples), num_examples "
             "FROM client_metadata WHERE typeof(client_id) != 'text' OR typeof(split_name) != 'text' OR "
             "typeof(num_examples) != 'integer' OR num_examples < 0 OR num_examples > %lld LIMIT 1",
             t->rowid, (long long)DS_MAX_EXAMPLES);
    sqlite3_stmt *st = NULL;
    if ((s = prepare(ds, sql, &st, d)))
        return s;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        long long row = sqlite3_column_int64(st, 0);
        const char *types[3] = {(const char *)sqlite3_column_text(st, 1), (const char *)sqlite3_column_text(st, 2),
                                (const char *)sqlite3_column_text(st, 3)};
        for (int k = 0; k < 3; k++) /* typeof's names, as words */
            types[k] = !types[k]                      ? "?"
                       : !strcmp(types[k], "blob")    ? "a blob"
                       : !strcmp(types[k], "real")    ? "a real"
                       : !strcmp(types[k], "integer") ? "an integer"
                       : !strcmp(types[k], "null")    ? "NULL"
                                                      : types[k];
        if (strcmp(types[0], "text"))
            s = ds_err(ds, d, FVM_ERR_FORMAT, "client_metadata row %lld: client_id is %s, not text", row, types[0]);
        else if (strcmp(types[1], "text"))
            s = ds_err(ds, d, FVM_ERR_FORMAT, "client_metadata row %lld: split_name is %s, not text", row, types[1]);
        else if (strcmp(types[2], "an integer"))
            s = ds_err(ds, d, FVM_ERR_FORMAT, "client_metadata row %lld: num_examples is %s, not an integer", row,
                       types[2]);
        else
            s = ds_err(ds, d, FVM_ERR_FORMAT,
                       "client_metadata row %lld: num_examples is %lld, not a count from 0 to "
                       "%lld",
                       row, (long long)sqlite3_column_int64(st, 4), (long long)DS_MAX_EXAMPLES);
    } else if (rc != SQLITE_DONE) {
        s = ds_sql_err(ds, d, rc, "reading client_metadata");
    }
    sqlite3_finalize(st);
    return s;
}

/* Client i's id (kept in ds->id) and count from client_metadata. */
static fvm_status fetch_client(fvm_dataset *ds, int64_t i, int64_t *examples, char who[DS_WHO], fvm_diag *d)
{
    tff *t = ds->impl;
    sqlite3_stmt *st = t->st_row;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, t->rowids[i]);
    int rc = sqlite3_step(st);
    fvm_status s = FVM_OK;
    if (rc != SQLITE_ROW) {
        s = rc == SQLITE_DONE ? ds_err(ds, d, FVM_ERR_IO,
                                       "client %lld vanished from client_metadata while the file "
                                       "was open",
                                       (long long)i)
                              : ds_sql_err(ds, d, rc, "reading client_metadata");
        goto done;
    }
    if (sqlite3_column_type(st, 0) != SQLITE_TEXT) { /* checked at open; the file may have changed since */
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client at index %lld: client_id is not text", (long long)i);
        goto done;
    }
    const void *id = sqlite3_column_text(st, 0);
    size_t len = (size_t)sqlite3_column_bytes(st, 0);
    if ((s = ds_keep_id(ds, id, len, d)))
        goto done;
    ds_who(ds->id, ds->id_len, i, who);
    int64_t count = sqlite3_column_int64(st, 1);
    if (sqlite3_column_type(st, 1) != SQLITE_INTEGER || count < 0 || count > DS_MAX_EXAMPLES)
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: num_examples is not an integer from 0 to %lld", who,
                   (long long)DS_MAX_EXAMPLES);
    else
        *examples = count;
done:
    sqlite3_reset(st);
    return s;
}

static fvm_status tff_client(fvm_dataset *ds, int64_t i, int64_t *examples, fvm_diag *d)
{
    char who[DS_WHO];
    return fetch_client(ds, i, examples, who, d);
}

/* ---- one client's examples ------------------------------------------------------------ */

/* The parsed examples of one client. */
typedef struct examples {
    Tensorflow__Example **v;
    int64_t n, cap;
} examples;

static void examples_free(examples *e)
{
    for (int64_t i = 0; i < e->n; i++)
        tensorflow__example__free_unpacked(e->v[i], NULL);
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* protobuf's wire format, as far as finding the feature names takes it. */
static bool wire_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *pos < len; shift += 7) {
        uint8_t b = p[(*pos)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* The next field at *pos: its number, and for a length-delimited field its
 * bytes; other wire types are skipped. false when malformed. */
static bool wire_field(const uint8_t *p, size_t len, size_t *pos, uint64_t *num, const uint8_t **body, size_t *blen)
{
    uint64_t tag, v;
    if (!wire_varint(p, len, pos, &tag))
        return false;
    *num = tag >> 3;
    *body = NULL;
    switch (tag & 7) {
    case 0:
        return wire_varint(p, len, pos, &v);
    case 1:
    case 5: {
        size_t n = (tag & 7) == 1 ? 8 : 4;
        if (len - *pos < n)
            return false;
        *pos += n;
        return true;
    }
    case 2:
        if (!wire_varint(p, len, pos, &v) || v > len - *pos)
            return false;
        *body = p + *pos;
        *blen = (size_t)v;
        *pos += (size_t)v;
        return true;
    default:
        return false;
    }
}

/* protobuf-c hands map keys over as C strings, so "y\0" would read as "y":
 * the names are checked on the wire (Example.features = 1, Features.feature
 * = 1, FeatureEntry.key = 1). Malformed bytes are left to protobuf-c. */
static fvm_status check_names(fvm_dataset *ds, const char *who, int64_t e, const uint8_t *p, size_t len, fvm_diag *d)
{
    size_t pos = 0;
    uint64_t num;
    const uint8_t *fs;
    size_t flen;
    while (pos < len && wire_field(p, len, &pos, &num, &fs, &flen)) {
        if (num != 1 || !fs)
            continue;
        size_t fpos = 0;
        const uint8_t *entry;
        size_t elen;
        while (fpos < flen && wire_field(fs, flen, &fpos, &num, &entry, &elen)) {
            if (num != 1 || !entry)
                continue;
            size_t epos = 0;
            const uint8_t *key;
            size_t klen;
            while (epos < elen && wire_field(entry, elen, &epos, &num, &key, &klen))
                if (num == 1 && key && !ds_name_ok(key, klen)) {
                    char where[DS_WHO + 40];
                    snprintf(where, sizeof where, "%s, example %lld", who, (long long)e);
                    return ds_check_name(ds, where, "feature", key, klen, d);
                }
        }
    }
    return FVM_OK;
}

/* Parses serialized example number e of a client onto ex. */
static fvm_status parse_example(fvm_dataset *ds, const char *who, const void *proto, size_t len, examples *ex,
                                fvm_diag *d)
{
    int64_t e = ex->n;
    fvm_status s = check_names(ds, who, e, proto, len, d);
    if (s)
        return s;
    if (ex->n == ex->cap) {
        int64_t cap = ex->cap ? 2 * ex->cap : 16;
        Tensorflow__Example **v = realloc(ex->v, (size_t)cap * sizeof *v);
        if (!v)
            return ds_err(ds, d, FVM_ERR_NOMEM, "client %s: out of memory", who);
        ex->v = v;
        ex->cap = cap;
    }
    Tensorflow__Example *one = tensorflow__example__unpack(NULL, len, proto);
    if (!one)
        return ds_err(ds, d, FVM_ERR_FORMAT, "client %s, example %lld: not a valid serialized tf.train.Example", who,
                      (long long)e);
    ex->v[ex->n++] = one;
    return FVM_OK;
}

/* Reads and parses the client in ds->id: its rows of examples, which must
 * be 'count' (client_metadata's claim, never trusted for an allocation). */
static fvm_status read_examples(fvm_dataset *ds, int64_t count, const char *who, examples *out, fvm_diag *d)
{
    sqlite3_stmt *st = ((tff *)ds->impl)->st_examples;
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, ds->split, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, (const char *)ds->id, (int)ds->id_len, SQLITE_STATIC);
    int rc;
    fvm_status s = FVM_OK;
    int64_t rows = 0;
    while (s == FVM_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (rows++ >= count)
            continue; /* counted for the message below */
        if (sqlite3_column_type(st, 0) != SQLITE_BLOB) {
            s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s, example %lld: serialized_example_proto is not a blob", who,
                       (long long)out->n);
            break;
        }
        s = parse_example(ds, who, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), out, d);
    }
    if (s == FVM_OK && rc != SQLITE_DONE)
        s = ds_sql_err(ds, d, rc, "reading examples");
    if (s == FVM_OK && rows != count)
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: client_metadata says %lld examples, but table examples has %lld",
                   who, (long long)count, (long long)rows);
    sqlite3_reset(st);
    return s;
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

static const char *feature_fault(const Tensorflow__Feature *f)
{
    return f && f->kind_case == TENSORFLOW__FEATURE__KIND_BYTES_LIST ? "a bytes_list must hold exactly one value"
                                                                     : "the feature holds no list";
}

static size_t n_features(const Tensorflow__Example *ex)
{
    return ex->features ? ex->features->n_feature : 0;
}

static const char *entry_key(const Tensorflow__Features__FeatureEntry *e)
{
    return e->key ? e->key : "";
}

/* Sets the schema from a client's first example: its features, sorted by
 * name, each a column of rank 1 whose length is '?' (a TFF feature is a list
 * whose length the format does not fix). */
static fvm_status first_schema(fvm_dataset *ds, const examples *ex, const char *who, fvm_diag *d)
{
    size_t nf = n_features(ex->v[0]);
    if (nf == 0)
        return ds_err(ds, d, FVM_ERR_FORMAT, "client %s: example 0 has no features", who);
    if (nf > 4 * (size_t)DS_MAX_COLUMNS)
        return ds_err(ds, d, FVM_ERR_LIMIT, "client %s: example 0 has %zu features, more than fedvm reads (%d)", who,
                      nf, DS_MAX_COLUMNS);
    Tensorflow__Features__FeatureEntry **fe = ex->v[0]->features->feature;
    ds_name *byname = calloc(nf, sizeof *byname);
    const char **names = calloc(nf, sizeof *names);
    size_t *lens = calloc(nf, sizeof *lens);
    fvm_dtype *dts = calloc(nf, sizeof *dts);
    fvm_status s = FVM_OK;
    if (!byname || !names || !lens || !dts) {
        s = ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < nf; k++)
        byname[k] = (ds_name){entry_key(fe[k]), strlen(entry_key(fe[k])), (int)k};
    /* by name, then by position: of entries with one name the last one wins, as in protobuf's maps */
    qsort(byname, nf, sizeof *byname, ds_name_cmp);
    size_t m = 0;
    for (size_t k = 0; k < nf && s == FVM_OK; k++) {
        if (k + 1 < nf && byname[k + 1].len == byname[k].len &&
            !memcmp(byname[k + 1].name, byname[k].name, byname[k].len))
            continue;
        int64_t len;
        const void *data;
        if (!feature_values(fe[byname[k].col]->value, &dts[m], &len, &data)) {
            char esc[DS_ESC];
            s = ds_err(ds, d, FVM_ERR_TYPE, "client %s, example 0, feature '%s': %s", who,
                       ds_esc(byname[k].name, byname[k].len, esc), feature_fault(fe[byname[k].col]->value));
            break;
        }
        names[m] = byname[k].name;
        lens[m++] = byname[k].len;
    }
    if (s == FVM_OK && m > DS_MAX_COLUMNS)
        s = ds_err(ds, d, FVM_ERR_LIMIT, "client %s: example 0 has %zu features, more than fedvm reads (%d)", who, m,
                   DS_MAX_COLUMNS);
    if (s == FVM_OK)
        s = ds_set_schema(ds, who, (int)m, names, lens, NULL, d);
    for (size_t k = 0; s == FVM_OK && k < m; k++) {
        ds->cols[k].dtype = dts[k];
        ds->cols[k].shape = (fvm_dims){.rank = 1, .d = {-1}};
    }
done:
    free(byname);
    free(names);
    free(lens);
    free(dts);
    return s;
}

/* The column of each of example e's features (the last entry of a name
 * wins, as in protobuf's maps; earlier ones get -1): an error for a feature
 * the schema lacks. mark[c] == tag marks the columns seen. col[] holds the
 * previous example's columns on entry: examples written alike find each
 * name at once. */
static fvm_status map_features(fvm_dataset *ds, const char *who, const Tensorflow__Example *ex, int64_t e, int64_t tag,
                               int64_t *mark, int *col, int *seen, fvm_diag *d)
{
    size_t nf = n_features(ex);
    *seen = 0;
    for (size_t k = nf; k-- > 0;) {
        const char *key = entry_key(ex->features->feature[k]);
        size_t klen = strlen(key);
        int c = ds_column_near(ds, key, klen, col[k]);
        if (c < 0) {
            char esc[DS_ESC];
            return ds_err(ds, d, FVM_ERR_TYPE,
                          "client %s, example %lld has a feature '%s' that the dataset's schema "
                          "(from its first client with examples) lacks",
                          who, (long long)e, ds_esc(key, klen, esc));
        }
        if (mark[c] == tag) {
            col[k] = -1;
            continue;
        }
        mark[c] = tag;
        col[k] = c;
        (*seen)++;
    }
    return FVM_OK;
}

/* The examples' features as columns in schema order: each column one tensor
 * [n, L] when its length L is the same in all the client's examples, else
 * one tensor per example. Linear in the number of features: each is looked
 * up once per pass by a binary search of the schema. */
static fvm_status gather(fvm_dataset *ds, const examples *ex, const char *who, ds_col **out, fvm_diag *d)
{
    int nc = ds->ncols;
    int64_t n = ex->n;
    size_t most = 0; /* features in one example */
    for (int64_t e = 0; e < n; e++)
        most = n_features(ex->v[e]) > most ? n_features(ex->v[e]) : most;
    ds_col *cols = calloc((size_t)(nc ? nc : 1), sizeof *cols);
    int64_t *mark = malloc((size_t)(nc ? nc : 1) * sizeof *mark), *len0 = calloc((size_t)(nc ? nc : 1), sizeof *len0);
    bool *same = malloc((size_t)(nc ? nc : 1) * sizeof *same);
    int *col = malloc((most ? most : 1) * sizeof *col);
    fvm_status s = FVM_OK;
    if (!cols || !mark || !len0 || !same || !col) {
        s = ds_err(ds, d, FVM_ERR_NOMEM, "client %s: out of memory", who);
        goto done;
    }
    for (int c = 0; c < nc; c++) {
        mark[c] = -1;
        same[c] = true;
    }
    for (size_t k = 0; k < most; k++)
        col[k] = (int)(k < (size_t)INT_MAX ? k : 0);
    /* Pass 1: every feature known, of the schema's kind; every column present; the lengths. */
    for (int64_t e = 0; e < n && s == FVM_OK; e++) {
        int seen;
        if ((s = map_features(ds, who, ex->v[e], e, e, mark, col, &seen, d)))
            break;
        for (size_t k = 0; k < n_features(ex->v[e]) && s == FVM_OK; k++) {
            int c = col[k];
            if (c < 0)
                continue;
            const Tensorflow__Feature *f = ex->v[e]->features->feature[k]->value;
            fvm_dtype t;
            int64_t len;
            const void *data;
            char esc[DS_ESC];
            if (!feature_values(f, &t, &len, &data))
                s = ds_err(ds, d, FVM_ERR_TYPE, "client %s, example %lld, feature '%s': %s", who, (long long)e,
                           ds_esc(ds->cols[c].name, strlen(ds->cols[c].name), esc), feature_fault(f));
            else if (t != ds->cols[c].dtype)
                s = ds_err(ds, d, FVM_ERR_TYPE,
                           "client %s, example %lld, feature '%s': a %s list, but the dataset's "
                           "schema (from its first client with examples) has a %s list",
                           who, (long long)e, ds_esc(ds->cols[c].name, strlen(ds->cols[c].name), esc),
                           fvm_dtype_name(t), fvm_dtype_name(ds->cols[c].dtype));
            else if (e == 0)
                len0[c] = len;
            else if (len != len0[c])
                same[c] = false;
        }
        for (int c = 0; s == FVM_OK && seen < nc && c < nc; c++)
            if (mark[c] != e) {
                char esc[DS_ESC];
                s = ds_err(ds, d, FVM_ERR_TYPE, "client %s, example %lld lacks feature '%s'", who, (long long)e,
                           ds_esc(ds->cols[c].name, strlen(ds->cols[c].name), esc));
            }
    }
    for (int c = 0; c < nc && s == FVM_OK; c++) {
        if (same[c]) {
            fvm_dims shape = {.rank = 2, .d = {n, n ? len0[c] : 0}};
            s = fvm_tensor_alloc(&cols[c].full, ds->cols[c].dtype, &shape, d);
        } else if (!(cols[c].rows = calloc((size_t)n, sizeof *cols[c].rows))) {
            s = ds_err(ds, d, FVM_ERR_NOMEM, "client %s: out of memory", who);
        } else {
            cols[c].nrows = n;
        }
    }
    /* Pass 2: the values. */
    for (int64_t e = 0; e < n && s == FVM_OK; e++) {
        int seen;
        if ((s = map_features(ds, who, ex->v[e], e, n + e, mark, col, &seen, d)))
            break;
        for (size_t k = 0; k < n_features(ex->v[e]) && s == FVM_OK; k++) {
            int c = col[k];
            if (c < 0)
                continue;
            fvm_dtype t;
            int64_t len;
            const void *data;
            feature_values(ex->v[e]->features->feature[k]->value, &t, &len, &data);
            size_t bytes = (size_t)len * fvm_dtype_size(t);
            if (same[c]) {
                if (bytes)
                    memcpy((unsigned char *)fvm_tensor_data(&cols[c].full) + (size_t)e * bytes, data, bytes);
                continue;
            }
            fvm_dims shape = {.rank = 1, .d = {len}};
            if ((s = fvm_tensor_alloc(&cols[c].rows[e], t, &shape, d)) == FVM_OK && bytes)
                memcpy(fvm_tensor_data(&cols[c].rows[e]), data, bytes);
        }
    }
done:
    free(mark);
    free(len0);
    free(same);
    free(col);
    if (s) {
        fvm_dataset_cols_free(cols, nc);
        cols = NULL;
    }
    *out = cols;
    return s;
}

/* One client's parsed examples into columns (setting the schema from them
 * when there is none and they are not empty). */
static fvm_status columns(fvm_dataset *ds, const examples *ex, const char *who, int64_t *n, ds_col **cols, fvm_diag *d)
{
    fvm_status s = FVM_OK;
    *cols = NULL;
    *n = ex->n;
    if (!ds->schema && ex->n > 0)
        s = first_schema(ds, ex, who, d);
    return s ? s : gather(ds, ex, who, cols, d);
}

/* ---- the format ------------------------------------------------------------------- */

static fvm_status tff_decode(fvm_dataset *ds, const char *who, const ds_raw *raw, int64_t *n, ds_col **cols,
                             fvm_diag *d)
{
    examples ex = {0};
    fvm_status s = FVM_OK;
    *cols = NULL;
    for (int64_t e = 0; e < raw->nparts && s == FVM_OK; e++)
        s = parse_example(ds, who, raw->parts[e], raw->lens[e], &ex, d);
    if (s == FVM_OK && raw->count >= 0 && raw->count != ex.n)
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: client_metadata says %lld examples, but there are %lld", who,
                   (long long)raw->count, (long long)ex.n);
    if (s == FVM_OK)
        s = columns(ds, &ex, who, n, cols, d);
    examples_free(&ex);
    return s;
}

/* Reads client i's row of client_metadata, then its rows of examples. */
static fvm_status tff_read(fvm_dataset *ds, int64_t i, char who[DS_WHO], int64_t *n, ds_col **cols, fvm_diag *d)
{
    int64_t count;
    examples ex = {0};
    *cols = NULL;
    fvm_status s = fetch_client(ds, i, &count, who, d);
    if (s == FVM_OK)
        s = read_examples(ds, count, who, &ex, d);
    if (s == FVM_OK)
        s = columns(ds, &ex, who, n, cols, d);
    examples_free(&ex);
    return s;
}

/* Both tables, then checked. */
static fvm_status tff_recognize(fvm_dataset *ds, bool *yes, const char **partial, fvm_diag *d)
{
    bool ex = false, meta = false;
    fvm_status s = fvm_dataset_has_table(ds, "examples", &ex, d);
    if (s == FVM_OK)
        s = fvm_dataset_has_table(ds, "client_metadata", &meta, d);
    if (s)
        return s;
    *yes = ex && meta;
    if (!*yes && (ex || meta))
        *partial = "only one of the two";
    return *yes ? check_tables(ds, d) : FVM_OK;
}

/* Split names must be text a C string holds: an error names the row. */
static fvm_status tff_split_ok(fvm_dataset *ds, sqlite3_stmt *st, const char *name, size_t len, bool *yes, fvm_diag *d)
{
    if (!memchr(name, 0, len) && ds_utf8(name, len))
        return FVM_OK;
    char esc[DS_ESC];
    return ds_err(ds, d, FVM_ERR_FORMAT, "client_metadata row %lld: split name '%s' %s",
                  (long long)sqlite3_column_int64(st, 1), ds_esc(name, len, esc),
                  memchr(name, 0, len) ? "holds a NUL byte" : "is not valid UTF-8");
}

/* The split names of client_metadata, sorted as bytes. */
static fvm_status tff_splits(fvm_dataset *ds, ds_names *out, fvm_diag *d)
{
    const tff *t = ds->impl;
    char sql[256];
    /* the names are text (check_tables); compared as bytes whatever the column's collation */
    snprintf(sql, sizeof sql,
             "SELECT split_name, min(%s) FROM client_metadata GROUP BY split_name COLLATE BINARY "
             "ORDER BY split_name COLLATE BINARY",
             t->rowid);
    return fvm_dataset_list_splits(ds, sql, tff_split_ok, out, d);
}

static fvm_status tff_open(fvm_dataset *ds, int64_t *clients, fvm_diag *d)
{
    tff *t = ds->impl;
    /* TFF lists a split's clients as sorted(DISTINCT client_id): Python
     * sorts str by code point, as BINARY compares UTF-8. An id listed twice
     * is refused: which count would be its own? */
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT min(%s), count(*), client_id FROM client_metadata WHERE split_name = ?1 COLLATE "
             "BINARY GROUP BY client_id COLLATE BINARY ORDER BY client_id COLLATE BINARY",
             t->rowid);
    sqlite3_stmt *st = NULL;
    fvm_status s = prepare(ds, sql, &st, d);
    if (s)
        return s;
    sqlite3_bind_text(st, 1, ds->split, -1, SQLITE_STATIC);
    size_t cap = 0;
    int64_t n = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (sqlite3_column_int64(st, 1) > 1) {
            char who[DS_WHO], esc[DS_ESC];
            s = ds_err(ds, d, FVM_ERR_FORMAT,
                       "client_metadata has %lld rows for client %s in split '%s': a client "
                       "has one",
                       (long long)sqlite3_column_int64(st, 1),
                       ds_who(sqlite3_column_text(st, 2), (size_t)sqlite3_column_bytes(st, 2), -1, who),
                       ds_esc(ds->split, strlen(ds->split), esc));
            break;
        }
        if ((size_t)n == cap) {
            cap = cap ? 2 * cap : 1024;
            int64_t *p = cap <= FVM_MAX_CLIENTS ? realloc(t->rowids, cap * sizeof *p) : NULL;
            if (!p) {
                s = ds_err(ds, d, cap > FVM_MAX_CLIENTS ? FVM_ERR_LIMIT : FVM_ERR_NOMEM,
                           "too many clients for the client index");
                break;
            }
            t->rowids = p;
        }
        t->rowids[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (s)
        return s;
    if (rc != SQLITE_DONE)
        return ds_sql_err(ds, d, rc, "reading client_metadata");
    *clients = n;
    snprintf(sql, sizeof sql, "SELECT client_id, num_examples FROM client_metadata WHERE %s = ?1", t->rowid);
    if ((s = prepare(ds, sql, &t->st_row, d)))
        return s;
    snprintf(sql, sizeof sql,
             "SELECT serialized_example_proto FROM examples WHERE split_name = ?1 COLLATE BINARY "
             "AND client_id = ?2 COLLATE BINARY ORDER BY %s",
             t->ex_rowid);
    return prepare(ds, sql, &t->st_examples, d);
}

/* The first client (in client order) with examples. */
static fvm_status tff_schema_client(fvm_dataset *ds, int64_t *first, fvm_diag *d)
{
    sqlite3_stmt *st = NULL;
    fvm_status s = prepare(ds,
                           "SELECT client_id FROM client_metadata WHERE split_name = ?1 COLLATE BINARY AND "
                           "num_examples > 0 ORDER BY client_id COLLATE BINARY LIMIT 1",
                           &st, d);
    if (s)
        return s;
    sqlite3_bind_text(st, 1, ds->split, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    *first =
        rc == SQLITE_ROW ? fvm_dataset_find(ds, sqlite3_column_text(st, 0), (size_t)sqlite3_column_bytes(st, 0)) : -1;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? FVM_OK : ds_sql_err(ds, d, rc, "reading client_metadata");
}

static void tff_close(fvm_dataset *ds)
{
    tff *t = ds->impl;
    sqlite3_finalize(t->st_row);
    sqlite3_finalize(t->st_examples);
    free(t->rowids);
}

const struct fvm_dataset_format_i fvm_dataset_format_tff = {
    .name = "tff",
    .title = "TFF SQLite",
    .tables = "tables examples and client_metadata (TFF)",
    .default_split = NULL,
    .no_splits = "the TFF dataset has no splits (client_metadata is empty)",
    .size = sizeof(tff),
    .recognize = tff_recognize,
    .splits = tff_splits,
    .open = tff_open,
    .schema_client = tff_schema_client,
    .client = tff_client,
    .find = NULL, /* the clients are sorted by client_id (COLLATE BINARY) */
    .read = tff_read,
    .decode = tff_decode,
    .close = tff_close,
};
