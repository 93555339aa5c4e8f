/* doc.h - a format-neutral document tree (what JSON and YAML both parse to), with the position of every node. */
#ifndef FVM_DOC_H
#define FVM_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../vm/arena.h"
#include "../vm/status.h"

typedef enum fvm_doc_kind {
    FVM_DOC_NULL,
    FVM_DOC_BOOL,
    FVM_DOC_INT,
    FVM_DOC_REAL,
    FVM_DOC_STRING,
    FVM_DOC_ARRAY,
    FVM_DOC_OBJECT
} fvm_doc_kind;

typedef struct fvm_doc fvm_doc;

/* A node. Nodes, strings and child arrays all live in one arena. Object members
 * keep their order in the source; keys[i] are STRING nodes (with positions).
 * A YAML alias makes a node shared by several parents (the tree is then a DAG). */
struct fvm_doc {
    fvm_doc_kind kind;
    int line, col; /* 1-based; col counts code points */
    bool flow;     /* writers: put this collection on one line */
    union {
        bool b;
        int64_t i;
        double r;
        struct {
            const char *s; /* NUL-terminated UTF-8 (may contain no NUL) */
            size_t len;
            char quote;      /* '"' or '\'' when written quoted (the text starts a column later), else 0 */
            const char *raw; /* the source text between the quotes when escapes make it differ
                              * from s; "" when it cannot be mapped (multi-line); NULL when equal */
        } str;
        struct {
            size_t n;
            fvm_doc **items;
            fvm_doc **keys; /* OBJECT only */
        } coll;
    } u;
};

/* The source a document came from, for error locations. */
typedef struct fvm_doc_src {
    const char *file; /* display name, borrowed */
    const char *text;
    size_t len;
} fvm_doc_src;

/* Parse JSON text (jansson). On error records a FVM_ERR_SYNTAX with file:line:col
 * in d and returns it. Duplicate keys are errors; nesting deeper than
 * FVM_MAX_DEPTH collections is FVM_ERR_LIMIT. *out lives in arena a. */
fvm_status fvm_json_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d);

/* Parse YAML text (libyaml, UTF-8, exactly one document) into the same tree.
 * Plain scalars are resolved by YAML 1.2's core schema (null, true/false, ints,
 * floats incl. .inf/.nan; see yaml_core.h); quoted and block scalars are
 * strings. Tags: !!str, !!int, !!float, !!bool, !!null, !!map, !!seq (either
 * form) and the non-specific "!"; any other tag is FVM_ERR_FORMAT. An alias
 * shares its anchored node (the tree becomes a DAG); the size with aliases
 * expanded is limited to FVM_MAX_DOC_NODES and the nesting, also through
 * aliases, to FVM_MAX_DEPTH collections (FVM_ERR_LIMIT). FVM_ERR_SYNTAX for bad
 * YAML or UTF-8 and undefined aliases; FVM_ERR_CYCLE for an alias inside its
 * own anchor; FVM_ERR_FORMAT for no or several documents, keys that are not
 * strings, duplicate keys, ints outside int64, NUL in a string. "<<" is an
 * ordinary key (no YAML 1.1 merge). Errors carry file:line:col. */
fvm_status fvm_yaml_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d);

/* Writers (output malloc'd and NUL-terminated; caller frees; *out is NULL on
 * error; out_len may be NULL). A collection with 'flow' set is written on one
 * line, and so is everything inside it ([a, b] / {"k": v} in JSON, [a, b] /
 * {k: v} in YAML); others one member per line, indented by two spaces. Empty
 * collections are [] and {}. Reals use fvm_format_real; non-finite reals
 * become the strings "nan", "inf", "-inf" in JSON (readers accept those
 * wherever a float is expected) and .nan/.inf/-.inf in YAML. JSON escapes
 * U+0085, U+2028 and U+2029 too. YAML strings that would read back as
 * something else (true, 12, null, ~, "", yes/no/on/off, "{T}@CLIENTS", " x",
 * multi-line text, ...) are double-quoted. Both end with a newline. A shared
 * node is written at every reference. The tree is checked first: FVM_ERR_USAGE
 * for a NULL node, a non-string key, a string that is not UTF-8 or holds a
 * NUL; FVM_ERR_LIMIT past FVM_MAX_DEPTH or FVM_MAX_DOC_NODES. Anything the
 * readers return can be written and reads back fvm_doc_equal (from JSON, bar
 * non-finite reals, which come back as the strings above). */
fvm_status fvm_json_write(const fvm_doc *doc, char **out, size_t *out_len, fvm_diag *d);
fvm_status fvm_yaml_write(const fvm_doc *doc, char **out, size_t *out_len, fvm_diag *d);

/* Parse by file name: ".yaml"/".yml" use YAML, everything else JSON. */
fvm_status fvm_doc_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d);

/* The largest program, value (--arg @FILE), metrics file or list fedvm reads. */
#define FVM_MAX_TEXT_FILE ((1ull << 31) - 1)

/* Read a whole file into a malloc'd NUL-terminated buffer (caller frees): a
 * regular file of at most FVM_MAX_TEXT_FILE bytes (file.h's fvm_file_read;
 * a FIFO, a device or a directory is refused by name). */
fvm_status fvm_read_file(const char *path, char **out_text, size_t *out_len, fvm_diag *d);

/* The column of byte offset 'off' of a STRING node's value in its source
 * (through quotes and escapes), or the node's own column when unknown. */
int fvm_doc_string_col(const fvm_doc *str, size_t off);

/* The integer a number node holds: an INT, or a REAL with a zero fraction
 * inside the range of int64 (2.0, -0.0, 1e3), as JSON Schema counts
 * integers. False for anything else (2.5, 1e300, nan, a string, NULL). */
bool fvm_doc_integer(const fvm_doc *n, int64_t *out);

/* Member of an object by key, or NULL. */
fvm_doc *fvm_doc_get(const fvm_doc *obj, const char *key);

/* Deep structural equality (ignores positions). */
bool fvm_doc_equal(const fvm_doc *a, const fvm_doc *b);

/* Constructors for building trees to write (positions 0). NULL when out of memory. */
fvm_doc *fvm_doc_new(fvm_arena *a, fvm_doc_kind kind);
fvm_doc *fvm_doc_string(fvm_arena *a, const char *s);
fvm_doc *fvm_doc_int(fvm_arena *a, int64_t v);
fvm_doc *fvm_doc_real(fvm_arena *a, double v);
fvm_doc *fvm_doc_bool(fvm_arena *a, bool v);
/* push appends to an ARRAY, set to an OBJECT (key copied; no duplicate check).
 * FVM_ERR_USAGE for the wrong kind, FVM_ERR_NOMEM when out of memory. They work
 * on parsed nodes as well as built ones: the child arrays of every collection
 * hold fvm_doc_capacity(n) slots, and a push into a full one doubles it. */
fvm_status fvm_doc_push(fvm_arena *a, fvm_doc *arr, fvm_doc *item);
fvm_status fvm_doc_set(fvm_arena *a, fvm_doc *obj, const char *key, fvm_doc *val);

/* Slots in the child arrays of a collection with n members: 4 while n <= 4,
 * then the smallest power of two >= n. Readers allocate this many. */
size_t fvm_doc_capacity(size_t n);

/* Appends the RFC 6901 escaped form of a key to a pointer: "/a~1b". Arena string. */
const char *fvm_pointer_join(fvm_arena *a, const char *base, const char *key);
const char *fvm_pointer_index(fvm_arena *a, const char *base, size_t i);

/* Shortest decimal text that reads back to exactly v (as a double, or as a
 * float when as_f32). Writes at most 32 bytes including the NUL. NaN and
 * infinities give "nan", "inf", "-inf". */
void fvm_format_real(char buf[32], double v, bool as_f32);

#endif
