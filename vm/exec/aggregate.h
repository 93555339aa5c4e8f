/* aggregate.h - the fixed reduction tree every aggregation over clients uses, on every backend.
 *
 * The tree is vm/ir/aggregation.h's: clients 0..n-1 are cut into blocks of
 * FVM_AGG_BLOCK consecutive clients. Each block is accumulated left to right
 * (its first client starts the partial). The block partials are then merged
 * pairwise, level by level: (p0,p1), (p2,p3), ..., an odd last partial
 * carried up unchanged, until one remains. The order depends only on n,
 * never on timing or the backend, so floating-point results are
 * bit-identical everywhere.
 *
 * The same tree is built as the block partials arrive, in block order (a
 * binary counter: two subtrees of 2^j blocks merge as soon as both exist,
 * and what is left at the end merges from the right), so at most
 * log2(blocks) + 1 partials are held at once, not one per block: memory does
 * not grow with the number of clients. */
#ifndef FVM_AGGREGATE_H
#define FVM_AGGREGATE_H

#include "../ir/aggregation.h"
#include "exec.h"

typedef struct fvm_reducer {
    /* Folds client i into acc (NULL for the first client of a block) and
     * returns the new partial (a new reference; acc stays borrowed). */
    fvm_status (*step)(fvm_ctx *x, void *u, fvm_value *acc, int64_t i, fvm_value **out);
    /* Merges two partials (borrowed) into a new reference. */
    fvm_status (*merge)(fvm_ctx *x, void *u, fvm_value *a, fvm_value *b, fvm_value **out);
    void *u;
} fvm_reducer;

/* Reduces clients 0..n-1 (n >= 1) into *out. */
fvm_status fvm_tree_reduce(fvm_ctx *x, const fvm_reducer *r, int64_t n, fvm_value **out);

/* The block partial of clients [lo, hi) (the first stage, for backends that
 * compute blocks in parallel). */
fvm_status fvm_tree_block(fvm_ctx *x, const fvm_reducer *r, int64_t lo, int64_t hi, fvm_value **out);

/* The merge stage, fed one block partial at a time in block order. */
typedef struct fvm_tree_merger {
    fvm_reducer r; /* a copy; only merge is used */
    int depth; /* partials held */
    fvm_value *part[64]; /* part[i] merges blocks[i] consecutive blocks (owned) */
    int64_t blocks[64]; /* powers of two, decreasing: at most 63 are held */
} fvm_tree_merger;

/* An empty merger using r's merge (r is copied). */
void fvm_tree_merger_init(fvm_tree_merger *m, const fvm_reducer *r);
/* Adds the next block's partial (consumed, even on error). */
fvm_status fvm_tree_push(fvm_ctx *x, fvm_tree_merger *m, fvm_value *part);
/* The merge of every partial pushed (at least one) into *out; the merger is
 * empty afterwards, also on error. */
fvm_status fvm_tree_finish(fvm_ctx *x, fvm_tree_merger *m, fvm_value **out);
/* Releases the partials held (after an error elsewhere); the merger is empty. */
void fvm_tree_merger_clear(fvm_tree_merger *m);

/* The arithmetic of one aggregation instruction, its rule of
 * vm/ir/aggregations.def run on values (exec_federated.c), for running it
 * instruction-at-a-time or fused with the per-client work that feeds it
 * (phases.h). All values are borrowed unless stated.
 *
 * step folds one client into acc (NULL: the first client of a block):
 * vals[k] is the client's member of argument k when that argument is a
 * {T}@CLIENTS list, the argument itself otherwise; *out is the new partial. */
fvm_status fvm_agg_step(fvm_ctx *x, const fvm_instr *in, fvm_value *const *vals, fvm_value *acc, fvm_value **out);
/* Merges two partials. */
fvm_status fvm_agg_merge(fvm_ctx *x, const fvm_instr *in, fvm_value *a, fvm_value *b, fvm_value **out);
/* The result from the partial of all n >= 1 clients (acc is consumed). */
fvm_status fvm_agg_finish(fvm_ctx *x, const fvm_instr *in, int64_t n, fvm_value *acc, fvm_value **out);
/* The result over zero clients (args: the instruction's arguments). */
fvm_status fvm_agg_empty(fvm_ctx *x, const fvm_instr *in, fvm_value *const *args, fvm_value **out);

/* A secure sum's arithmetic (s: fvm_secure_of its instruction), on a value
 * and every leaf of it: with b NULL, a client's value a reduced modulo the
 * modulus (LIFT MODULO) or checked to be in [0, max_input] (BOUNDED); else
 * the sums a and b added (COMBINE ADD_MODULO or ADD_EXACT). A value out of
 * range, a sum its dtype cannot hold and values of different shapes are
 * run-time errors in d, without a location (the caller knows the client).
 * The interpreter's aggregations and the cross-device device's reduction of
 * its secure-sum inputs (vm/runtime/xdev_phases.c) both use it. a and b are
 * borrowed; *out is a new value. */
fvm_status fvm_secure_step(const fvm_secure *s, const fvm_value *a, const fvm_value *b, fvm_value **out, fvm_diag *d);

#endif
