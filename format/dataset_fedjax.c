/* dataset_fedjax.c - the FedJAX SQLite format: the client index, zlib (libdeflate), msgpack arrays (ext 1) and byte-string arrays (ext 4). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>
#include <msgpack.h>
#include <zlib.h>

#include "dataset_impl.h"

/* An open FedJAX split: the format's state (ds->impl). */
typedef struct fedjax {
    char *table; /* the table of the split */
    const char *rowid; /* the name by which SQL reaches the table's real rowid (ds_check_table) */
    /* Client i's row: rowid0 + i when the rowids are contiguous (rowids
     * NULL), else rowids[i] (table order). */
    int64_t rowid0;
    int64_t *rowids;
    sqlite3_stmt *st_row; /* id, data, count by rowid */
    sqlite3_stmt *st_id; /* id, count by rowid (no data) */
    sqlite3_stmt *st_find; /* rowid by id */
    unsigned char *buf; /* scratch: inflated client data, reused */
    size_t buf_cap;
    struct libdeflate_decompressor *inflater; /* made at the first client */
} fedjax;

/* FedJAX's msgpack extension types (fedjax/core/serialization.py): 1 holds a
 * numeric ndarray as the tuple (shape, dtype name, C-order bytes); 4 an
 * ndarray of Python bytes objects (dtype object) as (shape, flat list of
 * byte strings). */
enum { EXT_NDARRAY = 1, EXT_BYTES_NDARRAY = 4 };

/* The largest inflated client accepted. */
#define MAX_CLIENT_BYTES FVM_MAX_TENSOR_BYTES

/* ---- the index ------------------------------------------------------------------ */

/* The rowid of client i (0 <= i < ds->n; with contiguous rowids, rowid0 + i
 * stays within [min, max] of the table's rowids). */
static int64_t rowid_of(const fedjax *fj, int64_t i)
{
    return fj->rowids ? fj->rowids[i] : (int64_t)((uint64_t)fj->rowid0 + (uint64_t)i);
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

static fvm_status prepare(fvm_dataset *ds, const char *sql, sqlite3_stmt **st, fvm_diag *d)
{
    int rc = sqlite3_prepare_v2(ds->db, sql, -1, st, NULL);
    return rc ? ds_sql_err(ds, d, rc, "reading the client table") : FVM_OK;
}

/* Does an index declared UNIQUE hold client_id alone (FedJAX's primary key)? */
static bool unique_ids(fvm_dataset *ds)
{
    const fedjax *fj = ds->impl;
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT name FROM pragma_index_list('%s') WHERE \"unique\"", fj->table);
    sqlite3_stmt *st = NULL, *cols = NULL;
    if (sqlite3_prepare_v2(ds->db, sql, -1, &st, NULL) ||
        sqlite3_prepare_v2(ds->db, "SELECT name FROM pragma_index_info(?1)", -1, &cols, NULL)) {
        sqlite3_finalize(st);
        return false;
    }
    bool found = false;
    while (!found && sqlite3_step(st) == SQLITE_ROW) {
        sqlite3_reset(cols);
        sqlite3_bind_text(cols, 1, (const char *)sqlite3_column_text(st, 0), -1, SQLITE_TRANSIENT);
        int n = 0;
        bool id = false;
        while (sqlite3_step(cols) == SQLITE_ROW) {
            const char *name = (const char *)sqlite3_column_text(cols, 0);
            n++;
            id = name && !sqlite3_stricmp(name, "client_id");
        }
        found = n == 1 && id;
    }
    sqlite3_finalize(cols);
    sqlite3_finalize(st);
    return found;
}

/* Client ids must tell the clients apart, as bytes: FedJAX's primary key
 * makes ids of one type unique, but the text 'a' and the bytes 'a' would be
 * two clients fvm_dataset_find cannot tell apart. With a unique index on
 * client_id, one indexed look for text ids (they sort before blobs) settles
 * it; otherwise (no index: not a FedJAX table) the ids are grouped. */
static fvm_status check_unique_ids(fvm_dataset *ds, fvm_diag *d)
{
    const fedjax *fj = ds->impl;
    char sql[256];
    sqlite3_stmt *st = NULL;
    fvm_status s;
    int rc;
    if (unique_ids(ds)) {
        snprintf(sql, sizeof sql, "SELECT 1 FROM \"%s\" WHERE client_id >= '' AND client_id < x'' LIMIT 1", fj->table);
        if ((s = prepare(ds, sql, &st, d)))
            return s;
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc == SQLITE_DONE)
            return FVM_OK;
        if (rc != SQLITE_ROW)
            return ds_sql_err(ds, d, rc, "reading the client table");
    }
    snprintf(sql, sizeof sql,
             "SELECT CAST(client_id AS BLOB), count(*) FROM \"%s\" GROUP BY 1 HAVING count(*) > 1 "
             "LIMIT 1",
             fj->table);
    if ((s = prepare(ds, sql, &st, d)))
        return s;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        char who[DS_WHO];
        s = ds_err(ds, d, FVM_ERR_FORMAT,
                   "client id %s appears %lld times in table %s: a client id must name one "
                   "client",
                   ds_who(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), -1, who),
                   (long long)sqlite3_column_int64(st, 1), fj->table);
    } else if (rc != SQLITE_DONE) {
        s = ds_sql_err(ds, d, rc, "reading the client table");
    }
    sqlite3_finalize(st);
    return s;
}

/* Reads the client index: only the number of clients and their rowids, which
 * take no memory when contiguous (as in every file fedvm or FedJAX writes). */
static fvm_status read_index(fvm_dataset *ds, int64_t *clients, fvm_diag *d)
{
    fedjax *fj = ds->impl;
    sqlite3_stmt *st = NULL;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*), min(%s), max(%s) FROM \"%s\"", fj->rowid, fj->rowid, fj->table);
    fvm_status s = prepare(ds, sql, &st, d);
    if (s)
        return s;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        return ds_sql_err(ds, d, rc, "reading the client table");
    }
    int64_t n = sqlite3_column_int64(st, 0), lo = sqlite3_column_int64(st, 1), hi = sqlite3_column_int64(st, 2);
    sqlite3_finalize(st);
    if (n > FVM_MAX_CLIENTS)
        return ds_err(ds, d, FVM_ERR_LIMIT, "%lld clients, more than %d", (long long)n, FVM_MAX_CLIENTS);
    *clients = n;
    fj->rowid0 = lo;
    /* Rowids are distinct: n of them from lo to hi are contiguous when
     * hi - lo = n - 1, computed without overflow (the span of int64 needs
     * 64 unsigned bits). */
    if (n == 0 || (uint64_t)hi - (uint64_t)lo == (uint64_t)(n - 1))
        return FVM_OK;
    fj->rowids = malloc((size_t)n * sizeof *fj->rowids);
    if (!fj->rowids)
        return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory reading the client index");
    snprintf(sql, sizeof sql, "SELECT %s FROM \"%s\" ORDER BY %s", fj->rowid, fj->table, fj->rowid);
    if ((s = prepare(ds, sql, &st, d)))
        return s;
    int64_t i = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && i < n)
        fj->rowids[i++] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if ((rc != SQLITE_DONE && rc != SQLITE_ROW) || i != n)
        return rc != SQLITE_DONE && rc != SQLITE_ROW ? ds_sql_err(ds, d, rc, "reading the client index")
                                                     : ds_err(ds, d, FVM_ERR_IO,
                                                              "the client table changed while "
                                                              "it was read");
    return FVM_OK;
}

/* Runs st (rowid bound) and checks the id and count; leaves the row current. */
static fvm_status fetch_row(fvm_dataset *ds, sqlite3_stmt *st, int64_t i, int id_col, int count_col, int64_t *examples,
                            char who[DS_WHO], fvm_diag *d)
{
    const fedjax *fj = ds->impl;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, rowid_of(fj, i));
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return ds_err(ds, d, FVM_ERR_IO, "client %lld vanished from table %s while the file was open", (long long)i,
                      fj->table);
    if (rc != SQLITE_ROW)
        return ds_sql_err(ds, d, rc, "reading a client");
    int t = sqlite3_column_type(st, id_col);
    const void *id = t == SQLITE_BLOB ? sqlite3_column_blob(st, id_col) : sqlite3_column_text(st, id_col);
    size_t len = (size_t)sqlite3_column_bytes(st, id_col);
    if (t != SQLITE_BLOB && t != SQLITE_TEXT)
        return ds_err(ds, d, FVM_ERR_FORMAT, "client at index %lld (rowid %lld): client_id is %s, not bytes or text",
                      (long long)i, (long long)rowid_of(fj, i), t == SQLITE_NULL ? "NULL" : "a number");
    fvm_status s = ds_keep_id(ds, id, len, d);
    if (s)
        return s;
    ds_who(ds->id, ds->id_len, i, who);
    int64_t count = sqlite3_column_int64(st, count_col);
    if (sqlite3_column_type(st, count_col) != SQLITE_INTEGER || count < 0 || count > DS_MAX_EXAMPLES)
        return ds_err(ds, d, FVM_ERR_FORMAT, "client %s: num_examples is not an integer from 0 to %lld", who,
                      (long long)DS_MAX_EXAMPLES);
    *examples = count;
    return FVM_OK;
}

static fvm_status fedjax_client(fvm_dataset *ds, int64_t i, int64_t *examples, fvm_diag *d)
{
    fedjax *fj = ds->impl;
    char who[DS_WHO];
    fvm_status s = fetch_row(ds, fj->st_id, i, 0, 1, examples, who, d);
    sqlite3_reset(fj->st_id);
    return s;
}

/* An indexed lookup: the id as a blob, then as text. */
static int64_t fedjax_find(fvm_dataset *ds, const void *id, size_t id_len)
{
    fedjax *fj = ds->impl;
    if (id_len > INT_MAX)
        return -1;
    bool found = false;
    int64_t rowid = 0;
    /* FedJAX's ids are blobs; some writers store text (ids are unique as bytes: check_unique_ids). */
    for (int pass = 0; pass < 2 && !found; pass++) {
        sqlite3_reset(fj->st_find);
        if (pass == 0)
            sqlite3_bind_blob(fj->st_find, 1, id_len ? id : "", (int)id_len, SQLITE_TRANSIENT);
        else
            sqlite3_bind_text(fj->st_find, 1, id_len ? id : "", (int)id_len, SQLITE_TRANSIENT);
        if (sqlite3_step(fj->st_find) == SQLITE_ROW) {
            rowid = sqlite3_column_int64(fj->st_find, 0);
            found = true;
        }
    }
    sqlite3_reset(fj->st_find);
    if (!found)
        return -1;
    if (!fj->rowids) { /* rowid0 <= rowid <= rowid0 + n - 1, without overflow */
        uint64_t off = (uint64_t)rowid - (uint64_t)fj->rowid0;
        return rowid >= fj->rowid0 && off < (uint64_t)ds->n ? (int64_t)off : -1;
    }
    int64_t lo = 0, hi = ds->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (fj->rowids[mid] == rowid)
            return mid;
        if (fj->rowids[mid] < rowid)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* ---- decoding --------------------------------------------------------------------- */

/* Grows the scratch buffer to at least 'want' bytes (doubling), up to the client limit. */
static fvm_status grow_buf(fvm_dataset *ds, size_t want, const char *who, fvm_diag *d)
{
    fedjax *fj = ds->impl;
    if (fj->buf_cap >= want)
        return FVM_OK;
    if (fj->buf_cap >= MAX_CLIENT_BYTES)
        return ds_err(ds, d, FVM_ERR_LIMIT, "client %s: data inflates to more than %llu bytes", who,
                      (unsigned long long)MAX_CLIENT_BYTES);
    size_t cap = fj->buf_cap && 2 * fj->buf_cap > want ? 2 * fj->buf_cap : want;
    if (cap > MAX_CLIENT_BYTES) /* room for exactly the limit: a client that needs more fails there */
        cap = MAX_CLIENT_BYTES;
    unsigned char *p = realloc(fj->buf, cap);
    if (!p)
        return ds_err(ds, d, FVM_ERR_NOMEM, "client %s: out of memory inflating its data", who);
    fj->buf = p;
    fj->buf_cap = cap;
    return FVM_OK;
}

/* Inflates a zlib stream into the scratch buffer with zlib, a piece at a time: what
 * tells a truncated stream from a corrupt one, when libdeflate refused it.
 * Bytes after the end of the stream are ignored, as zlib.decompress does. */
static fvm_status inflate_stream(fvm_dataset *ds, const void *src, size_t len, size_t *out_len, const char *who,
                                 fvm_diag *d)
{
    fedjax *fj = ds->impl;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit(&zs) != Z_OK)
        return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory starting zlib");
    zs.next_in = (Bytef *)(uintptr_t)src;
    size_t total = 0, left = len;
    fvm_status s = FVM_OK;
    for (;;) {
        if (total == fj->buf_cap && (s = grow_buf(ds, total + 1, who, d)))
            break;
        size_t room = fj->buf_cap - total;
        zs.next_out = fj->buf + total;
        zs.avail_out = room > UINT32_MAX ? UINT32_MAX : (uInt)room;
        uInt in = left > UINT32_MAX ? UINT32_MAX : (uInt)left;
        zs.avail_in = in;
        uInt out_before = zs.avail_out;
        int rc = inflate(&zs, Z_NO_FLUSH);
        total += out_before - zs.avail_out;
        left -= in - zs.avail_in;
        if (rc == Z_STREAM_END)
            break;
        if (rc == Z_OK || (rc == Z_BUF_ERROR && zs.avail_out == 0))
            continue;
        if (rc == Z_BUF_ERROR && left == 0) {
            s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: the zlib data is truncated", who);
            break;
        }
        if (rc == Z_MEM_ERROR) {
            s = ds_err(ds, d, FVM_ERR_NOMEM, "client %s: out of memory inflating its data", who);
            break;
        }
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: the data is not valid zlib (%s)", who,
                   zs.msg ? zs.msg : "corrupt stream");
        break;
    }
    inflateEnd(&zs);
    *out_len = total;
    return s;
}

/* Inflates a zlib stream into the scratch buffer (grown as needed and kept for the next
 * client). libdeflate inflates a whole stream at once, twice as fast as
 * zlib, into a buffer that must hold it all: a stream that does not fit is
 * inflated again into twice the room. A stream libdeflate refuses goes
 * through zlib, whose errors say what is wrong. Bytes after the end of the
 * stream are ignored, as zlib.decompress does. */
static fvm_status inflate_blob(fvm_dataset *ds, const void *src, size_t len, size_t *out_len, const char *who,
                               fvm_diag *d)
{
    fedjax *fj = ds->impl;
    if (!fj->inflater && !(fj->inflater = libdeflate_alloc_decompressor()))
        return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory starting the decompressor");
    fvm_status s = grow_buf(ds, len < 16384 ? 65536 : 4 * len, who, d);
    for (;;) {
        if (s)
            return s;
        size_t used = 0;
        enum libdeflate_result r =
            libdeflate_zlib_decompress_ex(fj->inflater, src, len, fj->buf, fj->buf_cap, &used, out_len);
        if (r == LIBDEFLATE_SUCCESS)
            return FVM_OK;
        if (r != LIBDEFLATE_INSUFFICIENT_SPACE)
            return inflate_stream(ds, src, len, out_len, who, d);
        s = grow_buf(ds, fj->buf_cap + 1, who, d);
    }
}

static uint64_t be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n; k++)
        v = v << 8 | p[k];
    return v;
}

/* msgpack-c reserves the slots of an array or map as soon as it reads its
 * header, so a corrupt count (up to 2^32) would ask for tens of gigabytes
 * before running out of data. This walk over the headers checks first that
 * every declared element could still fit in the bytes that remain (each takes
 * at least one) and that exactly one object fills the buffer; the values
 * themselves are then left to msgpack-c. */
static bool msgpack_bounded(const unsigned char *p, size_t len)
{
    size_t pos = 0;
    uint64_t pending = 1;
    while (pending) {
        if (pos >= len)
            return false;
        unsigned t = p[pos++];
        pending--;
        uint64_t skip = 0, items = 0;
        int hdr = 0; /* bytes of a big-endian length or count after the tag */
        bool count = false, ext = false;
        if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3)
            ;
        else if ((t & 0xf0) == 0x80)
            items = 2 * (t & 0x0f);
        else if ((t & 0xf0) == 0x90)
            items = t & 0x0f;
        else if ((t & 0xe0) == 0xa0)
            skip = t & 0x1f;
        else if (t >= 0xc4 && t <= 0xc6)
            hdr = 1 << (t - 0xc4); /* bin 8/16/32 */
        else if (t >= 0xc7 && t <= 0xc9)
            hdr = 1 << (t - 0xc7), ext = true; /* ext 8/16/32 */
        else if (t == 0xca || t == 0xcb)
            skip = t == 0xca ? 4 : 8;
        else if (t >= 0xcc && t <= 0xd3)
            skip = (uint64_t)1 << ((t - 0xcc) & 3); /* (u)int 8..64 */
        else if (t >= 0xd4 && t <= 0xd8)
            skip = 1 + ((uint64_t)1 << (t - 0xd4)); /* fixext: type + 1..16 bytes */
        else if (t >= 0xd9 && t <= 0xdb)
            hdr = 1 << (t - 0xd9); /* str 8/16/32 */
        else if (t == 0xdc || t == 0xdd)
            hdr = t == 0xdc ? 2 : 4, count = true;
        else if (t == 0xde || t == 0xdf)
            hdr = t == 0xde ? 2 : 4, count = true, items = 1; /* marks a map */
        else
            return false; /* 0xc1, never used */
        if (hdr) {
            if ((size_t)hdr > len - pos)
                return false;
            uint64_t v = be(p + pos, hdr);
            pos += (size_t)hdr;
            if (count)
                items = items ? 2 * v : v;
            else
                skip = v + (ext ? 1 : 0);
        }
        if (skip > len - pos)
            return false;
        pos += (size_t)skip;
        pending += items;
        if (pending > len - pos)
            return false;
    }
    return pos == len;
}

/* Unpacks exactly one msgpack object filling [p, p+len). */
static bool unpack(msgpack_unpacked *u, const void *p, size_t len)
{
    if (!msgpack_bounded(p, len))
        return false;
    size_t off = 0;
    return msgpack_unpack_next(u, p, len, &off) == MSGPACK_UNPACK_SUCCESS && off == len;
}

static bool is_bytes(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_STR || o->type == MSGPACK_OBJECT_BIN;
}

/* STR and BIN share one layout in msgpack-c's union. */
static const char *bytes_ptr(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_STR ? o->via.str.ptr : o->via.bin.ptr;
}
static size_t bytes_len(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_STR ? o->via.str.size : o->via.bin.size;
}

/* A FedJAX dtype name: numpy's dtype.name. Fixed-width byte strings (numpy
 * 'S<n>', named "bytes<8n>") give u8 and *width = n. */
static bool parse_dtype(const char *s, size_t len, fvm_dtype *dt, int64_t *width)
{
    static const struct {
        const char *name;
        fvm_dtype dt;
    } map[] = {{"bool", FVM_DTYPE_BOOL},  {"uint8", FVM_DTYPE_U8},   {"int32", FVM_DTYPE_I32},
               {"int64", FVM_DTYPE_I64},  {"uint32", FVM_DTYPE_U32}, {"float32", FVM_DTYPE_F32},
               {"float64", FVM_DTYPE_F64}};
    *width = 0;
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
        if (len == strlen(map[k].name) && !memcmp(s, map[k].name, len)) {
            *dt = map[k].dt;
            return true;
        }
    if (len > 5 && len < 16 && !memcmp(s, "bytes", 5)) {
        int64_t bits = 0;
        for (size_t k = 5; k < len; k++) {
            if (s[k] < '0' || s[k] > '9')
                return false;
            bits = bits * 10 + (s[k] - '0');
        }
        if (bits < 8 || bits % 8 || s[5] == '0')
            return false;
        *dt = FVM_DTYPE_U8;
        *width = bits / 8;
        return true;
    }
    return false;
}

/* The shape array of an ndarray tuple. */
static bool parse_shape(const msgpack_object *o, int extra, fvm_dims *shape)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 1 || o->via.array.size + (unsigned)extra > FVM_MAX_RANK)
        return false;
    shape->rank = (int)o->via.array.size;
    for (int k = 0; k < shape->rank; k++) {
        const msgpack_object *e = &o->via.array.ptr[k];
        if (e->type != MSGPACK_OBJECT_POSITIVE_INTEGER || e->via.u64 > (uint64_t)INT64_MAX)
            return false;
        shape->d[k] = (int64_t)e->via.u64;
    }
    return true;
}

/* What errors about one column name: the dataset, the client, the column's
 * name as in the file (escaped when printed). */
typedef struct colctx {
    fvm_dataset *ds;
    const char *who;
    const char *name;
    size_t name_len;
    fvm_diag *d;
} colctx;

static fvm_status col_err(const colctx *c, fvm_status code, const char *msg)
{
    char esc[DS_ESC];
    return ds_err(c->ds, c->d, code, "client %s, column '%s': %s", c->who, ds_esc(c->name, c->name_len, esc), msg);
}

/* Ext 1: (shape, dtype name, bytes) into one tensor. */
static fvm_status decode_ndarray(const colctx *c, const msgpack_object_ext *ext, ds_col *out, bool *strings)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    fvm_status s = FVM_OK;
    char buf[FVM_DIMS_STR + 200];
    if (!unpack(&u, ext->ptr, ext->size) || u.data.type != MSGPACK_OBJECT_ARRAY || u.data.via.array.size != 3) {
        s = col_err(c, FVM_ERR_FORMAT, "the array is not a msgpack tuple (shape, dtype, bytes)");
        goto done;
    }
    const msgpack_object *f = u.data.via.array.ptr;
    fvm_dtype dt;
    int64_t width;
    fvm_dims shape;
    if (!is_bytes(&f[1])) {
        s = col_err(c, FVM_ERR_FORMAT, "the dtype of the array is not a string");
        goto done;
    }
    if (!parse_dtype(bytes_ptr(&f[1]), bytes_len(&f[1]), &dt, &width)) {
        snprintf(buf, sizeof buf,
                 "unsupported dtype '%.*s' (fedvm reads bool, uint8, int32, int64, uint32, float32, "
                 "float64 and fixed-width byte strings)",
                 (int)(bytes_len(&f[1]) < 64 ? bytes_len(&f[1]) : 64), bytes_ptr(&f[1]));
        s = col_err(c, FVM_ERR_TYPE, buf);
        goto done;
    }
    if (!parse_shape(&f[0], width ? 1 : 0, &shape) || !is_bytes(&f[2])) {
        s = col_err(c, FVM_ERR_FORMAT,
                    "the array's shape is not a list of 1 to 8 non-negative integers, or its "
                    "data is not bytes");
        goto done;
    }
    if (width)
        shape.d[shape.rank++] = width;
    /* Every dim bounded, even beside a zero one: a row of an empty array of
     * shape [3, 2^63-1, 0] still has 2^63-1 elements to count or print. */
    if (!ds_dims_bounded(&shape, dt)) {
        char dims[FVM_DIMS_STR];
        fvm_dims_format(&shape, dims);
        snprintf(buf, sizeof buf,
                 "an array of %s%s is larger than fedvm's limit of %llu bytes (counting its "
                 "non-zero dims)",
                 fvm_dtype_name(dt), dims, (unsigned long long)FVM_MAX_TENSOR_BYTES);
        s = col_err(c, FVM_ERR_LIMIT, buf);
        goto done;
    }
    size_t want = (size_t)fvm_dims_count(&shape) * fvm_dtype_size(dt);
    if (bytes_len(&f[2]) != want) {
        char dims[FVM_DIMS_STR];
        fvm_dims_format(&shape, dims);
        snprintf(buf, sizeof buf, "shape %s of %.*s needs %zu bytes, but the array holds %zu", dims,
                 (int)bytes_len(&f[1]), bytes_ptr(&f[1]), want, bytes_len(&f[2]));
        s = col_err(c, FVM_ERR_FORMAT, buf);
        goto done;
    }
    if ((s = fvm_tensor_alloc(&out->full, dt, &shape, c->d)))
        goto done;
    unsigned char *p = fvm_tensor_data(&out->full);
    if (want)
        memcpy(p, bytes_ptr(&f[2]), want);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    /* FedJAX writes numpy's native (little-endian) bytes. */
    size_t es = fvm_dtype_size(dt);
    for (size_t i = 0; es > 1 && i < want; i += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            unsigned char t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
#endif
    if (dt == FVM_DTYPE_BOOL)
        for (size_t i = 0; i < want; i++)
            p[i] = p[i] != 0;
    *strings = width != 0;
done:
    msgpack_unpacked_destroy(&u);
    return s;
}

/* Ext 4: (shape [n], list of n byte strings): u8[L] per example; one tensor
 * when every L is the same. */
static fvm_status decode_bytes_ndarray(const colctx *c, const msgpack_object_ext *ext, ds_col *out)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    fvm_status s = FVM_OK;
    fvm_dims shape;
    if (!unpack(&u, ext->ptr, ext->size) || u.data.type != MSGPACK_OBJECT_ARRAY || u.data.via.array.size != 2 ||
        !parse_shape(&u.data.via.array.ptr[0], 1, &shape) || u.data.via.array.ptr[1].type != MSGPACK_OBJECT_ARRAY) {
        s = col_err(c, FVM_ERR_FORMAT, "the byte-string array is not a msgpack tuple (shape, list of bytes)");
        goto done;
    }
    const msgpack_object_array *list = &u.data.via.array.ptr[1].via.array;
    if (shape.rank != 1) {
        s = col_err(c, FVM_ERR_TYPE, "an array of byte strings must have one axis (the examples)");
        goto done;
    }
    if ((uint64_t)shape.d[0] != list->size) {
        s = col_err(c, FVM_ERR_FORMAT, "the byte-string array's shape and its list differ in length");
        goto done;
    }
    int64_t n = shape.d[0];
    bool same = true;
    for (int64_t i = 0; i < n; i++) {
        if (!is_bytes(&list->ptr[i])) {
            s = col_err(c, FVM_ERR_FORMAT, "an element of the byte-string array is not bytes");
            goto done;
        }
        same = same && bytes_len(&list->ptr[i]) == bytes_len(&list->ptr[0]);
    }
    if (same) {
        fvm_dims full = {.rank = 2, .d = {n, n ? (int64_t)bytes_len(&list->ptr[0]) : 0}};
        if ((s = fvm_tensor_alloc(&out->full, FVM_DTYPE_U8, &full, c->d)))
            goto done;
        for (int64_t i = 0; i < n; i++)
            memcpy((unsigned char *)fvm_tensor_data(&out->full) + (size_t)(i * full.d[1]), bytes_ptr(&list->ptr[i]),
                   (size_t)full.d[1]);
        goto done;
    }
    if (!(out->rows = calloc((size_t)n, sizeof *out->rows))) {
        s = col_err(c, FVM_ERR_NOMEM, "out of memory");
        goto done;
    }
    out->nrows = n;
    for (int64_t i = 0; i < n; i++) {
        fvm_dims one = {.rank = 1, .d = {(int64_t)bytes_len(&list->ptr[i])}};
        if ((s = fvm_tensor_alloc(&out->rows[i], FVM_DTYPE_U8, &one, c->d)))
            goto done;
        if (one.d[0])
            memcpy(fvm_tensor_data(&out->rows[i]), bytes_ptr(&list->ptr[i]), (size_t)one.d[0]);
    }
done:
    msgpack_unpacked_destroy(&u);
    return s;
}

static int64_t col_rows(const ds_col *c)
{
    return c->rows ? c->nrows : c->full.shape.d[0];
}

/* Decodes the msgpack map of columns in the scratch buffer's [0, len) into cols (schema
 * order; with no schema yet, sets it from this client in the file's column
 * order). *n: the examples the columns must have, or -1 to take them from
 * the first column; gets the examples. */
static fvm_status decode_map(fvm_dataset *ds, const char *who, size_t len, int64_t *n, ds_col **out, fvm_diag *d)
{
    *out = NULL;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    fvm_status s = FVM_OK;
    ds_col *cols = NULL;
    const char **names = NULL;
    size_t *name_lens = NULL;
    bool *strings = NULL;
    int ncols = 0;
    if (!unpack(&u, (const char *)((fedjax *)ds->impl)->buf, len) || u.data.type != MSGPACK_OBJECT_MAP) {
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: the data is not a msgpack map of columns", who);
        goto done;
    }
    const msgpack_object_map *map = &u.data.via.map;
    if (map->size == 0 || map->size > DS_MAX_COLUMNS) {
        s = ds_err(ds, d, map->size ? FVM_ERR_LIMIT : FVM_ERR_FORMAT, "client %s: %u columns (fedvm reads 1 to %d)",
                   who, map->size, DS_MAX_COLUMNS);
        goto done;
    }
    bool first = !ds->schema;
    ncols = first ? (int)map->size : ds->ncols;
    cols = calloc((size_t)(ncols ? ncols : 1), sizeof *cols);
    names = calloc((size_t)(ncols ? ncols : 1), sizeof *names);
    name_lens = calloc((size_t)(ncols ? ncols : 1), sizeof *name_lens);
    strings = calloc((size_t)(ncols ? ncols : 1), sizeof *strings);
    if (!cols || !names || !name_lens || !strings) {
        s = ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t rows = *n;
    for (uint32_t k = 0; k < map->size && s == FVM_OK; k++) {
        const msgpack_object *key = &map->ptr[k].key, *val = &map->ptr[k].val;
        /* FedJAX's column names are Python str, packed as msgpack str. */
        if (key->type != MSGPACK_OBJECT_STR) {
            s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: the name of column %u is not a msgpack string", who, k);
            break;
        }
        const char *name = key->via.str.ptr;
        size_t nlen = key->via.str.size;
        if ((s = ds_check_name(ds, who, "column", name, nlen, d)))
            break;
        colctx c = {ds, who, name, nlen, d};
        int slot = (int)k;
        if (!first && (slot = ds_column_near(ds, name, nlen, (int)k)) < 0) {
            s = col_err(&c, FVM_ERR_TYPE, "the dataset's schema (from its first client) has no such column");
            break;
        }
        if (names[slot]) { /* with a schema; the first client's twice are found by ds_set_schema */
            s = col_err(&c, FVM_ERR_FORMAT, "the column appears twice");
            break;
        }
        names[slot] = name;
        name_lens[slot] = nlen;
        if (val->type != MSGPACK_OBJECT_EXT)
            s = col_err(&c, FVM_ERR_FORMAT, "the value is not an array (a msgpack ext)");
        else if (val->via.ext.type == EXT_NDARRAY)
            s = decode_ndarray(&c, &val->via.ext, &cols[slot], &strings[slot]);
        else if (val->via.ext.type == EXT_BYTES_NDARRAY) {
            s = decode_bytes_ndarray(&c, &val->via.ext, &cols[slot]);
            strings[slot] = true;
        } else {
            char msg[120];
            snprintf(msg, sizeof msg, "msgpack ext type %d, expected 1 (an array) or 4 (an array of byte strings)",
                     val->via.ext.type);
            s = col_err(&c, FVM_ERR_FORMAT, msg);
        }
        if (s == FVM_OK && rows < 0)
            rows = col_rows(&cols[slot]);
        if (s == FVM_OK && col_rows(&cols[slot]) != rows) {
            char msg[160];
            snprintf(msg, sizeof msg, "has %lld examples, but %s %lld", (long long)col_rows(&cols[slot]),
                     *n >= 0 ? "num_examples is" : "the client's first column has", (long long)rows);
            s = col_err(&c, FVM_ERR_FORMAT, msg);
        }
    }
    for (int k = 0; s == FVM_OK && !first && k < ncols; k++)
        if (!names[k]) {
            char esc[DS_ESC];
            s = ds_err(ds, d, FVM_ERR_TYPE,
                       "client %s lacks column '%s' of the dataset's schema (from its first "
                       "client)",
                       who, ds_esc(ds->cols[k].name, strlen(ds->cols[k].name), esc));
        }
    if (s == FVM_OK && first) {
        s = ds_set_schema(ds, who, ncols, names, name_lens, cols, d);
        for (int k = 0; s == FVM_OK && k < ncols; k++)
            if (strings[k]) /* byte strings differ in length between clients */
                ds->cols[k].shape.d[ds->cols[k].shape.rank - 1] = -1;
    }
    *n = rows;
done:
    msgpack_unpacked_destroy(&u);
    free(names);
    free(name_lens);
    free(strings);
    if (s) {
        fvm_dataset_cols_free(cols, ncols);
        cols = NULL;
    }
    *out = cols;
    return s;
}

/* Inflates and decodes one client's blob into columns; *n as for decode_map. */
static fvm_status decode_blob(fvm_dataset *ds, const char *who, const void *blob, size_t len, int64_t *n, ds_col **out,
                              fvm_diag *d)
{
    size_t size = 0;
    *out = NULL;
    fvm_status s = inflate_blob(ds, blob, len, &size, who, d);
    return s ? s : decode_map(ds, who, size, n, out, d);
}

/* ---- the format ------------------------------------------------------------------- */

static fvm_status fedjax_decode(fvm_dataset *ds, const char *who, const ds_raw *raw, int64_t *n, ds_col **cols,
                                fvm_diag *d)
{
    *cols = NULL;
    if (raw->nparts != 1)
        return ds_err(ds, d, FVM_ERR_USAGE, "client %s: a FedJAX client is one data blob, not %lld", who,
                      (long long)raw->nparts);
    *n = raw->count < 0 ? -1 : raw->count;
    return decode_blob(ds, who, raw->parts[0], raw->lens[0], n, cols, d);
}

/* Reads client i's row and decodes its data blob. */
static fvm_status fedjax_read(fvm_dataset *ds, int64_t i, char who[DS_WHO], int64_t *n, ds_col **cols, fvm_diag *d)
{
    fedjax *fj = ds->impl;
    fvm_status s = fetch_row(ds, fj->st_row, i, 0, 2, n, who, d);
    if (s == FVM_OK && sqlite3_column_type(fj->st_row, 1) != SQLITE_BLOB)
        s = ds_err(ds, d, FVM_ERR_FORMAT, "client %s: data is not a blob", who);
    if (s == FVM_OK && sqlite3_column_bytes(fj->st_row, 1) == 0)
        s = ds_err(ds, d, FVM_ERR_IO,
                   "client %s is not in this copy of the dataset (its data is empty: the copy holds other clients' "
                   "examples)",
                   who);
    if (s == FVM_OK) /* the blob is valid while the row is current */
        s = decode_blob(ds, who, sqlite3_column_blob(fj->st_row, 1), (size_t)sqlite3_column_bytes(fj->st_row, 1), n,
                        cols, d);
    sqlite3_reset(fj->st_row);
    return s;
}

/* The first client whose data is there: a copy of the dataset for one host
 * (DATASETS.md) leaves the data of other hosts' clients empty. With none,
 * client 0 (whose reading then says what is wrong). */
static fvm_status fedjax_schema_client(fvm_dataset *ds, int64_t *first, fvm_diag *d)
{
    fedjax *fj = ds->impl;
    sqlite3_stmt *st = NULL;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM \"%s\" WHERE length(data) > 0 ORDER BY %s LIMIT 1", fj->rowid, fj->table,
             fj->rowid);
    fvm_status s = prepare(ds, sql, &st, d);
    if (s)
        return s;
    int rc = sqlite3_step(st);
    *first = ds->n > 0 ? 0 : -1;
    if (rc == SQLITE_ROW) {
        int64_t rowid = sqlite3_column_int64(st, 0), lo = 0, hi = ds->n;
        if (!fj->rowids) {
            *first = (int64_t)((uint64_t)rowid - (uint64_t)fj->rowid0);
        } else {
            while (lo < hi) { /* rowids ascend */
                int64_t mid = lo + (hi - lo) / 2;
                if (fj->rowids[mid] < rowid)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            *first = lo < ds->n && fj->rowids[lo] == rowid ? lo : -1;
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? FVM_OK : ds_sql_err(ds, d, rc, "reading the client table");
}

static fvm_status fedjax_recognize(fvm_dataset *ds, bool *yes, const char **partial, fvm_diag *d)
{
    return fvm_dataset_has_table(ds, "federated_data", yes, d);
}

/* Only the tables a split name can open. */
static fvm_status fedjax_split_ok(fvm_dataset *ds, sqlite3_stmt *st, const char *name, size_t len, bool *yes,
                                  fvm_diag *d)
{
    char *table = strcmp(name, "default") ? ds_fedjax_table(name, ds->path, NULL) : NULL;
    free(table);
    *yes = table != NULL;
    return FVM_OK;
}

/* "default" first, then the splits of the other tables, by name. */
static fvm_status fedjax_splits(fvm_dataset *ds, ds_names *out, fvm_diag *d)
{
    if (fvm_dataset_names_push(out, "default", 7))
        return ds_err(ds, d, FVM_ERR_NOMEM, "out of memory");
    return fvm_dataset_list_splits(ds,
                                   "SELECT substr(name, 16) FROM sqlite_master WHERE type = 'table' AND name LIKE "
                                   "'federated\\_data\\_%' ESCAPE '\\' ORDER BY name",
                                   fedjax_split_ok, out, d);
}

static fvm_status fedjax_open(fvm_dataset *ds, int64_t *clients, fvm_diag *d)
{
    static const char *const need[3] = {"client_id", "data", "num_examples"};
    fedjax *fj = ds->impl;
    if (!(fj->table = ds_fedjax_table(ds->split, ds->path, d)))
        return d && d->n ? d->errs[d->n - 1].code : FVM_ERR_NOMEM;
    bool have;
    fvm_status s = fvm_dataset_has_table(ds, fj->table, &have, d);
    if (s)
        return s;
    if (!have)
        return ds_err(ds, d, FVM_ERR_NAME, "no table %s for split '%s'", fj->table, ds->split);
    if ((s = ds_check_table(ds, fj->table, need, 3, &fj->rowid, d)) || (s = read_index(ds, clients, d)) ||
        (s = check_unique_ids(ds, d)))
        return s;
    const char *const sql[3] = {"SELECT client_id, data, num_examples FROM \"%s\" WHERE %s = ?1",
                                "SELECT client_id, num_examples FROM \"%s\" WHERE %s = ?1",
                                "SELECT %s FROM \"%s\" WHERE client_id = ?1 COLLATE BINARY"};
    sqlite3_stmt **sts[3] = {&fj->st_row, &fj->st_id, &fj->st_find};
    for (int k = 0; k < 3; k++) {
        char text[256];
        if (k < 2)
            snprintf(text, sizeof text, sql[k], fj->table, fj->rowid);
        else
            snprintf(text, sizeof text, sql[k], fj->rowid, fj->table);
        if ((s = prepare(ds, text, sts[k], d)))
            return s;
    }
    return FVM_OK;
}

static void fedjax_close(fvm_dataset *ds)
{
    fedjax *fj = ds->impl;
    sqlite3_finalize(fj->st_row);
    sqlite3_finalize(fj->st_id);
    sqlite3_finalize(fj->st_find);
    free(fj->rowids);
    free(fj->buf);
    if (fj->inflater)
        libdeflate_free_decompressor(fj->inflater);
    free(fj->table);
}

const struct fvm_dataset_format_i fvm_dataset_format_fedjax = {
    .name = "fedjax",
    .title = "FedJAX SQLite",
    .tables = "table federated_data (FedJAX)",
    .default_split = "default",
    .size = sizeof(fedjax),
    .recognize = fedjax_recognize,
    .splits = fedjax_splits,
    .open = fedjax_open,
    .schema_client = fedjax_schema_client,
    .client = fedjax_client,
    .find = fedjax_find,
    .read = fedjax_read,
    .decode = fedjax_decode,
    .close = fedjax_close,
};
