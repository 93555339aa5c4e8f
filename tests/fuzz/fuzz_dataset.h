/* fuzz_dataset.h - what the dataset targets share: an input split into clients, a SQLite file built around fuzzed rows, and the
 * dataset read back from it, every client checked against the schema. */
#ifndef FUZZ_DATASET_H
#define FUZZ_DATASET_H

#include <sqlite3.h>
#include <stdarg.h>

#include "../../format/dataset.h"
#include "fuzz_util.h"

/* The input of the FedJAX and TFF targets: a flag byte (in *flags), then up
 * to max clients separated by "@@client@@", into parts. The number of
 * clients; 0 for an empty input, which the targets skip. */
static inline int fuzz_clients(const uint8_t *data, size_t size, unsigned *flags, fuzz_part *parts, int max)
{
    if (size < 1)
        return 0;
    *flags = data[0];
    return fuzz_split(data + 1, size - 1, "@@client@@", parts, max);
}

/* A client's count byte, the first of its part (0 when the part is empty):
 * its num_examples, 255 standing for 2^40. */
static inline int64_t fuzz_count_byte(fuzz_part c)
{
    int64_t count = c.n ? c.p[0] : 0;
    return count == 255 ? (int64_t)1 << 40 : count;
}

/* An in-memory database with the statements of sql run (no error expected). */
static inline sqlite3 *fuzz_db_new(const char *sql)
{
    sqlite3 *db = NULL;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK || sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        FUZZ_FAIL("cannot make the database: %s", db ? sqlite3_errmsg(db) : "");
    return db;
}

/* Runs sql (one statement, parameters bound in order: 't' text, 'b' blob,
 * 'i' integer, from the following arguments: text and blob as pointer and
 * length, integer as int64_t). */
static inline void fuzz_db_row(sqlite3 *db, const char *sql, const char *kinds, ...)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        FUZZ_FAIL("cannot prepare %s: %s", sql, sqlite3_errmsg(db));
    va_list ap;
    va_start(ap, kinds);
    for (int k = 0; kinds[k]; k++) {
        if (kinds[k] == 'i') {
            sqlite3_bind_int64(st, k + 1, va_arg(ap, int64_t));
            continue;
        }
        const void *p = va_arg(ap, const void *);
        int n = (int)va_arg(ap, size_t);
        if (kinds[k] == 't')
            sqlite3_bind_text(st, k + 1, p, n, SQLITE_TRANSIENT);
        else
            sqlite3_bind_blob(st, k + 1, n ? p : "", n, SQLITE_TRANSIENT);
    }
    va_end(ap);
    if (sqlite3_step(st) != SQLITE_DONE)
        FUZZ_FAIL("cannot run %s: %s", sql, sqlite3_errmsg(db));
    sqlite3_finalize(st);
}

/* Writes the database to path and closes it. */
static inline void fuzz_db_save(sqlite3 *db, const char *path)
{
    sqlite3_int64 len = 0;
    unsigned char *bytes = sqlite3_serialize(db, "main", &len, 0);
    if (!bytes) { /* a database without a page serializes to nothing: an empty file */
        sqlite3_int64 pages = -1;
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            pages = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        if (pages != 0)
            FUZZ_FAIL("cannot serialize the database");
        fuzz_write(path, "", 0);
        sqlite3_close(db);
        return;
    }
    fuzz_write(path, bytes, (size_t)len);
    sqlite3_free(bytes);
    sqlite3_close(db);
}

/* A tensor of a client's column against the schema column (an example's
 * dtype and shape, -1 any size), with 'lead' examples before it (-1: none). */
static inline void fuzz_check_column(const fvm_column *c, const fvm_tensor *t, int64_t lead)
{
    int off = lead >= 0 ? 1 : 0;
    if (t->dtype != c->dtype || t->shape.rank != c->shape.rank + off)
        FUZZ_FAIL("column '%s': a tensor of dtype %d and rank %d, the schema %d and %d", c->name, (int)t->dtype,
                  t->shape.rank, (int)c->dtype, c->shape.rank + off);
    if (lead >= 0 && t->shape.d[0] != lead)
        FUZZ_FAIL("column '%s': %lld rows for %lld examples", c->name, (long long)t->shape.d[0], (long long)lead);
    for (int k = 0; k < c->shape.rank; k++)
        if (c->shape.d[k] >= 0 && t->shape.d[k + off] != c->shape.d[k])
            FUZZ_FAIL("column '%s': dim %d is %lld, the schema's %lld", c->name, k, (long long)t->shape.d[k + off],
                      (long long)c->shape.d[k]);
    if (fvm_tensor_count(t) > 0 && !t->buf)
        FUZZ_FAIL("column '%s': a tensor of %lld elements without data", c->name, (long long)fvm_tensor_count(t));
}

/* Every client of the open dataset read, its examples checked against the
 * schema and its count; each client found again by its id. */
static inline void fuzz_check_dataset(fvm_dataset *ds)
{
    const fvm_column *cols = NULL;
    int ncols = fvm_dataset_columns(ds, &cols);
    /* No columns only when no client has an example (a TFF file whose clients
     * are all empty has no schema to infer). */
    for (int64_t i = 0; i < fvm_dataset_clients(ds); i++) {
        fvm_diag d = {0};
        const void *id = NULL;
        size_t id_len = 0;
        int64_t examples = -1;
        fvm_status s = fvm_dataset_client(ds, i, &id, &id_len, &examples, &d);
        fuzz_check_errors(s, &d, 1);
        if (s == FVM_OK && ncols < 1 && examples > 0)
            FUZZ_FAIL("client %lld has %lld examples but the dataset no columns", (long long)i, (long long)examples);
        if (s == FVM_OK) {
            void *copy = malloc(id_len ? id_len : 1);
            memcpy(copy, id, id_len);
            int64_t found = fvm_dataset_find(ds, copy, id_len);
            /* Ids may repeat in a hostile file; the one found must have the id. */
            if (found < 0)
                FUZZ_FAIL("client %lld is not found by its id", (long long)i);
            free(copy);
        }
        fvm_value *v = NULL;
        s = fvm_dataset_read(ds, i, &v, &d);
        fuzz_check_errors(s, &d, 1);
        if (s == FVM_OK) {
            if (v->kind != FVM_V_SEQ || (examples >= 0 && v->n != examples))
                FUZZ_FAIL("client %lld: a value of kind %d and %lld elements for %lld examples", (long long)i,
                          (int)v->kind, (long long)v->n, (long long)examples);
            if (v->cols) {
                const fvm_value *st = v->cols;
                if (st->kind != FVM_V_STRUCT || st->n != ncols)
                    FUZZ_FAIL("client %lld: columns of kind %d and %lld fields", (long long)i, (int)st->kind,
                              (long long)st->n);
                for (int k = 0; k < ncols; k++)
                    fuzz_check_column(&cols[k], &st->items[k]->t, v->n);
            }
            for (int64_t e = 0; e < v->n; e++) {
                fvm_value *x = NULL;
                if (fvm_seq_get(v, e, &x, &d) != FVM_OK || x->kind != FVM_V_STRUCT || x->n != ncols)
                    FUZZ_FAIL("client %lld: example %lld is not a struct of the columns", (long long)i, (long long)e);
                for (int k = 0; k < ncols; k++) {
                    fuzz_check_column(&cols[k], &x->items[k]->t, -1);
                    /* Touch every byte: a view past its buffer shows here. */
                    volatile unsigned char sum = 0;
                    const unsigned char *p = fvm_tensor_data(&x->items[k]->t);
                    for (size_t b = 0; p && b < fvm_tensor_bytes(&x->items[k]->t); b++)
                        sum ^= p[b];
                    (void)sum;
                }
                fvm_value_release(x);
            }
        }
        fvm_value_release(v);
        fvm_diag_clear(&d);
    }
}

/* Opens the default split of the dataset at path: an error is located, and
 * a split that opens has n clients, each checked (fuzz_check_dataset). */
static inline void fuzz_check_file(const char *path, int n)
{
    fvm_diag d = {0};
    fvm_dataset *ds = NULL;
    fvm_status s = fvm_dataset_open(path, NULL, &ds, &d);
    fuzz_check_errors(s, &d, 1);
    if (s == FVM_OK) {
        if (fvm_dataset_clients(ds) != n)
            FUZZ_FAIL("%lld clients of %d", (long long)fvm_dataset_clients(ds), n);
        fuzz_check_dataset(ds);
    }
    fvm_dataset_close(ds);
    fvm_diag_clear(&d);
}

#endif
