/* aggregation.h - what each aggregating intrinsic computes (aggregations.def), and the fixed tree clients combine in.
 *
 * An aggregation folds the clients' values into one server value. Its rule
 * (one row of aggregations.def) says how a client's arguments become an
 * update, how updates and partials combine, what the result is, and what
 * no clients give. Every place that computes an aggregation builds it from
 * that row: the interpreter and fused segments (vm/exec), the cross-device
 * server's staged merge, and the round forms' zero, accumulate, merge and
 * report (vm/transform/plan_mapreduce.c), so all of them give the same bits.
 *
 * The tree: clients 0..n-1 are cut into blocks of FVM_AGG_BLOCK consecutive
 * clients; each block is folded left to right, its first client's update
 * starting the partial; block partials merge pairwise, level by level (an
 * odd last partial carried up unchanged), until one remains. The order
 * depends only on n (vm/exec/aggregate.h runs it on every backend). */
#ifndef FVM_AGGREGATION_H
#define FVM_AGGREGATION_H

#include "ops.h"

/* Clients per block of the fixed tree. */
#define FVM_AGG_BLOCK 16

/* A client's update from its arguments (the LIFT column). */
typedef enum fvm_agg_lift_kind {
    FVM_AGG_LIFT_VALUE, /* the value itself */
    FVM_AGG_LIFT_WEIGHTED, /* <sum=value * weight, weight>, the weight cast to the value's dtype */
    FVM_AGG_LIFT_MODULO, /* every entry reduced modulo the secure sum's modulus (fvm_secure_of) */
    FVM_AGG_LIFT_BOUNDED, /* every entry checked to be in [0, max_input]: a run-time error otherwise */
    FVM_AGG_LIFT_USER /* accumulate(partial, value); a block starts from the zero */
} fvm_agg_lift_kind;

/* How updates and partials combine (the COMBINE column). */
typedef enum fvm_agg_combine_kind {
    FVM_AGG_COMBINE_ADD, /* elementwise add (identity -0.0, so adding it changes no bit) */
    FVM_AGG_COMBINE_MINIMUM, /* elementwise minimum (no identity) */
    FVM_AGG_COMBINE_MAXIMUM, /* elementwise maximum (no identity) */
    FVM_AGG_COMBINE_ADD_MODULO, /* add, modulo the secure sum's modulus */
    FVM_AGG_COMBINE_ADD_EXACT, /* add; a sum the dtype cannot hold is a run-time error */
    FVM_AGG_COMBINE_USER /* merge(partial, partial) */
} fvm_agg_combine_kind;

/* The result from the partial of all clients (the REPORT column). */
typedef enum fvm_agg_report_kind {
    FVM_AGG_REPORT_VALUE, /* the partial */
    FVM_AGG_REPORT_PER_CLIENT, /* the partial divided by the number of clients */
    FVM_AGG_REPORT_PER_WEIGHT, /* the partial's sum divided by its weight */
    FVM_AGG_REPORT_USER /* report(partial), or the partial when there is no report */
} fvm_agg_report_kind;

/* The result over no clients (the EMPTY column). */
typedef enum fvm_agg_empty_kind {
    FVM_AGG_EMPTY_ZEROS, /* zeros of the result type */
    FVM_AGG_EMPTY_UNDEFINED, /* a run-time error */
    FVM_AGG_EMPTY_REPORT_ZERO /* report(zero) */
} fvm_agg_empty_kind;

typedef struct fvm_agg_rule {
    int client_args; /* leading arguments that are {T}@CLIENTS; the rest are the server's */
    fvm_agg_lift_kind lift;
    fvm_agg_combine_kind combine;
    fvm_op combine_op; /* ADD, MINIMUM, MAXIMUM: the elementwise op (FVM_OP_ADD, ...); else FVM_OP_COUNT */
    fvm_agg_report_kind report;
    fvm_agg_empty_kind empty;
} fvm_agg_rule;

/* The rule of aggregating op (OPF_AGG), or NULL for any other op. Static storage. */
const fvm_agg_rule *fvm_agg_rule_of(fvm_op op);

/* Is the rule a secure sum's (federated_secure_sum_bitwidth, _modular_sum,
 * _sum)? Its clients' values are reduced or checked on their own (LIFT
 * MODULO or BOUNDED) before they are combined, so a deployment runs it by a
 * secure-aggregation protocol: the round forms keep it apart from the other
 * aggregations (vm/transform/plan_mr.h). */
bool fvm_agg_is_secure(const fvm_agg_rule *r);

/* What a secure sum does with each client's value and with two sums, from
 * its instruction's attributes: every leaf of its integer tensor tree alike. */
typedef struct fvm_secure {
    fvm_op op; /* FVM_OP_FEDERATED_SECURE_SUM_BITWIDTH, _MODULAR_SUM or _SUM */
    fvm_agg_lift_kind lift; /* MODULO or BOUNDED */
    uint64_t modulus; /* MODULO: 2^bitwidth or the modulus attribute; 0 stands for 2^64 */
    int64_t max_input; /* BOUNDED: the largest value a client may give; -1: each leaf dtype's largest */
} fvm_secure;

/* The secure sum of aggregating op with decoded attributes a (present bits
 * as decoded); .op is FVM_OP_COUNT for an op that is not a secure sum. */
fvm_secure fvm_secure_of(fvm_op op, const fvm_attrs *a);

/* The largest value every integer leaf of t holds (255 for u8, 2^31 - 1 for
 * i32, 2^32 - 1 for u32, 2^63 - 1 for i64), the least over the leaves; 0
 * when some leaf is not an integer tensor. A modulus may be this plus one
 * (every residue fits), a max_input this. */
uint64_t fvm_int_leaf_max(const fvm_type *t);

/* The widest modular sum (federated_secure_sum_bitwidth) every integer leaf
 * of t holds: the narrowest leaf's width in bits (8 for u8, 32 for i32 and
 * u32, 64 for i64); 0 when some leaf is not an integer tensor. A sum modulo
 * 2^width of a signed dtype is kept as two's complement (the wrapping sum). */
int fvm_modsum_bits(const fvm_type *t);

/* The mask of a sum modulo 2^bits, bits 1 to 64. */
static inline uint64_t fvm_modsum_mask(int64_t bits)
{
    return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

#endif
