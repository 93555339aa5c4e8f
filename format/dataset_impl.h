/* dataset_impl.h - what the dataset reader's files share (internal: not installed). */
#ifndef FVM_DATASET_IMPL_H
#define FVM_DATASET_IMPL_H

#include <libdeflate.h>
#include <sqlite3.h>

#include "dataset.h"

typedef enum ds_kind { DS_FEDJAX, DS_TFF } ds_kind;

/* A column name of the schema, for lookups by name: the index is sorted by
 * the names' bytes (then length), so a lookup is a binary search whatever
 * names a file holds. */
typedef struct ds_name {
    const char *name; /* borrowed from cols[col].name */
    size_t len;
    int col;
} ds_name;

/* An open dataset. Not thread-safe: use one handle per thread. */
struct fvm_dataset {
    char *path;
    ds_kind kind;
    char *split;      /* the split's name as fvm_dataset_splits lists it */
    char *table;      /* FedJAX: the table of the split */
    sqlite3 *db;      /* NULL for a handle made by ds_new (decoding from memory) */
    int64_t n;        /* clients */
    /* Client i's row: rowid0 + i when the rowids are contiguous (rowids NULL),
     * else rowids[i] (FedJAX: table order; TFF: client_metadata rows in
     * client_id order). */
    int64_t rowid0;
    int64_t *rowids;
    /* The names by which SQL reaches the real rowid of the client table (TFF:
     * client_metadata) and of TFF's examples: "rowid", "_rowid_" or "oid",
     * whichever no column of the table hides. */
    const char *rowid, *ex_rowid;
    sqlite3_stmt *st_row;      /* FedJAX: id, data, count by rowid; TFF: id, count by rowid */
    sqlite3_stmt *st_id;       /* FedJAX: id, count by rowid (no data) */
    sqlite3_stmt *st_find;     /* FedJAX: rowid by id */
    sqlite3_stmt *st_examples; /* TFF: a client's serialized examples */
    bool schema;               /* the columns are known (cols may still be empty: a TFF split without examples) */
    int ncols;
    fvm_column *cols;          /* names malloc'd */
    ds_name *index;            /* ncols entries, sorted by name */
    unsigned char *id;         /* the last client id read (NUL-terminated copy) */
    size_t id_len, id_cap;
    unsigned char *buf;        /* scratch: inflated client data, reused */
    size_t buf_cap;
    struct libdeflate_decompressor *inflater; /* FedJAX: made at the first client */
};

/* The most columns (FedJAX) or features (TFF) a dataset may have, and the
 * longest column name, in bytes. */
#define DS_MAX_COLUMNS 100000
#define DS_MAX_NAME 255
/* The most examples a client may have (what num_examples may claim). */
#define DS_MAX_EXAMPLES FVM_MAX_SEQ_LEN

/* A decoded column of one client: either one tensor with a leading example
 * axis ('full'), or one tensor per example ('rows', when their shapes
 * differ). Owned references. */
typedef struct ds_col {
    fvm_tensor full;
    fvm_tensor *rows;
    int64_t nrows;
} ds_col;

void ds_col_clear(ds_col *c);

/* "'id' (index i)" for messages: the id as escaped text (fvm_dataset_escape)
 * when it is UTF-8, else as hex; no index when i < 0. Writes into buf (at
 * most DS_WHO bytes). */
#define DS_WHO 160
const char *ds_who(const void *id, size_t len, int64_t i, char buf[DS_WHO]);

/* A name read from a file, escaped for messages and listings
 * (fvm_dataset_escape): at most DS_ESC bytes. */
#define DS_ESC 160
const char *ds_esc(const void *name, size_t len, char buf[DS_ESC]);

/* Replaces, in place, every byte of s that is not part of valid UTF-8, and
 * every control character, by '?': a last guard on messages, whose names
 * are escaped already. */
void ds_clean(char *s);
/* Does [s, s+len) hold valid UTF-8 (no surrogates, no overlong forms)? */
bool ds_utf8(const void *s, size_t len);
/* A column name read from a file must be usable as one: 1 to DS_MAX_NAME
 * bytes of UTF-8 without NUL bytes (so that it reads the same as a C
 * string, in JSON and in a program's types). An error names the file, the
 * client ('who') and the escaped name. */
bool ds_name_ok(const void *name, size_t len);
fvm_status ds_check_name(const fvm_dataset *ds, const char *who, const char *what, const void *name, size_t len,
                         fvm_diag *d);
/* Is the tensor of this shape within FVM_MAX_TENSOR_BYTES when its zero dims
 * are left out? An empty tensor must not carry a dim that would overflow
 * counts elsewhere (a row of shape [2^63-1, 0], say). */
bool ds_dims_bounded(const fvm_dims *shape, fvm_dtype dtype);
/* Records an error located at the dataset's file (its message cleaned by
 * ds_clean, at most 1023 bytes). Returns code. */
fvm_status ds_err(const fvm_dataset *ds, fvm_diag *d, fvm_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An SQLite failure: "what: sqlite's message". FVM_ERR_FORMAT when the file
 * is not a database or is corrupt, FVM_ERR_NOMEM, else FVM_ERR_IO. */
fvm_status ds_sql_err(const fvm_dataset *ds, fvm_diag *d, int rc, const char *what);

/* Keeps a copy of a client id in ds->id. */
fvm_status ds_keep_id(fvm_dataset *ds, const void *id, size_t len, fvm_diag *d);
/* The rowid of client i (0 <= i < ds->n; with contiguous rowids,
 * rowid0 + i stays within [min, max] of the table's rowids). */
static inline int64_t ds_rowid(const fvm_dataset *ds, int64_t i)
{
    return ds->rowids ? ds->rowids[i] : (int64_t)((uint64_t)ds->rowid0 + (uint64_t)i);
}

/* Checks that 'table' has the columns need[0..nneed) and sets *rowid to a
 * name of its real rowid that no column hides ("rowid", "_rowid_" or "oid"):
 * a table whose columns hide all three, or a WITHOUT ROWID table, is
 * FVM_ERR_FORMAT. */
fvm_status ds_check_table(fvm_dataset *ds, const char *table, const char *const *need, int nneed, const char **rowid,
                          fvm_diag *d);

/* Orders ds_names by name (bytes, then length), then by col: for qsort. */
int ds_name_cmp(const void *a, const void *b);
/* The schema column named [name, name+len), or -1 (a binary search). */
int ds_column_find(const fvm_dataset *ds, const char *name, size_t len);
/* The same, trying column 'guess' first (where the previous client or
 * example had the name): a name without NUL bytes. */
int ds_column_near(const fvm_dataset *ds, const char *name, size_t len, int guess);

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
/* Sets the schema from a first client's columns (names copied; each checked
 * by ds_check_name, and a name given twice is an error naming the client
 * 'who'). ncols may be 0. With cols NULL, the caller sets the dtypes and
 * shapes. */
fvm_status ds_set_schema(fvm_dataset *ds, const char *who, int ncols, const char *const *names,
                         const size_t *name_lens, const ds_col *cols, fvm_diag *d);

/* A handle for decoding clients from memory, with no file behind it (path
 * only names it in messages): for fuzzing the decoders and for tests. The
 * schema is set by the first client decoded. Close with fvm_dataset_close.
 * NULL when out of memory. */
fvm_dataset *ds_new(const char *path, ds_kind kind);

/* FedJAX files (dataset_fedjax.c). */
fvm_status ds_fedjax_open(fvm_dataset *ds, fvm_diag *d);
fvm_status ds_fedjax_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                            fvm_diag *d);
int64_t ds_fedjax_find(fvm_dataset *ds, const void *id, size_t id_len);
fvm_status ds_fedjax_read(fvm_dataset *ds, int64_t i, fvm_value **out, fvm_diag *d);
/* Decodes one client's data blob from memory (zlib of the msgpack map of
 * columns) into a sequence value (*out, owned by the caller), checked
 * against the schema (set from this client when there is none yet).
 * num_examples: the count the rows must have, or -1 to take it from the
 * columns (which must still agree). 'who' names the client in errors. */
fvm_status ds_fedjax_decode(fvm_dataset *ds, const char *who, const void *blob, size_t len, int64_t num_examples,
                            fvm_value **out, fvm_diag *d);

/* TFF files (dataset_tff.c). */
/* Checks both tables' columns, sets ds->rowid and ds->ex_rowid, and checks
 * every row of client_metadata: client_id and split_name text, num_examples
 * an integer from 0 to DS_MAX_EXAMPLES; an error names the row. */
fvm_status ds_tff_tables(fvm_dataset *ds, fvm_diag *d);
fvm_status ds_tff_open(fvm_dataset *ds, fvm_diag *d);
fvm_status ds_tff_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                         fvm_diag *d);
int64_t ds_tff_find(fvm_dataset *ds, const void *id, size_t id_len);
fvm_status ds_tff_read(fvm_dataset *ds, int64_t i, fvm_value **out, fvm_diag *d);
/* Decodes one client's n serialized tf.train.Examples from memory
 * (protos[k] of lens[k] bytes) into a sequence value (*out, owned by the
 * caller), checked against the schema (set from these examples when there
 * is none yet and n > 0). 'who' names the client in errors. */
fvm_status ds_tff_decode(fvm_dataset *ds, const char *who, int64_t n, const void *const *protos, const size_t *lens,
                         fvm_value **out, fvm_diag *d);

/* The FedJAX table of a split: "federated_data" for NULL or "default", else
 * "federated_data_<split>". NULL (and an error) when the name is not 1-64
 * letters, digits or underscores. malloc'd. */
char *ds_fedjax_table(const char *split, const char *path, fvm_diag *d);

#endif
