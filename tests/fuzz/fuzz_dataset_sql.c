/* fuzz_dataset_sql.c - libFuzzer target: whole dataset files (format/dataset.c: the format told by its
 * tables, the splits, the client index; then either reader) from SQL. The input is SQL that builds a
 * database (as 'sqlite3 FILE .dump' prints one), run statement by statement (one that fails is
 * skipped), with bounded work and size and no pragmas, attached files or VACUUM INTO; the database is
 * saved as a file and opened as a dataset: its splits listed, each split opened and every client read. */
#include "fuzz_dataset.h"

/* SQLite stops a statement after this many progress callbacks (1000 VM steps each). */
#define MAX_STEPS 2000

static int progress(void *u)
{
    return ++*(int *)u > MAX_STEPS;
}

/* What the SQL may do: make and fill tables, indexes and views, and read. */
static int authorize(void *u, int action, const char *a, const char *b, const char *c, const char *e)
{
    switch (action) {
    case SQLITE_CREATE_TABLE:
    case SQLITE_CREATE_INDEX:
    case SQLITE_CREATE_VIEW:
    case SQLITE_DROP_TABLE:
    case SQLITE_DROP_INDEX:
    case SQLITE_DROP_VIEW:
    case SQLITE_ALTER_TABLE:
    case SQLITE_INSERT:
    case SQLITE_UPDATE:
    case SQLITE_DELETE:
    case SQLITE_READ:
    case SQLITE_SELECT:
    case SQLITE_FUNCTION:
    case SQLITE_TRANSACTION:
    case SQLITE_SAVEPOINT:
    case SQLITE_RECURSIVE:
        return SQLITE_OK;
    default:
        return SQLITE_DENY;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *sql = malloc(size + 1);
    memcpy(sql, data, size);
    sql[size] = 0;
    sqlite3 *db = NULL;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK)
        FUZZ_FAIL("cannot open a database in memory");
    int steps = 0;
    sqlite3_progress_handler(db, 1000, progress, &steps);
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 1 << 20);
    sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_exec(db, "PRAGMA max_page_count = 512", NULL, NULL, NULL);
    sqlite3_set_authorizer(db, authorize, NULL);
    for (const char *at = sql; *at;) { /* up to a NUL in the input */
        sqlite3_stmt *st = NULL;
        const char *next = NULL;
        if (sqlite3_prepare_v2(db, at, -1, &st, &next) != SQLITE_OK || !next || next <= at) {
            const char *semi = strchr(at, ';'); /* skip the statement that does not compile */
            next = semi ? semi + 1 : sql + size;
        }
        while (st && sqlite3_step(st) == SQLITE_ROW)
            ;
        sqlite3_finalize(st);
        at = next;
    }
    sqlite3_set_authorizer(db, NULL, NULL);
    free(sql);
    char path[512];
    fuzz_db_save(db, fuzz_path(path, sizeof path, "dataset.sqlite"));

    fvm_diag d = {0};
    char **splits = NULL;
    int n = 0;
    fvm_status s = fvm_dataset_splits(path, &splits, &n, &d);
    fuzz_check_errors(s, &d, 1);
    fvm_diag_clear(&d);
    /* The default split, then each one listed. */
    for (int k = -1; k < n && k < 4; k++) {
        fvm_dataset *ds = NULL;
        s = fvm_dataset_open(path, k < 0 ? NULL : splits[k], &ds, &d);
        fuzz_check_errors(s, &d, 1);
        if (s == FVM_OK && fvm_dataset_clients(ds) <= 64)
            fuzz_check_dataset(ds);
        fvm_dataset_close(ds);
        fvm_diag_clear(&d);
    }
    fvm_dataset_free_splits(splits, n);
    return 0;
}
