/* dataset.c - the dataset reader every format shares: the format table, splits, the schema, one read path, the helpers. */
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

void fvm_dataset_cols_free(ds_col *cols, int n)
{
    for (int k = 0; cols && k < n; k++)
        ds_col_clear(&cols[k]);
    free(cols);
}

/* Length of the valid UTF-8 sequence at p (at most n bytes, n > 0), or 0;
 * *cp gets its code point. */
static size_t utf8_char(const unsigned char *p, size_t n, uint32_t *cp)
{
    size_t len = p[0] < 0x80             ? 1
                 : (p[0] & 0xe0) == 0xc0 ? 2
                 : (p[0] & 0xf0) == 0xe0 ? 3
                 : (p[0] & 0xf8) == 0xf0 ? 4
                                         : 0;
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
    *cp = c;
    return len;
}

bool ds_utf8(const void *s, size_t len)
{
    const unsigned char *p = s;
    uint32_t c;
    for (size_t i = 0, k; i < len; i += k)
        if (!(k = utf8_char(p + i, len - i, &c)))
            return false;
    return true;
}

/* Characters that hide or reorder text on a terminal: C1 controls, the soft
 * hyphen, zero-width characters, line and paragraph separators, bidi
 * controls, word joiners and the byte-order mark. */
static bool hides_text(uint32_t c)
{
    return (c >= 0x80 && c <= 0x9f) || c == 0xad || (c >= 0x200b && c <= 0x200f) || (c >= 0x2028 && c <= 0x202e) ||
           (c >= 0x2060 && c <= 0x206f) || c == 0xfeff;
}

char *fvm_dataset_escape(const void *name, size_t len, char *buf, size_t cap)
{
    const unsigned char *p = name;
    size_t o = 0, i = 0;
    size_t room = cap > 4 ? cap - 4 : 0; /* kept for "..." and the NUL */
    while (i < len) {
        char one[16];
        uint32_t c = 0;
        size_t k = utf8_char(p + i, len - i, &c), m;
        if (k == 0) {
            k = 1;
            m = (size_t)snprintf(one, sizeof one, "\\x%02x", p[i]);
        } else if (c == '\\' || c == '\'' || c == '"') {
            one[0] = '\\';
            one[1] = (char)c;
            m = 2;
        } else if (c == '\n' || c == '\t' || c == '\r') {
            one[0] = '\\';
            one[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
            m = 2;
        } else if (c < 0x20 || c == 0x7f) {
            m = (size_t)snprintf(one, sizeof one, "\\x%02x", (unsigned)c);
        } else if (hides_text(c)) {
            m = (size_t)snprintf(one, sizeof one, "\\u%04x", (unsigned)c);
        } else {
            memcpy(one, p + i, k);
            m = k;
        }
        if (o + m > room)
            break;
        memcpy(buf + o, one, m);
        o += m;
        i += k;
    }
    if (i < len && o + 3 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    if (cap)
        buf[o < cap ? o : cap - 1] = 0;
    return buf;
}

const char *ds_esc(const void *name, size_t len, char buf[DS_ESC])
{
    return fvm_dataset_escape(name, len, buf, DS_ESC);
}

const char *ds_who(const void *id, size_t len, int64_t i, char buf[DS_WHO])
{
    const unsigned char *p = id;
    size_t n = 0;
    if (ds_utf8(id, len)) {
        char text[104];
        n = (size_t)snprintf(buf, DS_WHO, "'%s'", fvm_dataset_escape(id, len, text, sizeof text));
    } else {
        n = (size_t)snprintf(buf, DS_WHO, "0x");
        for (size_t k = 0; k < len && k < 40; k++)
            n += (size_t)snprintf(buf + n, DS_WHO - n, "%02x", p[k]);
        if (len > 40)
            n += (size_t)snprintf(buf + n, DS_WHO - n, "...");
    }
    if (i >= 0)
        snprintf(buf + n, DS_WHO - n, " (index %lld)", (long long)i);
    return buf;
}

void ds_clean(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t len = utf8_char((const unsigned char *)s + i, n - i, &c);
        if (len == 0 || (len == 1 && (unsigned char)s[i] < 0x20)) {
            s[i++] = '?';
            continue;
        }
        i += len;
    }
}

/* Why a name is not usable, or NULL. */
static const char *name_fault(const void *name, size_t len)
{
    return len == 0               ? "is empty"
           : len > DS_MAX_NAME    ? "is longer than 255 bytes"
           : memchr(name, 0, len) ? "holds a NUL byte"
           : !ds_utf8(name, len)  ? "is not valid UTF-8"
                                  : NULL;
}

bool ds_name_ok(const void *name, size_t len)
{
    return !name_fault(name, len);
}

fvm_status ds_check_name(const fvm_dataset *ds, const char *who, const char *what, const void *name, size_t len,
                         fvm_diag *d)
{
    const char *why = name_fault(name, len);
    if (!why)
        return FVM_OK;
    char esc[DS_ESC];
    return ds_err(ds, d, FVM_ERR_FORMAT, "client %s: %s name '%s' %s", who, what, ds_esc(name, len, esc), why);
}

bool ds_dims_bounded(const fvm_dims *shape, fvm_dtype dtype)
{
    uint64_t bytes = fvm_dtype_size(dtype);
    for (int k = 0; k < shape->rank; k++) {
        if (shape->d[k] < 0)
            return false;
        if (shape->d[k] > 0 &&
            (__builtin_mul_overflow(bytes, (uint64_t)shape->d[k], &bytes) || bytes > FVM_MAX_TENSOR_BYTES))
            return false;
    }
    return true;
}

fvm_status fvm_dataset_verror(const char *path, fvm_diag *d, fvm_status code, const char *fmt, va_list ap)
{
    fvm_loc loc = {.file = path};
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    ds_clean(msg);
    fvm_diag_add(d, code, &loc, "%s", msg);
    return code;
}

fvm_status ds_err(const fvm_dataset *ds, fvm_diag *d, fvm_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fvm_dataset_verror(ds->path, d, code, fmt, ap);
    va_end(ap);
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
    if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
        return ds_err(ds, d, FVM_ERR_IO, "%s: the file is locked by another process writing it (%s)", what, msg);
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

/* Checks a decoded column against the schema column (dtype, rank, every known
 * dim); an error names the client and column. */
static fvm_status col_check(const fvm_dataset *ds, const fvm_column *schema, const ds_col *c, const char *who,
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
    char got[FVM_DIMS_STR], want[FVM_DIMS_STR], esc[DS_ESC];
    fvm_dims_format(&shape, got);
    fvm_dims_format(&schema->shape, want);
    return ds_err(ds, d, FVM_ERR_TYPE,
                  "client %s, column '%s': examples are %s%s, but the dataset's schema (from its "
                  "first client) has %s%s",
                  who, ds_esc(schema->name, strlen(schema->name), esc), fvm_dtype_name(dt), got,
                  fvm_dtype_name(schema->dtype), want);
}

/* Names compare as SQLite's BINARY collation does: bytes, then the shorter first. */
static int name_cmp(const char *a, size_t na, const char *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

int ds_name_cmp(const void *a, const void *b)
{
    const ds_name *x = a, *y = b;
    int c = name_cmp(x->name, x->len, y->name, y->len);
    return c ? c : (x->col > y->col) - (x->col < y->col);
}

int ds_column_find(const fvm_dataset *ds, const char *name, size_t len)
{
    int lo = 0, hi = ds->ncols - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = name_cmp(ds->index[mid].name, ds->index[mid].len, name, len);
        if (c == 0)
            return ds->index[mid].col;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int ds_column_near(const fvm_dataset *ds, const char *name, size_t len, int guess)
{
    if (guess >= 0 && guess < ds->ncols && !strncmp(ds->cols[guess].name, name, len) && !ds->cols[guess].name[len])
        return guess;
    return ds_column_find(ds, name, len);
}

int fvm_dataset_column_find(const fvm_dataset *ds, const char *name)
{
    return ds_column_find(ds, name, strlen(name));
}

fvm_status ds_set_schema(fvm_dataset *ds, const char *who, int ncols, const char *const *names, const size_t *name_lens,
                         const ds_col *cols, fvm_diag *d)
{
    if (ncols < 0 || ncols > DS_MAX_COLUMNS)
        return ds_err(ds, d, FVM_ERR_LIMIT, "client %s: %d columns, more than fedvm reads (%d)", who, ncols,
                      DS_MAX_COLUMNS);
    fvm_column *cs = calloc((size_t)(ncols ? ncols : 1), sizeof *cs);
    ds_name *index = calloc((size_t)(ncols ? ncols : 1), sizeof *index);
    fvm_status s = cs && index ? FVM_OK : ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
    int made = 0;
    for (int k = 0; s == FVM_OK && k < ncols; k++) {
        if ((s = ds_check_name(ds, who, "column", names[k], name_lens[k], d)))
            break;
        char *name = malloc(name_lens[k] + 1);
        if (!name) {
            s = ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(name, names[k], name_lens[k]);
        name[name_lens[k]] = 0;
        cs[k].name = name;
        made = k + 1;
        if (cols)
            ds_col_shape(&cols[k], &cs[k].dtype, &cs[k].shape);
        index[k] = (ds_name){name, name_lens[k], k};
    }
    if (s == FVM_OK) {
        qsort(index, (size_t)ncols, sizeof *index, ds_name_cmp);
        for (int k = 1; k < ncols && s == FVM_OK; k++)
            if (!name_cmp(index[k - 1].name, index[k - 1].len, index[k].name, index[k].len)) {
                char esc[DS_ESC];
                s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: column '%s' appears twice", who,
                           ds_esc(index[k].name, index[k].len, esc));
            }
    }
    if (s) {
        for (int k = 0; k < made; k++)
            free((char *)cs[k].name);
        free(cs);
        free(index);
        return s;
    }
    ds->cols = cs;
    ds->index = index;
    ds->ncols = ncols;
    ds->schema = true;
    return FVM_OK;
}

/* Builds the client's sequence from ncols decoded columns in schema order
 * (takes their references and clears them). */
static fvm_status build(const fvm_dataset *ds, int64_t n, ds_col *cols, fvm_value **out, fvm_diag *d)
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

/* ---- the tables ------------------------------------------------------------------ */

int fvm_dataset_names_push(ds_names *s, const char *text, size_t len)
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

static void names_free(ds_names *s)
{
    fvm_dataset_free_splits(s->v, s->n);
    memset(s, 0, sizeof *s);
}

/* The names, escaped, separated by ", " (at most cap bytes). */
static char *names_join(const ds_names *s, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < s->n && o + 1 < cap; i++) {
        char esc[DS_ESC];
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", ds_esc(s->v[i], strlen(s->v[i]), esc));
    }
    return buf;
}

fvm_status fvm_dataset_list_splits(fvm_dataset *ds, const char *sql, fvm_dataset_split_filter keep, ds_names *out,
                                   fvm_diag *d)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(ds->db, sql, -1, &st, NULL);
    if (rc)
        return ds_sql_err(ds, d, rc, "listing the splits");
    fvm_status s = FVM_OK;
    while (s == FVM_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        size_t len = (size_t)sqlite3_column_bytes(st, 0);
        bool yes = true;
        if (!name || (keep && (s = keep(ds, st, name, len, &yes, d))) || !yes)
            continue;
        if (fvm_dataset_names_push(out, name, len))
            s = ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
    }
    sqlite3_finalize(st);
    if (s)
        return s;
    return rc == SQLITE_DONE ? FVM_OK : ds_sql_err(ds, d, rc, "listing the splits");
}

fvm_status fvm_dataset_has_table(fvm_dataset *ds, const char *name, bool *yes, fvm_diag *d)
{
    sqlite3_stmt *st = NULL;
    *yes = false;
    int rc =
        sqlite3_prepare_v2(ds->db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", -1, &st, NULL);
    if (rc)
        return ds_sql_err(ds, d, rc, "reading the tables");
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return ds_sql_err(ds, d, rc, "reading the tables");
    *yes = rc == SQLITE_ROW;
    return FVM_OK;
}

fvm_status ds_check_table(fvm_dataset *ds, const char *table, const char *const *need, int nneed, const char **rowid,
                          fvm_diag *d)
{
    static const char *const aliases[3] = {"rowid", "_rowid_", "oid"};
    bool have[8] = {false}, hidden[3] = {false};
    char sql[160];
    sqlite3_stmt *st = NULL;
    /* table_xinfo lists generated and hidden columns too: any of them hides a rowid name. */
    snprintf(sql, sizeof sql, "PRAGMA table_xinfo(\"%s\")", table);
    int rc = sqlite3_prepare_v2(ds->db, sql, -1, &st, NULL);
    if (rc)
        return ds_sql_err(ds, d, rc, "reading the tables");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        for (int k = 0; name && k < nneed && k < 8; k++)
            have[k] = have[k] || !sqlite3_stricmp(name, need[k]);
        for (int a = 0; name && a < 3; a++)
            hidden[a] = hidden[a] || !sqlite3_stricmp(name, aliases[a]);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return ds_sql_err(ds, d, rc, "reading the tables");
    char missing[160] = "", all[160] = "";
    int nmissing = 0;
    for (int k = 0; k < nneed && k < 8; k++) {
        size_t m = strlen(missing), a = strlen(all);
        snprintf(all + a, sizeof all - a, "%s%s", k == 0 ? "" : k == nneed - 1 ? " and " : ", ", need[k]);
        if (!have[k]) {
            snprintf(missing + m, sizeof missing - m, "%s%s", nmissing ? ", " : " ", need[k]);
            nmissing++;
        }
    }
    if (nmissing)
        return ds_err(ds, d, FVM_ERR_FORMAT, "table %s lacks the column%s%s (fedvm reads %s)", table,
                      nmissing > 1 ? "s" : "", missing, all);
    /* A WITHOUT ROWID table has no rowid at all: index_info lists its primary key. */
    if ((rc = sqlite3_prepare_v2(ds->db, "SELECT count(*) FROM pragma_index_info(?1)", -1, &st, NULL)))
        return ds_sql_err(ds, d, rc, "reading the tables");
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    int64_t pk = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return ds_sql_err(ds, d, rc, "reading the tables");
    if (pk > 0)
        return ds_err(ds, d, FVM_ERR_FORMAT, "table %s is a WITHOUT ROWID table: fedvm addresses rows by their rowid",
                      table);
    for (int a = 0; a < 3; a++)
        if (!hidden[a]) {
            *rowid = aliases[a];
            return FVM_OK;
        }
    return ds_err(ds, d, FVM_ERR_FORMAT,
                  "table %s has columns named rowid, _rowid_ and oid, which hide all the names "
                  "of its row ids: fedvm cannot tell its rows apart",
                  table);
}

/* ---- the formats ------------------------------------------------------------------ */

/* The one list of formats, in the order a file is matched against them. */
static const struct fvm_dataset_format_i *const formats[] = {&fvm_dataset_format_fedjax, &fvm_dataset_format_tff};
enum { NFORMATS = sizeof formats / sizeof formats[0] };

/* Frees the format's state; the handle has no format after. */
static void drop_format(fvm_dataset *ds)
{
    if (ds->fmt && ds->fmt->close)
        ds->fmt->close(ds);
    free(ds->impl);
    ds->impl = NULL;
    ds->fmt = NULL;
}

/* Gives the handle format fmt, with its state zeroed. */
static bool set_format(fvm_dataset *ds, const struct fvm_dataset_format_i *fmt)
{
    drop_format(ds);
    if (!(ds->impl = calloc(1, fmt->size ? fmt->size : 1)))
        return false;
    ds->fmt = fmt;
    return true;
}

/* Which format ds->db holds; an error when none. */
static fvm_status detect(fvm_dataset *ds, fvm_diag *d)
{
    const char *partial = NULL;
    for (int k = 0; k < NFORMATS; k++) {
        if (!set_format(ds, formats[k]))
            return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
        bool yes = false;
        const char *part = NULL;
        fvm_status s = formats[k]->recognize(ds, &yes, &part, d);
        if (s || yes)
            return s;
        partial = part ? part : partial;
    }
    drop_format(ds);
    char all[512];
    size_t o = 0;
    for (int k = 0; k < NFORMATS && o < sizeof all; k++)
        o += (size_t)snprintf(all + o, sizeof all - o, "%s%s", k ? " and no " : "", formats[k]->tables);
    return ds_err(ds, d, FVM_ERR_FORMAT, "not a federated dataset: it has no %s%s%s%s", all, partial ? " (" : "",
                  partial ? partial : "", partial ? ")" : "");
}

fvm_dataset *ds_new(const char *path, const struct fvm_dataset_format_i *fmt)
{
    fvm_dataset *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->path = strdup(path)) || !(ds->split = strdup("default")) || (fmt && !set_format(ds, fmt))) {
        if (ds) {
            free(ds->path);
            free(ds->split);
        }
        free(ds);
        return NULL;
    }
    return ds;
}

/* Opens path read-only and detects its format. */
static fvm_status open_db(const char *path, fvm_dataset **out, fvm_diag *d)
{
    *out = NULL;
    fvm_loc loc = {.file = path};
    struct stat sb;
    if (stat(path, &sb) != 0)
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot open: %s", strerror(errno));
    /* SQLite would wait forever opening a FIFO, and read a device as a file. */
    if (!S_ISREG(sb.st_mode))
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot open: %s, not a regular file",
                            S_ISDIR(sb.st_mode)                          ? "a directory"
                            : S_ISFIFO(sb.st_mode)                       ? "a FIFO"
                            : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                            : S_ISSOCK(sb.st_mode)                       ? "a socket"
                                                                         : "a special file");
    if (sb.st_size == 0)
        return fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "not a federated dataset: the file is empty");
    fvm_dataset *ds = ds_new(path, NULL);
    if (!ds)
        return fvm_diag_add(d, FVM_ERR_NOMEM, &loc, "out of memory");
    free(ds->split);
    ds->split = NULL;
    int rc = sqlite3_open_v2(path, &ds->db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK) {
        /* A file from anywhere: no schema-defined side effects, corrupt pages
         * caught as early as SQLite can (https://sqlite.org/security.html). */
        sqlite3_db_config(ds->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
        sqlite3_db_config(ds->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
        rc = sqlite3_exec(ds->db, "PRAGMA cell_size_check = ON", NULL, NULL, NULL);
    }
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
    ds_names list = {0};
    s = ds->fmt->splits(ds, &list, d);
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

/* ---- reading a client: the one path ------------------------------------------------ */

/* Checks a client's decoded columns against the schema; frees them on error. */
static fvm_status check_cols(const fvm_dataset *ds, const char *who, ds_col *cols, fvm_diag *d)
{
    fvm_status s = FVM_OK;
    for (int k = 0; s == FVM_OK && k < ds->ncols; k++)
        s = col_check(ds, &ds->cols[k], &cols[k], who, d);
    if (s)
        fvm_dataset_cols_free(cols, ds->ncols);
    return s;
}

/* Client i's columns, checked, in schema order (*cols malloc'd), and its
 * number of examples. */
static fvm_status read_cols(fvm_dataset *ds, int64_t i, int64_t *n, ds_col **cols, fvm_diag *d)
{
    char who[DS_WHO] = "";
    *cols = NULL;
    fvm_status s = ds->fmt->read(ds, i, who, n, cols, d);
    return s ? s : check_cols(ds, who, *cols, d);
}

/* The sequence of n examples from checked columns (freed). */
static fvm_status build_seq(fvm_dataset *ds, int64_t n, ds_col *cols, fvm_value **out, fvm_diag *d)
{
    fvm_status s = build(ds, n, cols, out, d);
    free(cols);
    return s;
}

fvm_status fvm_dataset_decode(fvm_dataset *ds, const char *who, const ds_raw *raw, fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    if (!ds->fmt || !ds->fmt->decode)
        return ds_err(ds, d, FVM_ERR_USAGE, "the %s format cannot decode a client from memory",
                      ds->fmt ? ds->fmt->name : "unknown");
    int64_t n = 0;
    ds_col *cols = NULL;
    fvm_status s = ds->fmt->decode(ds, who, raw, &n, &cols, d);
    if (s == FVM_OK)
        s = check_cols(ds, who, cols, d);
    return s ? s : build_seq(ds, n, cols, out, d);
}

/* ---- open, close, queries -------------------------------------------------------- */

/* Chooses the split: a known name, or for NULL the format's default or the
 * only one. The error lists the file's splits. */
static fvm_status choose_split(fvm_dataset *ds, const char *split, fvm_diag *d)
{
    ds_names list = {0};
    fvm_status s = ds->fmt->splits(ds, &list, d);
    if (s) {
        names_free(&list); /* the names listed before the error */
        return s;
    }
    const char *want = split ? split : ds->fmt->default_split;
    if (!want && list.n == 1)
        want = list.v[0];
    for (int i = 0; want && i < list.n; i++)
        if (!strcmp(list.v[i], want)) {
            if (!(ds->split = strdup(want)))
                s = ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
            names_free(&list);
            return s;
        }
    char all[1024], esc[DS_ESC];
    names_join(&list, all, sizeof all);
    if (!want && list.n == 0)
        s = ds_err(ds, d, FVM_ERR_FORMAT, "%s", ds->fmt->no_splits ? ds->fmt->no_splits : "the dataset has no splits");
    else if (!want)
        s = ds_err(ds, d, FVM_ERR_NAME, "the dataset has several splits (%s); choose one", all);
    else
        s = ds_err(ds, d, FVM_ERR_NAME, "no split '%s'; the dataset's splits: %s", ds_esc(want, strlen(want), esc),
                   all);
    names_free(&list);
    return s;
}

/* Reads the schema from the format's first client: no columns when no
 * client has examples. */
static fvm_status read_schema(fvm_dataset *ds, fvm_diag *d)
{
    int64_t first = ds->n > 0 ? 0 : -1, n;
    fvm_status s = ds->fmt->schema_client ? ds->fmt->schema_client(ds, &first, d) : FVM_OK;
    if (s)
        return s;
    if (first < 0) {
        ds->schema = true;
        return FVM_OK;
    }
    ds_col *cols;
    if ((s = read_cols(ds, first, &n, &cols, d)))
        return s;
    fvm_dataset_cols_free(cols, ds->ncols);
    return FVM_OK;
}

fvm_status fvm_dataset_open(const char *path, const char *split, fvm_dataset **out, fvm_diag *d)
{
    fvm_dataset *ds;
    fvm_status s = open_db(path, &ds, d);
    if (s)
        return s;
    s = choose_split(ds, split, d);
    if (s == FVM_OK)
        s = ds->fmt->open(ds, &ds->n, d);
    if (s == FVM_OK)
        s = read_schema(ds, d);
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
    drop_format(ds); /* its statements, before the database closes */
    sqlite3_close(ds->db);
    for (int k = 0; k < ds->ncols; k++)
        free((char *)ds->cols[k].name);
    free(ds->cols);
    free(ds->index);
    free(ds->id);
    free(ds->split);
    free(ds->path);
    free(ds);
}

const char *fvm_dataset_format(const fvm_dataset *ds)
{
    return ds->fmt->name;
}

const char *fvm_dataset_format_title(const fvm_dataset *ds)
{
    return ds->fmt->title;
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
    if (i < 0 || i >= ds->n) {
        char esc[DS_ESC];
        return ds_err(ds, d, FVM_ERR_USAGE, "client index %lld out of range: split '%s' has %lld clients", (long long)i,
                      ds_esc(ds->split, strlen(ds->split), esc), (long long)ds->n);
    }
    return FVM_OK;
}

fvm_status fvm_dataset_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                              fvm_diag *d)
{
    fvm_status s = check_index(ds, i, d);
    if (s == FVM_OK)
        s = ds->fmt->client(ds, i, examples, d);
    if (s)
        return s;
    *id = ds->id;
    *id_len = ds->id_len;
    return FVM_OK;
}

/* Clients sorted by id as bytes: a binary search through the format's client. */
static int64_t find_sorted(fvm_dataset *ds, const void *id, size_t id_len)
{
    int64_t lo = 0, hi = ds->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2, count;
        fvm_diag quiet = {0};
        fvm_status s = ds->fmt->client(ds, mid, &count, &quiet);
        fvm_diag_clear(&quiet);
        if (s)
            return -1;
        int c = name_cmp((const char *)ds->id, ds->id_len, id, id_len);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int64_t fvm_dataset_find(fvm_dataset *ds, const void *id, size_t id_len)
{
    return ds->fmt->find ? ds->fmt->find(ds, id, id_len) : find_sorted(ds, id, id_len);
}

fvm_status fvm_dataset_read(fvm_dataset *ds, int64_t i, fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    int64_t n;
    ds_col *cols;
    fvm_status s = check_index(ds, i, d);
    if (s == FVM_OK)
        s = read_cols(ds, i, &n, &cols, d);
    return s ? s : build_seq(ds, n, cols, out, d);
}
