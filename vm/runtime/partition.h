/* partition.h - splitting a labelled centralized dataset over clients: iid, label shards, Dirichlet label skew.
 *
 * The result assigns every example to exactly one client. Each client's
 * examples are listed in ascending index order (the source order), whatever
 * the scheme; everything random comes from the seed through Threefry streams
 * (rand.h), so the same inputs give the same partition on every run. */
#ifndef FVM_PARTITION_H
#define FVM_PARTITION_H

#include <stdint.h>

#include "../core/status.h"

typedef enum fvm_partition_kind {
    /* A random permutation cut into nclients parts whose sizes differ by at
     * most one (equal when nclients divides n). */
    FVM_PARTITION_IID,
    /* McMahan et al. (2017): examples sorted by label (ties in source order),
     * cut into shards * nclients shards of consecutive examples (sizes
     * differing by at most one), each client given 'shards' of them at
     * random. A client holds at most 'shards' labels when the shard size
     * divides every label's count. */
    FVM_PARTITION_SHARDS,
    /* Label skew: for each label, proportions over the clients drawn from
     * Dirichlet(alpha, ..., alpha) and that label's examples, in random order,
     * cut at the cumulative proportions (each cut rounded down). The whole draw
     * is repeated (up to 1000 times, each from a new stream) until every client
     * holds at least min_size examples. */
    FVM_PARTITION_DIRICHLET
} fvm_partition_kind;

typedef struct fvm_partition_spec {
    fvm_partition_kind kind;
    int64_t shards; /* SHARDS: shards per client (>= 1) */
    double alpha; /* DIRICHLET: concentration (> 0) */
    int64_t min_size; /* DIRICHLET: the least examples a client may get (>= 0) */
} fvm_partition_spec;

/* The smallest client a Dirichlet partition accepts unless told otherwise. */
#define FVM_PARTITION_MIN_SIZE 10

/* Parses "iid", "shards:K" (K >= 1) or "dirichlet:ALPHA" (ALPHA > 0, finite)
 * into *out (min_size set to FVM_PARTITION_MIN_SIZE). FVM_ERR_USAGE with a
 * message naming the spec when it is none of these. */
FVM_API fvm_status fvm_partition_parse(const char *text, fvm_partition_spec *out, fvm_diag *d);

/* Client k holds the examples index[offsets[k]] .. index[offsets[k+1] - 1]. */
typedef struct fvm_partition {
    int64_t nclients;
    int64_t *offsets; /* nclients + 1 entries, malloc'd */
    int64_t *index; /* n entries, malloc'd */
} fvm_partition;

/* Partitions n examples with labels[0..n-1] (each >= 0; the number of labels
 * is the largest plus one) over nclients >= 1 clients. FVM_ERR_USAGE when a
 * label is negative, nclients is out of [1, n], or the spec is invalid;
 * FVM_ERR_RUNTIME when the scheme cannot be met (more shards than examples;
 * no Dirichlet draw gives every client min_size examples: the message says
 * what to change); FVM_ERR_NOMEM. *out is owned by the caller (free with
 * fvm_partition_free) and zeroed on error. */
FVM_API fvm_status fvm_partition_make(const fvm_partition_spec *spec, const int32_t *labels, int64_t n,
                                      int64_t nclients, uint64_t seed, fvm_partition *out, fvm_diag *d);
/* Frees the arrays and zeroes *p; a zeroed partition is fine. */
FVM_API void fvm_partition_free(fvm_partition *p);

#endif
