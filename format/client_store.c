/* client_store.c - the clients' states in an SQLite file (see client_store.h). */
#include "client_store.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../vm/core/arena.h"
#include "safetensors.h"

struct fvm_client_store {
    sqlite3 *db;
    const fvm_type *type;
    char *name; /* the file errors name */
    char *type_text; /* type as written in meta */
    pthread_mutex_t lock; /* one statement at a time */
    sqlite3_stmt *get, *has, *put, *drop_between, *drop_before;
};

static fvm_status sql_error(fvm_client_store *st, const char *what, fvm_diag *d)
{
    fvm_loc loc = {.file = st->name};
    int rc = sqlite3_errcode(st->db);
    fvm_status code = rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT ? FVM_ERR_FORMAT
                      : rc == SQLITE_NOMEM                        ? FVM_ERR_NOMEM
                                                                  : FVM_ERR_IO;
    return fvm_diag_add(d, code, &loc, "%s: %s", what, sqlite3_errmsg(st->db));
}

static fvm_status exec(fvm_client_store *st, const char *sql, const char *what, fvm_diag *d)
{
    return sqlite3_exec(st->db, sql, NULL, NULL, NULL) == SQLITE_OK ? FVM_OK : sql_error(st, what, d);
}

static fvm_status prepare(fvm_client_store *st, const char *sql, sqlite3_stmt **out, fvm_diag *d)
{
    return sqlite3_prepare_v2(st->db, sql, -1, out, NULL) == SQLITE_OK ? FVM_OK
                                                                       : sql_error(st, "not a client state store", d);
}

/* The store's type: written when new, compared when not. */
static fvm_status check_type(fvm_client_store *st, const char *schema, fvm_diag *d)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT value FROM %s.meta WHERE key = 'type'", schema);
    sqlite3_stmt *q = NULL;
    FVM_TRY(prepare(st, sql, &q, d));
    int rc = sqlite3_step(q);
    fvm_status s = FVM_OK;
    fvm_loc loc = {.file = st->name};
    if (rc == SQLITE_ROW) {
        const char *have = (const char *)sqlite3_column_text(q, 0);
        if (!have || strcmp(have, st->type_text))
            s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "holds client states of type %s, not %s (another program's?)",
                             have ? have : "(none)", st->type_text);
    } else if (rc == SQLITE_DONE && !strcmp(schema, "main")) {
        sqlite3_finalize(q);
        q = NULL;
        s = prepare(st, "INSERT INTO meta (key, value) VALUES ('type', ?1)", &q, d);
        if (!s &&
            (sqlite3_bind_text(q, 1, st->type_text, -1, SQLITE_STATIC) != SQLITE_OK || sqlite3_step(q) != SQLITE_DONE))
            s = sql_error(st, "cannot write", d);
    } else if (rc == SQLITE_DONE) {
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "not a client state store: no type");
    } else {
        s = sql_error(st, "cannot read", d);
    }
    sqlite3_finalize(q);
    return s;
}

fvm_status fvm_client_store_open(const char *path, const fvm_type *type, bool durable, fvm_client_store **out,
                                 fvm_diag *d)
{
    *out = NULL;
    fvm_loc loc = {.file = path ? path : "the client states"};
    struct stat sb;
    /* SQLite would wait forever opening a FIFO, and read a device as a file. */
    if (path && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot open: not a regular file");
    fvm_client_store *st = calloc(1, sizeof *st);
    fvm_arena a = {0};
    const char *text = st ? fvm_type_str(&a, type, false) : NULL;
    if (!st || !text || !(st->name = strdup(loc.file)) || !(st->type_text = strdup(text))) {
        fvm_arena_free(&a);
        if (st) {
            free(st->name);
            free(st);
        }
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    fvm_arena_free(&a);
    st->type = type;
    pthread_mutex_init(&st->lock, NULL);
    fvm_status s = FVM_OK;
    if (sqlite3_open_v2(path ? path : "", &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        s = st->db ? sql_error(st, "cannot open", d) : fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        goto done;
    }
    /* A file from anywhere: no schema-defined side effects, corrupt pages
     * caught as early as SQLite can (https://sqlite.org/security.html). */
    sqlite3_db_config(st->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
    sqlite3_db_config(st->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
    sqlite3_busy_timeout(st->db, 60000);
    /* Large pages: a state of a few KB is one page, not a chain of them. */
    if ((s = exec(st, "PRAGMA page_size = 65536; PRAGMA cell_size_check = ON; PRAGMA cache_size = -16384",
                  "cannot open", d)) ||
        (s = exec(st, durable ? "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL" : "PRAGMA synchronous = OFF",
                  "cannot open", d)) ||
        (s = exec(st,
                  "CREATE TABLE IF NOT EXISTS client_state (client INTEGER NOT NULL, round INTEGER NOT NULL, "
                  "state BLOB NOT NULL, PRIMARY KEY (client, round)) WITHOUT ROWID; "
                  "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
                  "not a client state store", d)) ||
        (s = check_type(st, "main", d)))
        goto done;
    if ((s = prepare(st, "SELECT state FROM client_state WHERE client = ?1 ORDER BY round DESC LIMIT 1", &st->get,
                     d)) ||
        (s = prepare(st, "SELECT 1 FROM client_state WHERE client = ?1 LIMIT 1", &st->has, d)) ||
        (s = prepare(st, "INSERT OR REPLACE INTO client_state (client, round, state) VALUES (?1, ?2, ?3)", &st->put,
                     d)) ||
        (s = prepare(st, "DELETE FROM client_state WHERE client = ?1 AND round > ?2 AND round < ?3", &st->drop_between,
                     d)) ||
        (s = prepare(st, "DELETE FROM client_state WHERE client = ?1 AND round < ?2", &st->drop_before, d)))
        goto done;
done:
    if (s) {
        fvm_client_store_close(st);
        return s;
    }
    *out = st;
    return FVM_OK;
}

fvm_status fvm_client_store_copy_from(fvm_client_store *st, const char *from, fvm_diag *d)
{
    fvm_loc loc = {.file = from};
    struct stat sb;
    if (stat(from, &sb) != 0)
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot open the clients' states: %s", strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return fvm_diag_add(d, FVM_ERR_IO, &loc, "cannot open: not a regular file");
    sqlite3_stmt *q = NULL;
    pthread_mutex_lock(&st->lock);
    fvm_status s = prepare(st, "ATTACH DATABASE ?1 AS src", &q, d);
    if (!s && (sqlite3_bind_text(q, 1, from, -1, SQLITE_STATIC) != SQLITE_OK || sqlite3_step(q) != SQLITE_DONE))
        s = sql_error(st, "cannot open the clients' states to resume from", d);
    sqlite3_finalize(q);
    if (s) {
        pthread_mutex_unlock(&st->lock);
        return s;
    }
    char *name = st->name;
    st->name = (char *)from; /* errors about the source name it */
    s = check_type(st, "src", d);
    st->name = name;
    if (!s && !(s = exec(st, "BEGIN IMMEDIATE", "cannot write", d))) {
        s = exec(st,
                 "DELETE FROM main.client_state; INSERT INTO main.client_state (client, round, state) "
                 "SELECT client, round, state FROM src.client_state; "
                 "DELETE FROM main.meta WHERE key = 'checkpoint'; "
                 "INSERT INTO main.meta (key, value) SELECT key, value FROM src.meta WHERE key = 'checkpoint'",
                 "cannot copy the clients' states", d);
        s = s ? (sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL), s) : exec(st, "COMMIT", "cannot write", d);
    }
    sqlite3_exec(st->db, "DETACH DATABASE src", NULL, NULL, NULL);
    pthread_mutex_unlock(&st->lock);
    return s;
}

fvm_status fvm_client_store_has(fvm_client_store *st, int64_t client, bool *has, fvm_diag *d)
{
    pthread_mutex_lock(&st->lock);
    sqlite3_bind_int64(st->has, 1, client);
    int rc = sqlite3_step(st->has);
    fvm_status s = rc == SQLITE_ROW || rc == SQLITE_DONE ? FVM_OK : sql_error(st, "cannot read", d);
    *has = rc == SQLITE_ROW;
    sqlite3_reset(st->has);
    pthread_mutex_unlock(&st->lock);
    return s;
}

fvm_status fvm_client_store_get(fvm_client_store *st, int64_t client, fvm_value **out, fvm_diag *d)
{
    *out = NULL;
    void *bytes = NULL;
    size_t len = 0;
    pthread_mutex_lock(&st->lock);
    sqlite3_bind_int64(st->get, 1, client);
    int rc = sqlite3_step(st->get);
    fvm_status s = FVM_OK;
    if (rc == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(st->get, 0);
        len = (size_t)sqlite3_column_bytes(st->get, 0);
        if (!(bytes = malloc(len ? len : 1)))
            s = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        else if (len)
            memcpy(bytes, blob, len);
    } else if (rc != SQLITE_DONE) {
        s = sql_error(st, "cannot read", d);
    }
    sqlite3_reset(st->get);
    pthread_mutex_unlock(&st->lock);
    if (s || !bytes)
        return s;
    char name[1200];
    snprintf(name, sizeof name, "%s (client %lld's state)", st->name, (long long)client);
    fvm_safetensors *f = NULL;
    if (!(s = fvm_safetensors_parse(name, bytes, len, &f, d)))
        s = fvm_safetensors_value(f, st->type, out, d);
    fvm_safetensors_free(f);
    free(bytes);
    return s;
}

/* Runs a prepared statement with (client, a, b) bound (b only when the statement takes it). */
static fvm_status run3(fvm_client_store *st, sqlite3_stmt *q, int64_t client, int64_t a, int64_t b, fvm_diag *d)
{
    sqlite3_bind_int64(q, 1, client);
    sqlite3_bind_int64(q, 2, a);
    if (sqlite3_bind_parameter_count(q) >= 3)
        sqlite3_bind_int64(q, 3, b);
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    return rc == SQLITE_DONE ? FVM_OK : sql_error(st, "cannot write", d);
}

/* Ends the transaction a writer began under the lock: committed when s is
 * FVM_OK, else rolled back; then unlocks. */
static fvm_status end_write(fvm_client_store *st, fvm_status s, fvm_diag *d)
{
    if (s)
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    else
        s = exec(st, "COMMIT", "cannot write", d);
    pthread_mutex_unlock(&st->lock);
    return s;
}

fvm_status fvm_client_store_put(fvm_client_store *st, int64_t round, int64_t keep, int64_t n, const int64_t *clients,
                                fvm_value *const *states, fvm_diag *d)
{
    pthread_mutex_lock(&st->lock);
    fvm_status s = exec(st, "BEGIN IMMEDIATE", "cannot write", d);
    for (int64_t j = 0; j < n && !s; j++) {
        void *bytes = NULL;
        size_t len = 0;
        if ((s = fvm_safetensors_bytes(states[j], st->type, 0, NULL, &bytes, &len, d)))
            break;
        sqlite3_bind_int64(st->put, 1, clients[j]);
        sqlite3_bind_int64(st->put, 2, round);
        sqlite3_bind_blob64(st->put, 3, bytes, len, SQLITE_STATIC);
        int rc = sqlite3_step(st->put);
        sqlite3_reset(st->put);
        sqlite3_clear_bindings(st->put);
        free(bytes);
        if (rc != SQLITE_DONE)
            s = sql_error(st, "cannot write", d);
        else
            s = run3(st, st->drop_between, clients[j], keep, round, d);
    }
    return end_write(st, s, d);
}

/* The round of the last checkpoint whose rows were pruned (0: none). */
static fvm_status pruned_round(fvm_client_store *st, int64_t *out, fvm_diag *d)
{
    sqlite3_stmt *q = NULL;
    FVM_TRY(prepare(st, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'checkpoint'", &q, d));
    int rc = sqlite3_step(q);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
    sqlite3_finalize(q);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? FVM_OK : sql_error(st, "cannot read", d);
}

fvm_status fvm_client_store_prune(fvm_client_store *st, int64_t round, int64_t n, const int64_t *clients, fvm_diag *d)
{
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta (key, value) VALUES ('checkpoint', '%lld')",
             (long long)round);
    pthread_mutex_lock(&st->lock);
    fvm_status s = exec(st, "BEGIN IMMEDIATE", "cannot write", d);
    for (int64_t j = 0; j < n && !s; j++)
        s = run3(st, st->drop_before, clients[j], round, 0, d);
    if (!s)
        s = exec(st, sql, "cannot write", d);
    return end_write(st, s, d);
}

fvm_status fvm_client_store_rewind(fvm_client_store *st, int64_t round, fvm_diag *d)
{
    sqlite3_stmt *q = NULL;
    int64_t pruned = 0;
    pthread_mutex_lock(&st->lock);
    fvm_status s = pruned_round(st, &pruned, d);
    if (!s && round < pruned) {
        fvm_loc loc = {.file = st->name};
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "holds the clients' states as of the checkpoint of round %lld, not of round %lld: resume "
                         "from the last checkpoint (a directory keeps the states its last checkpoint needs)",
                         (long long)pruned, (long long)round);
    }
    if (!s)
        s = prepare(st, "DELETE FROM client_state WHERE round > ?1", &q, d);
    if (!s) {
        sqlite3_bind_int64(q, 1, round);
        if (sqlite3_step(q) != SQLITE_DONE)
            s = sql_error(st, "cannot write", d);
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}

fvm_status fvm_client_store_clear(fvm_client_store *st, fvm_diag *d)
{
    pthread_mutex_lock(&st->lock);
    fvm_status s = exec(st, "DELETE FROM client_state; DELETE FROM meta WHERE key = 'checkpoint'", "cannot write", d);
    pthread_mutex_unlock(&st->lock);
    return s;
}

fvm_status fvm_client_store_count(fvm_client_store *st, int64_t *clients, int64_t *rows, fvm_diag *d)
{
    sqlite3_stmt *q = NULL;
    pthread_mutex_lock(&st->lock);
    fvm_status s = prepare(st, "SELECT count(DISTINCT client), count(*) FROM client_state", &q, d);
    if (!s && sqlite3_step(q) == SQLITE_ROW) {
        *clients = sqlite3_column_int64(q, 0);
        *rows = sqlite3_column_int64(q, 1);
    } else if (!s) {
        s = sql_error(st, "cannot read", d);
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->lock);
    return s;
}

void fvm_client_store_close(fvm_client_store *st)
{
    if (!st)
        return;
    sqlite3_finalize(st->get);
    sqlite3_finalize(st->has);
    sqlite3_finalize(st->put);
    sqlite3_finalize(st->drop_between);
    sqlite3_finalize(st->drop_before);
    sqlite3_close(st->db);
    pthread_mutex_destroy(&st->lock);
    free(st->name);
    free(st->type_text);
    free(st);
}
