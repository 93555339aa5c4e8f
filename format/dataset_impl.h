/* dataset_impl.h - what the dataset reader's files share (internal: not installed). */
#ifndef FVM_DATASET_IMPL_H
#define FVM_DATASET_IMPL_H

#include <libdeflate.h>
#include <sqlite3.h>

#include "dataset.h"

typedef enum ds_kind { DS_FEDJAX, DS_TFF } ds_kind;

/* An open dataset. Not thread-safe: use one handle per thread. */
struct fvm_dataset {
    char *path;
    ds_kind kind;
    char *split;      /* the split's name as fvm_dataset_splits lists it */
    char *table;      /* FedJAX: the table of the split */
    sqlite3 *db;
    int64_t n;        /* clients */
    /* Client i's row: rowid0 + i when the rowids are contiguous (rowids NULL),
     * else rowids[i] (FedJAX: table order; TFF: client_metadata rows in
     * client_id order). */
    int64_t rowid0;
    int64_t *rowids;
    sqlite3_stmt *st_row;      /* FedJAX: id, data, count by rowid; TFF: id, count by rowid */
    sqlite3_stmt *st_id;       /* FedJAX: id, count by rowid (no data) */
    sqlite3_stmt *st_find;     /* FedJAX: rowid by id */
    sqlite3_stmt *st_examples; /* TFF: a client's serialized examples */
    int ncols;
    fvm_column *cols;          /* names malloc'd */
    unsigned char *id;         /* the last client id read (NUL-terminated copy) */
    size_t id_len, id_cap;
    unsigned char *buf;        /* scratch: inflated client data, reused */
    size_t buf_cap;
    struct libdeflate_decompressor *inflater; /* FedJAX: made at the first client */
};

/* A decoded column of one client: either one tensor with a leading example
 * axis ('full'), or one tensor per example ('rows', when their shapes
 * differ). Owned references. */
typedef struct ds_col {
    fvm_tensor full;
    fvm_tensor *rows;
    int64_t nrows;
} ds_col;

void ds_col_clear(ds_col *c);

/* "'id' (index i)" for messages: the id as text when it is printable, else
 * as hex. Writes into buf (at most DS_WHO bytes). */
#define DS_WHO 160
const char *ds_who(const void *id, size_t len, int64_t i, char buf[DS_WHO]);

/* Replaces, in place, every byte of s that is not part of valid UTF-8, and
 * every control character, by '?': names read from a file may hold any
 * bytes, messages hold text. */
void ds_clean(char *s);
/* Records an error located at the dataset's file (its message cleaned by
 * ds_clean, at most 1023 bytes). Returns code. */
fvm_status ds_err(const fvm_dataset *ds, fvm_diag *d, fvm_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An SQLite failure: "what: sqlite's message". FVM_ERR_FORMAT when the file
 * is not a database or is corrupt, FVM_ERR_NOMEM, else FVM_ERR_IO. */
fvm_status ds_sql_err(const fvm_dataset *ds, fvm_diag *d, int rc, const char *what);

/* Keeps a copy of a client id in ds->id. */
fvm_status ds_keep_id(fvm_dataset *ds, const void *id, size_t len, fvm_diag *d);
/* The rowid of client i. */
static inline int64_t ds_rowid(const fvm_dataset *ds, int64_t i)
{
    return ds->rowids ? ds->rowids[i] : ds->rowid0 + i;
}

/* Takes the column (not the example) shape of a ds_col: the per-example
 * shape and dtype shared by its rows, or -1 where they differ. */
void ds_col_shape(const ds_col *c, fvm_dtype *dtype, fvm_dims *shape);
/* Checks a decoded column against the schema column (dtype, rank, every known
 * dim); an error names the client and column. */
fvm_status ds_col_check(const fvm_dataset *ds, const fvm_column *schema, const ds_col *c, const char *who,
                        fvm_diag *d);
/* Builds the client's sequence from ncols decoded columns in schema order
 * (takes their references and clears them). */
fvm_status ds_build(const fvm_dataset *ds, int64_t n, ds_col *cols, fvm_value **out, fvm_diag *d);
/* Sets the schema from a first client's columns (names copied). */
fvm_status ds_set_schema(fvm_dataset *ds, int ncols, const char *const *names, const size_t *name_lens,
                         const ds_col *cols, fvm_diag *d);

/* FedJAX files (dataset_fedjax.c). */
fvm_status ds_fedjax_open(fvm_dataset *ds, fvm_diag *d);
fvm_status ds_fedjax_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                            fvm_diag *d);
int64_t ds_fedjax_find(fvm_dataset *ds, const void *id, size_t id_len);
fvm_status ds_fedjax_read(fvm_dataset *ds, int64_t i, fvm_value **out, fvm_diag *d);

/* TFF files (dataset_tff.c). */
fvm_status ds_tff_open(fvm_dataset *ds, fvm_diag *d);
fvm_status ds_tff_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                         fvm_diag *d);
int64_t ds_tff_find(fvm_dataset *ds, const void *id, size_t id_len);
fvm_status ds_tff_read(fvm_dataset *ds, int64_t i, fvm_value **out, fvm_diag *d);

/* The FedJAX table of a split: "federated_data" for NULL or "default", else
 * "federated_data_<split>". NULL (and an error) when the name is not 1-64
 * letters, digits or underscores. malloc'd. */
char *ds_fedjax_table(const char *split, const char *path, fvm_diag *d);

#endif
