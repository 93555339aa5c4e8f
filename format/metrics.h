/* metrics.h - training metrics files (JSON lines, one per round): a round's line written from its values, files cut back for a resumed run, files read into series.
 *
 * A metrics file holds one JSON object per line, one line per round:
 *   {"round": 3, "train": {"loss": 0.71, "examples": 5257.0}, "eval": {...}, "seconds": 0.02, ...}
 * Every number in a line, found through nested objects, is a point of the
 * series named by its dotted path: "train.loss", "eval.accuracy", "seconds",
 * "clients", and "train" for a bare scalar. Arrays ("sampled"), booleans,
 * nulls and strings are skipped, except the strings "nan", "inf" and "-inf"
 * that the JSON writer gives non-finite reals, which are those numbers.
 * "round" is the x of every point: an integer >= 0, required. A run starts
 * its lines with a header {"run": {"program": P, "seed": S, "hparams": {...}}}
 * (fvm_metrics_header): a line with "run" and no "round" is not a point. */
#ifndef FVM_METRICS_H
#define FVM_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "../vm/core/arena.h"
#include "../vm/core/doc.h"
#include "../vm/core/status.h"
#include "../vm/ir/types.h"
#include "../vm/ir/value.h"
#include "../vm/runtime/figures.h"

/* ---- writing ------------------------------------------------------------------ */

/* The round's line, the one writer of every metrics line ('fedvm run' prints
 * it and appends it to --metrics; 'fedvm server aggregate' and 'merge' do
 * the same): {"round": R, "train": METRICS, "eval": EVAL, "seconds": S,
 * "eval_seconds": E, "cpu_seconds": C, "clients": N, "sampled": [...]}, with
 * "eval" only when r->eval is set and the others only as r->fields asks, in
 * this order, on one line ending with a newline (doc_io.h's JSON writer;
 * seconds rounded to the microsecond). *out is malloc'd (the caller frees
 * it); FVM_ERR_NOMEM is the only error. With FVM_METRICS_PRIVACY,
 * "epsilon": E, "delta": D follow "eval" (or "train"), before "seconds". */
FVM_API fvm_status fvm_metrics_line(const fvm_metrics_round *r, char **out, size_t *len, fvm_diag *d);

/* The header line a run writes before its first round's (not when it
 * resumes): {"run": {"program": program, "seed": seed, "hparams": hparams}}
 * with hparams the values of the program's hyperparameters (ir_write.h's
 * fvm_hparams_doc; NULL: {}), on one line ending with a newline; *out
 * malloc'd (the caller frees it). */
FVM_API fvm_status fvm_metrics_header(const char *program, uint64_t seed, const fvm_doc *hparams, char **out,
                                      size_t *len, fvm_diag *d);

/* Cuts the metrics file at path back for a run resumed after round last:
 * keeps its lines up to the first one whose "round" is after last, drops
 * that one and everything after it (the resumed run writes those rounds
 * again) and an incomplete last line (the run was stopped while writing
 * it), and rewrites the file atomically when something was dropped. A line
 * that is not a JSON object with an integer "round" is kept. A missing file
 * is left missing; one that is not a regular file (a FIFO) or has more than
 * 1 GiB is an error naming it. */
FVM_API fvm_status fvm_metrics_cut(const char *path, int64_t last, fvm_diag *d);

/* ---- reading ------------------------------------------------------------------ */

/* One scalar over rounds: n points with increasing rounds, one per round. */
typedef struct fvm_series {
    const char *name; /* dotted path: "train.loss", "eval.accuracy", "seconds", "train", ... */
    size_t n;
    const int64_t *rounds; /* strictly increasing */
    const double *values; /* may be NaN or infinite */
} fvm_series;

/* A file's series. Everything lives in 'arena', freed by fvm_metrics_free. */
typedef struct fvm_metrics {
    const char *file; /* the display name given to the reader (copied) */
    size_t rounds; /* distinct rounds read */
    size_t nseries;
    fvm_series *series; /* in order of first appearance in the file */
    /* Lines are in round order when one run wrote the file. A run appended to
     * an older file starts again at a round already seen: each round then
     * takes its values from the last line that has it, whole (no mixing of
     * the two lines' metrics). */
    int restart_line; /* 0, or the first line whose round is not after the line before */
    size_t replaced; /* lines superseded by a later line of the same round */
    /* A process stopped while writing leaves an incomplete last line (no
     * newline, not valid JSON); it is skipped and its number kept here. */
    int partial_line;
    const char *header; /* the first header line's text ({"run": ...}), or NULL */
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
FVM_API fvm_status fvm_metrics_read(const char *path, fvm_metrics **out, fvm_diag *d);

/* The same over text already in memory; file names it in errors (borrowed
 * for the call, copied into the result). */
FVM_API fvm_status fvm_metrics_parse(const char *file, const char *text, size_t len, fvm_metrics **out, fvm_diag *d);

/* The series called name, or NULL. A file's series have distinct names;
 * finding one takes the same time however many there are. */
FVM_API const fvm_series *fvm_metrics_get(const fvm_metrics *m, const char *name);

/* Frees m and everything in it; NULL is a no-op. */
FVM_API void fvm_metrics_free(fvm_metrics *m);

#endif
