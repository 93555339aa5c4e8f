/* figures.h - a round's figures (plain data): what a training round and the cross-device server's aggregation report, and what format/metrics.h writes as a metrics line. */
#ifndef FVM_FIGURES_H
#define FVM_FIGURES_H

#include <stdint.h>

#include "../ir/types.h"
#include "../ir/value.h"

/* The optional members of a round's line (bits of fvm_metrics_round.fields). */
enum {
    FVM_METRICS_TIMES = 1, /* "seconds", "eval_seconds" (when evaluated), "cpu_seconds" */
    FVM_METRICS_CLIENTS = 2, /* "clients" */
    FVM_METRICS_SAMPLED = 4, /* "sampled": the round's clients */
    FVM_METRICS_PRIVACY = 8, /* "epsilon", "delta": the privacy spent after the round */
};

/* One round's figures, all borrowed. */
typedef struct fvm_metrics_round {
    int64_t round;
    const fvm_value *train; /* next's metrics, of type train_type */
    const fvm_type *train_type;
    const fvm_value *eval; /* evaluate's result after the round, or NULL */
    const fvm_type *eval_type;
    unsigned fields; /* FVM_METRICS_*: which members below the line has */
    double seconds; /* wall time of the round (next and evaluate) */
    double eval_seconds; /* the part of it in evaluate */
    double cpu_seconds; /* CPU time of the process in the round */
    int64_t nclients; /* "clients" */
    const int64_t *clients; /* "sampled": nclients client indices */
    double epsilon, delta; /* "epsilon", "delta" (vm/runtime/privacy.h) */
} fvm_metrics_round;

#endif
