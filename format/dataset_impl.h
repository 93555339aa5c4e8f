/* dataset_impl.h - what the dataset reader's files share: the handle, the format interface, the helpers (internal: not installed). */
#ifndef FVM_DATASET_IMPL_H
#define FVM_DATASET_IMPL_H

#include <stdarg.h>

#include <sqlite3.h>

#include "dataset.h"

/* A column name of the schema, for lookups by name: the index is sorted by
 * the names' bytes (then length), so a lookup is a binary search whatever
 * names a file holds. */
typedef struct ds_name {
    const char *name; /* borrowed from cols[col].name */
    size_t len;
    int col;
} ds_name;

/* A decoded column of one client: either one tensor with a leading example
 * axis ('full'), or one tensor per example ('rows', when their shapes
 * differ). Owned references. */
typedef struct ds_col {
    fvm_tensor full;
    fvm_tensor *rows;
    int64_t nrows;
} ds_col;

/* A growing list of malloc'd names (splits), as fvm_dataset_splits hands
 * them over. */
typedef struct ds_names {
    char **v;
    int n, cap;
} ds_names;

/* One client's stored data, given from memory to a format's decode: the
 * parts of its row (FedJAX: one, the data blob; TFF: the serialized
 * tf.train.Examples, one a part) and the examples the row claims (-1: take
 * them from the data). Borrowed. */
typedef struct ds_raw {
    int64_t count;
    int64_t nparts;
    const void *const *parts;
    const size_t *lens;
} ds_raw;

/* The most bytes of a client's description in messages (ds_who). */
#define DS_WHO 160

/* A dataset format: how the generic reader (dataset.c) reaches one layout of
 * tables. The generic code opens the file, chooses the split, reads the
 * schema from a first client, checks every client's columns against it and
 * builds the sequences; a format only finds, reads and decodes its own rows.
 * Each format keeps its state in ds->impl (size bytes, zeroed when the handle
 * is made, freed after close). Formats are tried in the order of the table
 * in dataset.c. Errors go through ds_err / ds_sql_err (located at the file). */
struct fvm_dataset_format_i {
    const char *name; /* what fvm_dataset_format returns: "fedjax", "tff" */
    const char *title; /* what fvm_dataset_format_title returns: "FedJAX SQLite", "TFF SQLite" */
    const char *tables; /* what the file lacks when it is no dataset: "table federated_data (FedJAX)" */
    const char *default_split; /* the split a NULL name opens; NULL: the file's only split */
    const char *no_splits; /* the error when the file lists no split and none is named (NULL: a generic one) */
    size_t size; /* bytes of the format's state (ds->impl) */
    /* Required. Does ds->db hold this format's tables? *yes when it does,
     * and then its tables are checked (an error is the file's: the file is
     * of this format but unreadable). When it does not, *partial may name
     * what the file has of them ("only one of the two"), for the error that
     * lists every format's tables. */
    fvm_status (*recognize)(fvm_dataset *ds, bool *yes, const char **partial, fvm_diag *d);
    /* Required. Appends the file's split names to out, in the order
     * fvm_dataset_splits lists them. On error the names appended so far stay
     * in out (the caller frees them). */
    fvm_status (*splits)(fvm_dataset *ds, ds_names *out, fvm_diag *d);
    /* Required. Opens the split ds->split (one that splits listed): reads
     * its client index, in no more memory than one rowid per client, and
     * prepares the statements of the calls below; *clients gets the number
     * of clients. No client data is read. */
    fvm_status (*open)(fvm_dataset *ds, int64_t *clients, fvm_diag *d);
    /* Optional (NULL: client 0, or none when there are no clients). The
     * client whose columns are the schema, or -1 when none has examples (the
     * schema then has no columns). */
    fvm_status (*schema_client)(fvm_dataset *ds, int64_t *first, fvm_diag *d);
    /* Required. Client i's id (kept in ds->id by ds_keep_id) and the number
     * of examples its row claims, without its data (0 <= i < ds->n). */
    fvm_status (*client)(fvm_dataset *ds, int64_t i, int64_t *examples, fvm_diag *d);
    /* Optional (NULL: the clients are in the order of their ids' bytes, as
     * SQLite's BINARY collation sorts them, and a binary search through
     * client finds one). The index of the client with this id, or -1
     * (also when the file cannot be read). */
    int64_t (*find)(fvm_dataset *ds, const void *id, size_t id_len);
    /* Required. Reads client i's row, or its rows of examples, and decodes
     * them into one ds_col per schema column in schema order (*cols, a
     * malloc'd array the caller frees with the columns), setting the schema
     * from this client when there is none yet (ds_set_schema); *n gets the
     * number of examples, checked against what the row claims. who gets the
     * client's description for messages (ds_who) as soon as its id is read.
     * The caller checks the columns against the schema. */
    fvm_status (*read)(fvm_dataset *ds, int64_t i, char who[DS_WHO], int64_t *n, ds_col **cols, fvm_diag *d);
    /* Optional (NULL: FVM_ERR_USAGE). The same as read, for a client's
     * stored data given from memory (no file behind the handle): for tests
     * and fuzzing. 'who' names the client in errors. */
    fvm_status (*decode)(fvm_dataset *ds, const char *who, const ds_raw *raw, int64_t *n, ds_col **cols, fvm_diag *d);
    /* Optional (NULL: nothing to free). Frees what ds->impl holds (its
     * statements before the database closes), not ds->impl itself. */
    void (*close)(fvm_dataset *ds);
};

/* The formats (dataset_fedjax.c, dataset_tff.c). */
extern const struct fvm_dataset_format_i fvm_dataset_format_fedjax;
extern const struct fvm_dataset_format_i fvm_dataset_format_tff;

/* An open dataset: what every format shares. Not thread-safe: use one handle
 * per thread. */
struct fvm_dataset {
    char *path;
    const struct fvm_dataset_format_i *fmt; /* NULL until the format is known */
    void *impl; /* the format's state (fmt->size bytes), owned */
    char *split; /* the split's name as fvm_dataset_splits lists it */
    sqlite3 *db; /* NULL for a handle made by ds_new (decoding from memory) */
    int64_t n; /* clients */
    bool schema; /* the columns are known (cols may still be empty: a TFF split without examples) */
    int ncols;
    fvm_column *cols; /* names malloc'd */
    ds_name *index; /* ncols entries, sorted by name */
    unsigned char *id; /* the last client id read (NUL-terminated copy) */
    size_t id_len, id_cap;
};

/* The most columns (FedJAX) or features (TFF) a dataset may have, and the
 * longest column name, in bytes. */
#define DS_MAX_COLUMNS 100000
#define DS_MAX_NAME 255
/* The most examples a client may have (what num_examples may claim). */
#define DS_MAX_EXAMPLES FVM_MAX_SEQ_LEN

void ds_col_clear(ds_col *c);
/* Clears the first n columns and frees the array (NULL is a no-op). */
void fvm_dataset_cols_free(ds_col *cols, int n);

/* "'id' (index i)" for messages: the id as escaped text (fvm_dataset_escape)
 * when it is UTF-8, else as hex; no index when i < 0. Writes into buf (at
 * most DS_WHO bytes). */
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
/* Records an error located at the file 'path' (its message cleaned by
 * ds_clean, at most 1023 bytes). Returns code. */
fvm_status fvm_dataset_verror(const char *path, fvm_diag *d, fvm_status code, const char *fmt, va_list ap);
/* The same at the dataset's file. */
fvm_status ds_err(const fvm_dataset *ds, fvm_diag *d, fvm_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An SQLite failure: "what: sqlite's message". FVM_ERR_FORMAT when the file
 * is not a database or is corrupt, FVM_ERR_NOMEM, else FVM_ERR_IO. */
fvm_status ds_sql_err(const fvm_dataset *ds, fvm_diag *d, int rc, const char *what);

/* Keeps a copy of a client id in ds->id. */
fvm_status ds_keep_id(fvm_dataset *ds, const void *id, size_t len, fvm_diag *d);

/* Appends a copy of [text, text+len) to s: -1 when out of memory. */
int fvm_dataset_names_push(ds_names *s, const char *text, size_t len);

/* Decides whether a split name listed by a format's query is listed:
 * FVM_OK with *yes, or an error (which ends the listing). st is the query,
 * on the name's row. */
typedef fvm_status (*fvm_dataset_split_filter)(fvm_dataset *ds, sqlite3_stmt *st, const char *name, size_t len,
                                               bool *yes, fvm_diag *d);
/* Appends to out the split names that 'sql' gives in its first column (rows
 * whose name is NULL skipped) and that keep accepts (NULL: every name).
 * SQLite's failures are errors "listing the splits". */
fvm_status fvm_dataset_list_splits(fvm_dataset *ds, const char *sql, fvm_dataset_split_filter keep, ds_names *out,
                                   fvm_diag *d);

/* Sets *yes when ds->db has a table named 'name'; an SQLite failure is an
 * error "reading the tables". */
fvm_status fvm_dataset_has_table(fvm_dataset *ds, const char *name, bool *yes, fvm_diag *d);
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
/* Sets the schema from a first client's columns (names copied; each checked
 * by ds_check_name, and a name given twice is an error naming the client
 * 'who'). ncols may be 0. With cols NULL, the caller sets the dtypes and
 * shapes. */
fvm_status ds_set_schema(fvm_dataset *ds, const char *who, int ncols, const char *const *names, const size_t *name_lens,
                         const ds_col *cols, fvm_diag *d);

/* A handle of format fmt for decoding clients from memory, with no file
 * behind it (path only names it in messages): for fuzzing the decoders and
 * for tests. The schema is set by the first client decoded. Close with
 * fvm_dataset_close. NULL when out of memory. */
fvm_dataset *ds_new(const char *path, const struct fvm_dataset_format_i *fmt);
/* Decodes one client's stored data from memory (fmt->decode) into a sequence
 * value (*out, owned by the caller), checked against the schema (set from
 * this client when there is none yet), as fvm_dataset_read does with a
 * client of the file. 'who' names the client in errors; *out is NULL on
 * error. */
fvm_status fvm_dataset_decode(fvm_dataset *ds, const char *who, const ds_raw *raw, fvm_value **out, fvm_diag *d);

/* The FedJAX table of a split: "federated_data" for NULL or "default", else
 * "federated_data_<split>". NULL (and an error) when the name is not 1-64
 * letters, digits or underscores. malloc'd. */
char *ds_fedjax_table(const char *split, const char *path, fvm_diag *d);

#endif
