/* dataset_write.c - writing FedJAX SQLite datasets atomically: msgpack ext-1 arrays and ext-4 byte strings, zlib, one row per client. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msgpack.h>
#include <sqlite3.h>
#include <zlib.h>

#include "atomic.h"
#include "dataset_impl.h"

/* One split's table and the columns its first client fixed. */
typedef struct wsplit {
    char *name; /* "default" for federated_data */
    char *table;
    sqlite3_stmt *insert;
    int ncols;
    char **names;
    fvm_dtype *dtypes;
    fvm_dims *shapes; /* per example (no leading axis) */
} wsplit;

struct fvm_dataset_writer {
    char *path, *tmp;
    sqlite3 *db;
    wsplit *splits;
    int nsplits;
    msgpack_sbuffer outer, inner;
    z_stream zs; /* reset for each client (compress2 would allocate its
                     256 KB of state anew for every client) */
    bool zs_ready;
    unsigned char *z;
    size_t zcap;
};

/* numpy's dtype names, as FedJAX's serialization writes them. */
static const char *const numpy_names[FVM_DTYPE_COUNT] = {
    [FVM_DTYPE_BOOL] = "bool",  [FVM_DTYPE_U8] = "uint8",    [FVM_DTYPE_I32] = "int32",   [FVM_DTYPE_I64] = "int64",
    [FVM_DTYPE_U32] = "uint32", [FVM_DTYPE_F32] = "float32", [FVM_DTYPE_F64] = "float64",
};

static fvm_status werr(const fvm_dataset_writer *w, fvm_diag *d, fvm_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static fvm_status werr(const fvm_dataset_writer *w, fvm_diag *d, fvm_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fvm_dataset_verror(w->path, d, code, fmt, ap);
    va_end(ap);
    return code;
}

static fvm_status sql_fail(const fvm_dataset_writer *w, fvm_diag *d, int rc, const char *what)
{
    return werr(w, d, (rc & 0xff) == SQLITE_NOMEM ? FVM_ERR_NOMEM : FVM_ERR_IO, "%s: %s", what,
                w->db ? sqlite3_errmsg(w->db) : sqlite3_errstr(rc));
}

static fvm_status exec(fvm_dataset_writer *w, const char *sql, fvm_diag *d)
{
    int rc = sqlite3_exec(w->db, sql, NULL, NULL, NULL);
    return rc ? sql_fail(w, d, rc, "writing the dataset") : FVM_OK;
}

static void free_split(wsplit *s)
{
    sqlite3_finalize(s->insert);
    for (int k = 0; k < s->ncols; k++)
        free(s->names[k]);
    free(s->names);
    free(s->dtypes);
    free(s->shapes);
    free(s->name);
    free(s->table);
}

static void writer_free(fvm_dataset_writer *w)
{
    for (int i = 0; i < w->nsplits; i++)
        free_split(&w->splits[i]);
    free(w->splits);
    sqlite3_close(w->db);
    msgpack_sbuffer_destroy(&w->outer);
    msgpack_sbuffer_destroy(&w->inner);
    if (w->zs_ready)
        deflateEnd(&w->zs);
    free(w->z);
    free(w->path);
    free(w->tmp);
    free(w);
}

void fvm_dataset_abort(fvm_dataset_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->nsplits; i++) {
        sqlite3_finalize(w->splits[i].insert);
        w->splits[i].insert = NULL;
    }
    sqlite3_close(w->db);
    w->db = NULL;
    if (w->tmp)
        unlink(w->tmp);
    writer_free(w);
}

/* The split's state, creating its table on first use. */
static fvm_status get_split(fvm_dataset_writer *w, const char *split, wsplit **out, fvm_diag *d)
{
    const char *name = split ? split : "default";
    for (int i = 0; i < w->nsplits; i++)
        if (!strcmp(w->splits[i].name, name)) {
            *out = &w->splits[i];
            return FVM_OK;
        }
    char *table = ds_fedjax_table(split, w->path, d);
    if (!table)
        return d && d->n ? d->errs[d->n - 1].code : FVM_ERR_NOMEM;
    wsplit *v = realloc(w->splits, (size_t)(w->nsplits + 1) * sizeof *v);
    if (!v) {
        free(table);
        return werr(w, d, FVM_ERR_NOMEM, "out of memory");
    }
    w->splits = v;
    wsplit *s = &w->splits[w->nsplits];
    memset(s, 0, sizeof *s);
    s->table = table;
    if (!(s->name = strdup(name))) {
        free(table);
        return werr(w, d, FVM_ERR_NOMEM, "out of memory");
    }
    w->nsplits++;
    char sql[256];
    /* FedJAX's table (fedjax/core/sqlite_federated_data.py). */
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (client_id BLOB NOT NULL PRIMARY KEY, "
             "data BLOB NOT NULL, num_examples INTEGER NOT NULL)",
             table);
    fvm_status st = exec(w, sql, d);
    if (st)
        return st;
    snprintf(sql, sizeof sql, "INSERT INTO \"%s\" VALUES (?1, ?2, ?3)", table);
    int rc = sqlite3_prepare_v2(w->db, sql, -1, &s->insert, NULL);
    if (rc)
        return sql_fail(w, d, rc, "writing the dataset");
    *out = s;
    return FVM_OK;
}

fvm_status fvm_dataset_create(const char *path, fvm_dataset_writer **out, fvm_diag *d)
{
    *out = NULL;
    fvm_loc loc = {.file = path};
    fvm_dataset_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return fvm_diag_add(d, FVM_ERR_NOMEM, &loc, "out of memory");
    }
    msgpack_sbuffer_init(&w->outer);
    msgpack_sbuffer_init(&w->inner);
    /* zlib.compress's defaults, as compress2 sets them: level 6
     * (Z_DEFAULT_COMPRESSION), a zlib header, a 32 KB window. */
    if (deflateInit(&w->zs, Z_DEFAULT_COMPRESSION) != Z_OK) {
        writer_free(w);
        return fvm_diag_add(d, FVM_ERR_NOMEM, &loc, "out of memory");
    }
    w->zs_ready = true;
    int fd;
    fvm_status s = fvm_atomic_open(path, &w->tmp, &fd, d);
    if (s) {
        writer_free(w);
        return s;
    }
    close(fd);
    int rc = sqlite3_open_v2(w->tmp, &w->db, SQLITE_OPEN_READWRITE, NULL);
    s = rc ? sql_fail(w, d, rc, "cannot write") : FVM_OK;
    /* No journal: a failed write is discarded as a whole (the file is
     * temporary until fvm_dataset_finish renames it). */
    wsplit *dflt;
    if (s == FVM_OK && !(s = exec(w, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN", d)))
        s = get_split(w, NULL, &dflt, d);
    if (s) {
        fvm_dataset_abort(w);
        return s;
    }
    *out = w;
    return FVM_OK;
}

/* The name of column k of a client: its tensor columns, then its byte-string columns. */
static const char *col_name(int k, int ncols, const char *const *names, const fvm_dataset_bytes *bcols)
{
    return k < ncols ? names[k] : bcols[k - ncols].name;
}

/* Checks a byte-string column: offsets from 0, not decreasing, within the msgpack limits. */
static fvm_status check_bytes(fvm_dataset_writer *w, const wsplit *sp, const fvm_dataset_bytes *b, fvm_diag *d)
{
    if (b->n < 0 || b->n > INT32_MAX || !b->offsets || (b->n > 0 && b->offsets[b->n] > 0 && !b->bytes) ||
        b->offsets[0] != 0)
        return werr(w, d, FVM_ERR_USAGE, "split '%s', column '%s': needs 0 to 2^31-1 byte strings with offsets from 0",
                    sp->name, b->name);
    for (int64_t i = 0; i < b->n; i++)
        if (b->offsets[i + 1] < b->offsets[i] || b->offsets[i + 1] - b->offsets[i] > UINT32_MAX - 64)
            return werr(w, d, FVM_ERR_USAGE, "split '%s', column '%s': byte string %lld has a bad length", sp->name,
                        b->name, (long long)i);
    if ((uint64_t)b->offsets[b->n] + 5 * (uint64_t)b->n > UINT32_MAX - 64)
        return werr(w, d, FVM_ERR_LIMIT, "split '%s', column '%s': more bytes for one client than a msgpack ext holds",
                    sp->name, b->name);
    return FVM_OK;
}

/* Checks one client's columns, and against the split's first client. */
static fvm_status check_client(fvm_dataset_writer *w, wsplit *sp, int ncols, const char *const *names,
                               const fvm_tensor *cols, int nb, const fvm_dataset_bytes *bcols, fvm_diag *d)
{
    if (ncols < 0 || nb < 0 || ncols + nb < 1 || ncols + nb > 100000)
        return werr(w, d, FVM_ERR_USAGE, "split '%s': a client needs 1 to 100000 columns, not %d", sp->name,
                    ncols + nb);
    int64_t rows = ncols ? cols[0].shape.d[0] : bcols[0].n;
    for (int k = 0; k < ncols + nb; k++) {
        const char *nk = col_name(k, ncols, names, bcols);
        size_t len = nk ? strlen(nk) : 0;
        if (!ds_name_ok(nk ? nk : "", len)) /* what the reader takes */
            return werr(w, d, FVM_ERR_USAGE, "split '%s': column %d needs a name of 1 to 255 bytes of UTF-8", sp->name,
                        k);
        for (int j = 0; j < k; j++)
            if (!strcmp(col_name(j, ncols, names, bcols), nk))
                return werr(w, d, FVM_ERR_USAGE, "split '%s': column '%s' given twice", sp->name, nk);
        if (k >= ncols) {
            fvm_status s = check_bytes(w, sp, &bcols[k - ncols], d);
            if (s)
                return s;
            if (bcols[k - ncols].n != rows)
                return werr(w, d, FVM_ERR_USAGE, "split '%s': column '%s' has %lld examples, column '%s' %lld",
                            sp->name, nk, (long long)bcols[k - ncols].n, col_name(0, ncols, names, bcols),
                            (long long)rows);
            continue;
        }
        const fvm_tensor *t = &cols[k];
        fvm_diag tmp = {0};
        bool ok = (unsigned)t->dtype < FVM_DTYPE_COUNT && t->shape.rank >= 1 &&
                  fvm_dims_check_size(&t->shape, t->dtype, &tmp) == FVM_OK && fvm_dims_count(&t->shape) >= 0;
        fvm_diag_clear(&tmp);
        if (!ok || (fvm_tensor_count(t) > 0 && !t->buf))
            return werr(w, d, FVM_ERR_USAGE,
                        "split '%s', column '%s': needs a tensor with a leading example axis "
                        "and known dims within the size limit",
                        sp->name, names[k]);
        if (fvm_tensor_bytes(t) > UINT32_MAX - 64)
            return werr(w, d, FVM_ERR_LIMIT,
                        "split '%s', column '%s': %zu bytes for one client, more than a "
                        "msgpack array holds",
                        sp->name, names[k], fvm_tensor_bytes(t));
        if (t->shape.d[0] != cols[0].shape.d[0])
            return werr(w, d, FVM_ERR_USAGE, "split '%s': column '%s' has %lld examples, column '%s' %lld", sp->name,
                        names[k], (long long)t->shape.d[0], names[0], (long long)cols[0].shape.d[0]);
    }
    /* a byte-string column is u8[-1] per example (a tensor column's dims are all known) */
    const fvm_dims text = {.rank = 1, .d = {-1}};
    if (!sp->names) { /* the first client fixes the columns */
        int n = ncols + nb;
        sp->names = calloc((size_t)n, sizeof *sp->names);
        sp->dtypes = calloc((size_t)n, sizeof *sp->dtypes);
        sp->shapes = calloc((size_t)n, sizeof *sp->shapes);
        if (!sp->names || !sp->dtypes || !sp->shapes)
            return werr(w, d, FVM_ERR_NOMEM, "out of memory");
        for (int k = 0; k < n; k++) {
            if (!(sp->names[k] = strdup(col_name(k, ncols, names, bcols))))
                return werr(w, d, FVM_ERR_NOMEM, "out of memory");
            sp->ncols = k + 1;
            if (k >= ncols) {
                sp->dtypes[k] = FVM_DTYPE_U8;
                sp->shapes[k] = text;
                continue;
            }
            sp->dtypes[k] = cols[k].dtype;
            sp->shapes[k].rank = cols[k].shape.rank - 1;
            for (int j = 1; j < cols[k].shape.rank; j++)
                sp->shapes[k].d[j - 1] = cols[k].shape.d[j];
        }
        return FVM_OK;
    }
    if (ncols + nb != sp->ncols)
        return werr(w, d, FVM_ERR_TYPE, "split '%s': a client with %d columns, but the split's first client has %d",
                    sp->name, ncols + nb, sp->ncols);
    for (int k = 0; k < ncols + nb; k++) {
        const char *nk = col_name(k, ncols, names, bcols);
        int j = 0;
        while (j < sp->ncols && strcmp(sp->names[j], nk))
            j++;
        if (j == sp->ncols)
            return werr(w, d, FVM_ERR_TYPE, "split '%s': column '%s' is not one of the split's first client", sp->name,
                        nk);
        fvm_dims ex = text;
        fvm_dtype dt = FVM_DTYPE_U8;
        if (k < ncols) {
            ex.rank = cols[k].shape.rank - 1;
            for (int a = 1; a < cols[k].shape.rank; a++)
                ex.d[a - 1] = cols[k].shape.d[a];
            dt = cols[k].dtype;
        }
        if (dt != sp->dtypes[j] || !fvm_dims_equal(&ex, &sp->shapes[j])) {
            char got[FVM_DIMS_STR], want[FVM_DIMS_STR];
            fvm_dims_format(&ex, got);
            fvm_dims_format(&sp->shapes[j], want);
            return werr(w, d, FVM_ERR_TYPE,
                        "split '%s', column '%s': examples are %s%s, but the split's first "
                        "client has %s%s",
                        sp->name, nk, fvm_dtype_name(dt), got, fvm_dtype_name(sp->dtypes[j]), want);
        }
    }
    return FVM_OK;
}

/* The client's msgpack map, exactly as FedJAX's msgpack_serialize writes a
 * dict of ndarrays: each value ext 1 holding packb((shape, dtype.name,
 * bytes), use_bin_type=True), each ndarray of bytes objects ext 4 holding
 * packb((shape, [bytes, ...]), use_bin_type=True). */
static int pack_client(fvm_dataset_writer *w, int ncols, const char *const *names, const fvm_tensor *cols, int nb,
                       const fvm_dataset_bytes *bcols)
{
    msgpack_packer outer, inner;
    msgpack_packer_init(&outer, &w->outer, msgpack_sbuffer_write);
    msgpack_packer_init(&inner, &w->inner, msgpack_sbuffer_write);
    msgpack_sbuffer_clear(&w->outer);
    int rc = msgpack_pack_map(&outer, (size_t)ncols + (size_t)nb);
    for (int k = 0; k < ncols && rc == 0; k++) {
        const fvm_tensor *t = &cols[k];
        const char *dt = numpy_names[t->dtype];
        msgpack_sbuffer_clear(&w->inner);
        rc = msgpack_pack_array(&inner, 3) || msgpack_pack_array(&inner, (size_t)t->shape.rank);
        for (int j = 0; j < t->shape.rank && rc == 0; j++)
            rc = msgpack_pack_uint64(&inner, (uint64_t)t->shape.d[j]);
        size_t bytes = fvm_tensor_bytes(t);
        rc = rc || msgpack_pack_str_with_body(&inner, dt, strlen(dt)) ||
             msgpack_pack_bin_with_body(&inner, bytes ? fvm_tensor_data(t) : "", bytes) ||
             msgpack_pack_str_with_body(&outer, names[k], strlen(names[k])) ||
             msgpack_pack_ext_with_body(&outer, w->inner.data, w->inner.size, 1);
    }
    for (int k = 0; k < nb && rc == 0; k++) {
        const fvm_dataset_bytes *b = &bcols[k];
        msgpack_sbuffer_clear(&w->inner);
        rc = msgpack_pack_array(&inner, 2) || msgpack_pack_array(&inner, 1) ||
             msgpack_pack_uint64(&inner, (uint64_t)b->n) || msgpack_pack_array(&inner, (size_t)b->n);
        for (int64_t i = 0; i < b->n && rc == 0; i++) {
            size_t len = (size_t)(b->offsets[i + 1] - b->offsets[i]);
            rc = msgpack_pack_bin_with_body(&inner, len ? (const void *)(b->bytes + b->offsets[i]) : "", len);
        }
        rc = rc || msgpack_pack_str_with_body(&outer, b->name, strlen(b->name)) ||
             msgpack_pack_ext_with_body(&outer, w->inner.data, w->inner.size, 4);
    }
    return rc;
}

fvm_status fvm_dataset_add(fvm_dataset_writer *w, const char *split, const void *id, size_t id_len, int ncols,
                           const char *const *names, const fvm_tensor *cols, fvm_diag *d)
{
    return fvm_dataset_add_bytes(w, split, id, id_len, ncols, names, cols, 0, NULL, d);
}

fvm_status fvm_dataset_add_bytes(fvm_dataset_writer *w, const char *split, const void *id, size_t id_len, int ncols,
                                 const char *const *names, const fvm_tensor *cols, int nb,
                                 const fvm_dataset_bytes *bcols, fvm_diag *d)
{
    wsplit *sp;
    fvm_status s = get_split(w, split, &sp, d);
    if (s || (s = check_client(w, sp, ncols, names, cols, nb, bcols, d)))
        return s;
    if (id_len > 1000000)
        return werr(w, d, FVM_ERR_USAGE, "a client id of %zu bytes (at most 1000000)", id_len);
    if (pack_client(w, ncols, names, cols, nb, bcols))
        return werr(w, d, FVM_ERR_NOMEM, "out of memory serializing a client");
    uLong bound = compressBound((uLong)w->outer.size);
    if (bound > w->zcap) {
        unsigned char *z = realloc(w->z, bound);
        if (!z)
            return werr(w, d, FVM_ERR_NOMEM, "out of memory compressing a client");
        w->z = z;
        w->zcap = bound;
    }
    /* compress2's loop (input and output handed over at most 4 GB at a
     * time) on a stream reset for this client: its bytes, not its mallocs. */
    z_stream *zs = &w->zs;
    const unsigned char *in = (const unsigned char *)w->outer.data;
    uLong in_left = (uLong)w->outer.size, out_left = bound;
    int zrc = deflateReset(zs);
    zs->next_out = w->z;
    zs->avail_out = 0;
    zs->avail_in = 0;
    while (zrc == Z_OK) {
        if (zs->avail_out == 0) {
            zs->avail_out = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
            out_left -= zs->avail_out;
        }
        if (zs->avail_in == 0) {
            zs->next_in = (Bytef *)in;
            zs->avail_in = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
            in += zs->avail_in;
            in_left -= zs->avail_in;
        }
        zrc = deflate(zs, in_left ? Z_NO_FLUSH : Z_FINISH);
    }
    if (zrc != Z_STREAM_END)
        return werr(w, d, FVM_ERR_NOMEM, "zlib could not compress a client");
    uLong zlen = zs->total_out;
    sqlite3_stmt *st = sp->insert;
    sqlite3_reset(st);
    sqlite3_bind_blob64(st, 1, id_len ? id : "", id_len, SQLITE_STATIC);
    sqlite3_bind_blob64(st, 2, w->z, zlen, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ncols ? cols[0].shape.d[0] : bcols[0].n);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc == SQLITE_DONE)
        return FVM_OK;
    if ((rc & 0xff) == SQLITE_CONSTRAINT) {
        char who[DS_WHO];
        return werr(w, d, FVM_ERR_NAME, "split '%s': client id %s given twice", sp->name, ds_who(id, id_len, -1, who));
    }
    return sql_fail(w, d, rc, "writing a client");
}

fvm_status fvm_dataset_finish(fvm_dataset_writer *w, fvm_diag *d)
{
    fvm_status s = exec(w, "COMMIT", d);
    for (int i = 0; i < w->nsplits; i++) {
        sqlite3_finalize(w->splits[i].insert);
        w->splits[i].insert = NULL;
    }
    if (s == FVM_OK) {
        int rc = sqlite3_close(w->db);
        if (rc)
            s = sql_fail(w, d, rc, "closing the dataset");
        else
            w->db = NULL;
    }
    if (s == FVM_OK)
        s = fvm_atomic_commit(w->tmp, w->path, d);
    if (s) {
        fvm_dataset_abort(w);
        return s;
    }
    free(w->tmp);
    w->tmp = NULL;
    writer_free(w);
    return FVM_OK;
}
