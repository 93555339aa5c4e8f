/* plan_mr.h - the MapReduce form's parts, built once for the formats made of them (mapreduce, cross-device).
 *
 * fvm_mr_build flattens and stages a round (plan_flow.h), sorts its nodes
 * into server inputs, client inputs, broadcasts, aggregations and secure
 * sums, and writes the seven local parts of TFF's MapReduce form (prepare,
 * work, zero, accumulate, merge, report, update) as generated functions.
 * plan_mapreduce.c adds the round rewritten to run them; plan_xdev.c splits
 * them into a client phase and a server phase. In a round that keeps a
 * state on each client (plan_flow.h, client_state), the client's state is
 * one of work's inputs and its new state one more field of work's result,
 * 'client_state', which is never aggregated; update gives only the server
 * state and the metrics. Everything lives in the caller's arena. */
#ifndef FVM_PLAN_MR_H
#define FVM_PLAN_MR_H

#include "plan_flow.h"

enum {
    FVM_MR_PREPARE,
    FVM_MR_WORK,
    FVM_MR_ZERO,
    FVM_MR_ACCUMULATE,
    FVM_MR_MERGE,
    FVM_MR_REPORT,
    FVM_MR_UPDATE,
    FVM_MR_NPARTS
};

/* The role names of the parts ("prepare", ...), by FVM_MR_* index. */
extern const char *const fvm_mr_roles[FVM_MR_NPARTS];

/* The types the parts share (unplaced). */
typedef struct fvm_mr_types {
    const fvm_type *C; /* what prepare gives: <b0=..., ...>, one field per broadcast */
    const fvm_type *U; /* one client's update: <u0=..., ...>, one field per aggregation */
    const fvm_type *A; /* the accumulator <a0=..., ...> */
    const fvm_type *R; /* report's result <r0=..., ...> */
    const fvm_type *SEC; /* one client's inputs to the secure sums <s0=..., ...> */
    const fvm_type *SECR; /* the secure sums' results */
    const fvm_type *WORK; /* what a client sends: <updates=U, secure=SEC> */
    const fvm_type *CS; /* a client's state C (a round with client state), else NULL */
    const fvm_type *OUT; /* work's result: WORK, or <updates=U, secure=SEC, client_state=C> in a round
                            with client state (the client's new state stays at the client) */
} fvm_mr_types;

typedef struct fvm_mr {
    fvm_arena *a;
    const fvm_flow *fl;
    fvm_diag *d;
    int nserver, nclient, nbcast, nagg, nsec; /* sec: the secure sums (fvm_agg_is_secure) */
    int *server, *client, *bcast, *agg, *sec; /* node indices, in graph order */
    int *aggidx; /* per node: its index in agg */
    const char *part[FVM_MR_NPARTS]; /* generated function names "<fn>.<role>" */
    fvm_doc *funcs; /* the generated functions: name -> function */
    fvm_mr_types t;
} fvm_mr;

/* Builds the parts of checked federated function f of p into *m (and its
 * graph into *fl). Errors are the forms' refusals: located, with the reason. */
fvm_status fvm_mr_build(fvm_arena *a, const fvm_program *p, const fvm_func *f, fvm_flow *fl, fvm_mr *m, fvm_diag *d);

/* Writes into w (a federated function's body) the round's aggregations of
 * 'work', a {WORK}@CLIENTS value: one federated_aggregate with zero,
 * accumulate, merge and report, and the secure sums with their attributes.
 * Binds "@report" (R@SERVER) and "@secure" (SECR@SERVER); the getters it
 * needs are added to m->funcs. Without report, the federated_aggregate
 * stops at the accumulator, bound as "@acc" (A@SERVER): a block's partial. */
fvm_status fvm_mr_exchange(fvm_mr *m, fvm_fwriter *w, const char *work, bool report);

/* Writes into w the secure sums of 'values', a {T}@CLIENTS value whose
 * field "secure" holds the inputs <s0=..., ...> (work's result, or with
 * partials the partial sums of blocks of clients), each the source's secure
 * sum (federated_secure_sum_bitwidth, _modular_sum or _sum) with its bit
 * width, modulus or max_input (partials: no max_input, since a block's sum
 * may pass the clients' bound; the sum stays exact); binds "@secure"
 * (SECR@SERVER). The getters, "<getter>.<j>" of type t, are added to
 * m->funcs. */
fvm_status fvm_mr_secure_sums(fvm_mr *m, fvm_fwriter *w, const char *values, const fvm_type *t, const char *getter,
                              bool partials);

/* Adds to m->funcs the planned function rewritten to run the parts with
 * intrinsics only (the MapReduce form's round), under its own name. With
 * client state, the clients' new states are work's field 'client_state',
 * taken apart at the clients (federated_map of a getter) and returned as
 * the result's third field; the exchange gets <updates, secure>. */
fvm_status fvm_mr_round(fvm_mr *m);

/* The type of node i with its placement removed. */
const fvm_type *fvm_mr_node_type(const fvm_mr *m, int i);

#endif
