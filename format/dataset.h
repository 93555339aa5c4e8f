/* dataset.h - federated datasets: FedJAX and TFF SQLite files, opened lazily, one client at a time.
 *
 * A federated dataset is a list of clients, each a sequence of examples; an
 * example is a struct of tensors whose fields are the dataset's columns. A
 * dataset is opened without reading any client's data: a client's examples
 * are read and decoded when asked for and owned by the caller, so memory
 * stays flat in the number of clients.
 *
 * Formats (told apart by their tables):
 * - FedJAX SQLite (read and write, fedvm's native format): table
 *   federated_data(client_id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL,
 *   num_examples INTEGER NOT NULL), clients in rowid order; data is the
 *   zlib-compressed msgpack of a map from column name to array, each array a
 *   msgpack ext of type 1 holding the msgpack tuple (shape, dtype name,
 *   C-order bytes). A split other than the default is kept by fedvm in a
 *   table of the same layout named federated_data_<split> (FedJAX sees only
 *   the default one). dtype names map to bool, u8, i32, i64, u32, f32, f64;
 *   numpy's fixed-width byte strings (S<n>, named "bytes<8n>") are u8 with a
 *   trailing axis of n, and FedJAX's ext type 4 (an array of bytes objects
 *   along the examples) is u8[L] per example; in the schema both lengths are
 *   -1. Any other dtype or ext type is an error naming it, the client and the
 *   column.
 * - TFF SQLite (read): tables examples(split_name, client_id,
 *   serialized_example_proto) and client_metadata(client_id, split_name,
 *   num_examples); one tf.train.Example per row. A split's clients are
 *   sorted(DISTINCT client_id), as TFF lists them; a client's examples are in
 *   rowid order. Every feature of the first client with examples is a
 *   column of rank 1, columns sorted by name: a float_list is f32[-1], an
 *   int64_list i64[-1], a bytes_list with one value u8[-1] (its bytes): TFF
 *   does not fix a list's length, which may differ between examples and
 *   between clients.
 *
 * Names from a file (columns, features, TFF splits) must be 1 to 255 bytes
 * of UTF-8 without NUL bytes, and are compared with their lengths; they are
 * escaped wherever printed (fvm_dataset_escape). Limits: 100,000 columns,
 * 2^31-1 examples per client, 4 GiB per array counting every non-zero dim.
 * The path must be a regular file.
 *
 * format/DATASETS.md describes both in full. In the code each format is one
 * set of functions behind an internal interface (struct fvm_dataset_format_i
 * in dataset_impl.h), listed in one table in dataset.c; what is common to
 * them (opening, splits, the schema, checking and building each client) is
 * written once there. A handle is not thread-safe: open one per thread. */
#ifndef FVM_DATASET_H
#define FVM_DATASET_H

#include "../vm/ir/tensor.h"
#include "../vm/ir/value.h"

typedef struct fvm_dataset fvm_dataset;

/* One column: its name and the dtype and shape of one example's value
 * (a dim is -1 when the file does not fix it: it may differ between
 * examples and between clients). */
typedef struct fvm_column {
    const char *name;
    fvm_dtype dtype;
    fvm_dims shape;
} fvm_column;

/* Opens the split 'split' of a dataset file (NULL: the default split, which
 * for TFF files must then be the only one; unknown splits are an error that
 * lists the file's splits; a FedJAX file's default split is also named
 * "default"). Reads the client index (no memory per client for FedJAX files
 * with contiguous rowids, else one rowid per client) and the column schema
 * (decoding the first client). Errors name the file, and the client and
 * column where they apply; a file that is not a SQLite database, lacks the
 * tables, or has corrupt rows is an error, never a crash: FVM_ERR_IO
 * (unreadable), FVM_ERR_FORMAT (not a dataset, corrupt data), FVM_ERR_NAME
 * (unknown split), FVM_ERR_TYPE (a column's dtype or shape). *out is NULL on
 * error. */
FVM_API fvm_status fvm_dataset_open(const char *path, const char *split, fvm_dataset **out, fvm_diag *d);
/* NULL is a no-op. */
FVM_API void fvm_dataset_close(fvm_dataset *ds);

/* "fedjax" or "tff". */
FVM_API const char *fvm_dataset_format(const fvm_dataset *ds);
/* The format's name for people: "FedJAX SQLite", "TFF SQLite". */
FVM_API const char *fvm_dataset_format_title(const fvm_dataset *ds);
/* The splits a file holds (malloc'd array of malloc'd names; free with
 * fvm_dataset_free_splits): for FedJAX "default" first, then the other
 * tables' splits by name; for TFF the split names, sorted. */
FVM_API fvm_status fvm_dataset_splits(const char *path, char ***out, int *n, fvm_diag *d);
FVM_API void fvm_dataset_free_splits(char **splits, int n);

FVM_API int64_t fvm_dataset_clients(const fvm_dataset *ds);
/* The columns (borrowed, valid until close); returns their number. */
FVM_API int fvm_dataset_columns(const fvm_dataset *ds, const fvm_column **cols);

/* The index of the column named 'name', or -1 (a binary search). */
FVM_API int fvm_dataset_column_find(const fvm_dataset *ds, const char *name);

/* Writes the name [name, name+len), read from a file, into buf (cap > 0
 * bytes, NUL-terminated) as printable text: UTF-8 characters as they are,
 * except that a backslash and both quotes get a backslash, \n \t \r stand
 * for themselves, other control characters and characters that reorder or
 * hide text are written \xHH (one byte) or \uHHHH, and bytes that are not
 * UTF-8 \xHH. A name longer than buf holds ends in "...". Returns buf. */
FVM_API char *fvm_dataset_escape(const void *name, size_t len, char *buf, size_t cap);

/* Client i's id (bytes, borrowed until the next call on ds) and its number
 * of examples, from the table (no decoding). FVM_ERR_USAGE when i is out of
 * range. */
FVM_API fvm_status fvm_dataset_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                                      fvm_diag *d);
/* The index of the client with this id, or -1. (FedJAX: an indexed lookup,
 * the id as a blob, then as text; TFF: a binary search over the sorted ids.) */
FVM_API int64_t fvm_dataset_find(fvm_dataset *ds, const void *id, size_t id_len);

/* Reads and decodes client i alone (any i, in any order): a new sequence
 * value (FVM_V_SEQ, owned by the caller) of structs whose fields are the
 * columns in order. When every column has one shape for all of the client's
 * examples, the sequence is stored by columns: a struct of one tensor per
 * column with a leading example axis; a column whose shape varies makes the
 * sequence a list of examples. A client whose data does not match the schema
 * is an error naming the client and the column; *out is then NULL. */
FVM_API fvm_status fvm_dataset_read(fvm_dataset *ds, int64_t i, fvm_value **out, fvm_diag *d);

/* Writing FedJAX SQLite files. The file is written under a temporary name
 * in the same directory (path.tmpXXXXXX) and renamed into place by
 * fvm_dataset_finish, so a failed or interrupted write never leaves a partial
 * file at path (an older file there stays until the rename). The msgpack of
 * each client is what FedJAX's msgpack_serialize writes for the same arrays
 * and zlib's level is zlib.compress's, so the same clients added in the same
 * order give a byte-identical file. */
typedef struct fvm_dataset_writer fvm_dataset_writer;

FVM_API fvm_status fvm_dataset_create(const char *path, fvm_dataset_writer **out, fvm_diag *d);
/* Adds one client to 'split' (NULL or "default": the default split; other
 * names 1 to 64 letters, digits or underscores). cols[k] (borrowed) holds
 * column names[k] for all the client's examples, with a leading example axis
 * of the same length in every column. The split's first client fixes the
 * column names, dtypes and per-example shapes; every later client must have
 * the same (in any order): FVM_ERR_TYPE otherwise. A client id given twice in
 * a split is FVM_ERR_NAME, a bad argument FVM_ERR_USAGE; after such a refusal
 * the writer can go on. */
FVM_API fvm_status fvm_dataset_add(fvm_dataset_writer *w, const char *split, const void *id, size_t id_len, int ncols,
                                   const char *const *names, const fvm_tensor *cols, fvm_diag *d);
/* A column of byte strings of any lengths, one per example: FedJAX's
 * ndarray of Python bytes objects (dtype object, as Shakespeare's snippets
 * and Stack Overflow's text), written as its msgpack ext type 4
 * (packb((shape, [bytes, ...]))) and read back as u8[?] per example.
 * Example i is bytes[offsets[i], offsets[i + 1]) (offsets[0] = 0, not
 * decreasing); all borrowed. */
typedef struct fvm_dataset_bytes {
    const char *name;
    int64_t n; /* examples */
    const int64_t *offsets; /* n + 1 */
    const uint8_t *bytes;
} fvm_dataset_bytes;

/* fvm_dataset_add with nb further columns of byte strings after the ncols
 * tensor columns (ncols may be 0; together at least one column, every
 * column with the same examples). The split's first client fixes which
 * columns are byte strings; the map holds the tensor columns first. */
FVM_API fvm_status fvm_dataset_add_bytes(fvm_dataset_writer *w, const char *split, const void *id, size_t id_len,
                                         int ncols, const char *const *names, const fvm_tensor *cols, int nb,
                                         const fvm_dataset_bytes *bcols, fvm_diag *d);
/* Commits and renames into place; frees w (also on error). */
FVM_API fvm_status fvm_dataset_finish(fvm_dataset_writer *w, fvm_diag *d);
/* Discards the temporary file; frees w. NULL is a no-op. */
FVM_API void fvm_dataset_abort(fvm_dataset_writer *w);

#endif
