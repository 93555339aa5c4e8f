/* metrics.h - training metrics files (the JSON lines 'fedvm run --metrics' writes) read into series.
 *
 * A metrics file holds one JSON object per line, one line per round:
 *   {"round": 3, "train": {"loss": 0.71, "examples": 5257.0}, "eval": {...}, "seconds": 0.02, ...}
 * Every number in a line, found through nested objects, is a point of the
 * series named by its dotted path: "train.loss", "eval.accuracy", "seconds",
 * "clients", and "train" for a bare scalar. Arrays ("sampled"), booleans,
 * nulls and strings are skipped, except the strings "nan", "inf" and "-inf"
 * that the JSON writer gives non-finite reals, which are those numbers.
 * "round" is the x of every point: an integer >= 0, required. */
#ifndef FVM_METRICS_H
#define FVM_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "../vm/core/arena.h"
#include "../vm/core/status.h"

/* One scalar over rounds: n points with increasing rounds, one per round. */
typedef struct fvm_series {
    const char *name;      /* dotted path: "train.loss", "eval.accuracy", "seconds", "train", ... */
    size_t n;
    const int64_t *rounds; /* strictly increasing */
    const double *values;  /* may be NaN or infinite */
} fvm_series;

/* A file's series. Everything lives in 'arena', freed by fvm_metrics_free. */
typedef struct fvm_metrics {
    const char *file;   /* the display name given to the reader (copied) */
    size_t rounds;      /* distinct rounds read */
    size_t nseries;
    fvm_series *series; /* in order of first appearance in the file */
    /* Lines are in round order when one run wrote the file. A run appended to
     * an older file starts again at a round already seen: each round then
     * takes its values from the last line that has it, whole (no mixing of
     * the two lines' metrics). */
    int restart_line;   /* 0, or the first line whose round is not after the line before */
    size_t replaced;    /* lines superseded by a later line of the same round */
    /* A process stopped while writing leaves an incomplete last line (no
     * newline, not valid JSON); it is skipped and its number kept here. */
    int partial_line;
    fvm_arena arena;
    /* The series by name, for fvm_metrics_get (internal): nslots (a power of
     * two, at least twice nseries) slots, each 0 or a series index + 1,
     * malloc'd. */
    size_t nslots;
    size_t *slots;
} fvm_metrics;

/* Reads the metrics file at path (see above). *out is the caller's to free
 * with fvm_metrics_free; NULL on error. Errors carry file:line:col:
 * FVM_ERR_IO when unreadable, FVM_ERR_SYNTAX for a line that is not JSON,
 * FVM_ERR_FORMAT for a line that is not an object or lacks an integer
 * "round" >= 0, and for a file with no usable rows (no lines, or no numbers
 * besides the rounds). */
fvm_status fvm_metrics_read(const char *path, fvm_metrics **out, fvm_diag *d);

/* The same over text already in memory; file names it in errors (borrowed
 * for the call, copied into the result). */
fvm_status fvm_metrics_parse(const char *file, const char *text, size_t len, fvm_metrics **out, fvm_diag *d);

/* The series called name, or NULL. A file's series have distinct names;
 * finding one takes the same time however many there are. */
const fvm_series *fvm_metrics_get(const fvm_metrics *m, const char *name);

/* Frees m and everything in it; NULL is a no-op. */
void fvm_metrics_free(fvm_metrics *m);

#endif
