/* doc.h - a format-neutral document tree (what JSON and YAML both parse to), with the position of every node. */
#ifndef FVM_DOC_H
#define FVM_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "status.h"

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
    bool flow; /* writers: put this collection on one line */
    union {
        bool b;
        int64_t i;
        double r;
        struct {
            const char *s; /* NUL-terminated UTF-8 (may contain no NUL) */
            size_t len;
            char quote; /* '"' or '\'' when written quoted (the text starts a column later), else 0 */
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

/* The column of byte offset 'off' of a STRING node's value in its source
 * (through quotes and escapes), or the node's own column when unknown. */
FVM_API int fvm_doc_string_col(const fvm_doc *str, size_t off);

/* The integer a number node holds: an INT, or a REAL with a zero fraction
 * inside the range of int64 (2.0, -0.0, 1e3), as JSON Schema counts
 * integers. False for anything else (2.5, 1e300, nan, a string, NULL). */
FVM_API bool fvm_doc_integer(const fvm_doc *n, int64_t *out);

/* Member of an object by key, or NULL. */
FVM_API fvm_doc *fvm_doc_get(const fvm_doc *obj, const char *key);

/* Deep structural equality (ignores positions). */
FVM_API bool fvm_doc_equal(const fvm_doc *a, const fvm_doc *b);

/* Constructors for building trees to write (positions 0). NULL when out of memory. */
FVM_API fvm_doc *fvm_doc_new(fvm_arena *a, fvm_doc_kind kind);
FVM_API fvm_doc *fvm_doc_string(fvm_arena *a, const char *s);
FVM_API fvm_doc *fvm_doc_int(fvm_arena *a, int64_t v);
FVM_API fvm_doc *fvm_doc_real(fvm_arena *a, double v);
FVM_API fvm_doc *fvm_doc_bool(fvm_arena *a, bool v);
/* push appends to an ARRAY, set to an OBJECT (key copied; no duplicate check).
 * FVM_ERR_USAGE for the wrong kind, FVM_ERR_NOMEM when out of memory. They work
 * on parsed nodes as well as built ones: the child arrays of every collection
 * hold fvm_doc_capacity(n) slots, and a push into a full one doubles it. */
FVM_API fvm_status fvm_doc_push(fvm_arena *a, fvm_doc *arr, fvm_doc *item);
FVM_API fvm_status fvm_doc_set(fvm_arena *a, fvm_doc *obj, const char *key, fvm_doc *val);

/* Slots in the child arrays of a collection with n members: 4 while n <= 4,
 * then the smallest power of two >= n. Readers allocate this many. */
FVM_API size_t fvm_doc_capacity(size_t n);

/* Appends the RFC 6901 escaped form of a key to a pointer: "/a~1b". Arena string. */
FVM_API const char *fvm_pointer_join(fvm_arena *a, const char *base, const char *key);
FVM_API const char *fvm_pointer_index(fvm_arena *a, const char *base, size_t i);

/* Shortest decimal text that reads back to exactly v (as a double, or as a
 * float when as_f32). Writes at most 32 bytes including the NUL. NaN and
 * infinities give "nan", "inf", "-inf". */
FVM_API void fvm_format_real(char buf[32], double v, bool as_f32);

#endif
