/* plan_flow.h - a federated function flattened into one dataflow graph and cut into the stages of a round.
 *
 * The round forms (plan_mapreduce.c, plan_da.c) start from here. Calls of
 * federated functions are inlined (an inlined value is named after its call
 * sites: "round/outs" is 'outs' inside the call 'round'), and every `struct`
 * becomes a view of its members, so that `field` of a view is that member
 * and structs of placed values cost nothing. What remains are real
 * instructions: federated intrinsics, local ops and calls of local functions.
 *
 * Each value gets a stage, the part of a round that can compute it:
 *   LOCAL    depends on nothing (constants): computable anywhere;
 *   SERVER   at the server (or unplaced) before any aggregation;
 *   CLIENTS  at the clients;
 *   AFTER    at the server (or unplaced), after an aggregation.
 * A round has one exchange: the server broadcasts SERVER values, the
 * clients compute, aggregations bring CLIENTS values back as AFTER values.
 * A broadcast of an AFTER value (a second exchange) is an error naming both
 * instructions. Everything lives in the caller's arena. */
#ifndef FVM_PLAN_FLOW_H
#define FVM_PLAN_FLOW_H

#include "../ir/ir.h"
#include "../core/doc.h"
#include "plan.h"

enum { FVM_STAGE_LOCAL, FVM_STAGE_SERVER, FVM_STAGE_CLIENTS, FVM_STAGE_AFTER };

typedef struct fvm_fnode {
    const char *name; /* unique in the graph: call-site path + name */
    const fvm_instr *in; /* the instruction; NULL for a parameter or a view */
    int param; /* the planned function's parameter index, or -1 */
    bool view; /* a struct of args[] (names from type) */
    int nargs;
    int *args; /* node indices: the instruction's arguments or the view's members */
    const fvm_type *type;
    int stage;
    int agg; /* AFTER: an aggregation it depends on (for messages), else -1 */
} fvm_fnode;

typedef struct fvm_flow {
    const fvm_program *p;
    const fvm_func *f;
    int n, cap;
    fvm_fnode *nodes; /* in an order where arguments come first */
    int result;
    int client_state; /* 'next' of a program with initialize_client: the node of the clients' new
                         states ({C}@CLIENTS, the third field of the result), which stay at the
                         clients; -1 in a round without client state */
} fvm_flow;

/* The function a form is made of: fvm_plan_entry's, which must be federated. */
fvm_status fvm_form_entry(const fvm_program *p, const fvm_plan_opts *o, const fvm_func **f, fvm_diag *d);

/* Flattens checked federated function f of p. Errors (an op the forms do
 * not handle, a second exchange, a result at the clients) name the
 * instruction with its location and say what a round allows. The 'next'
 * of a program that keeps a state on each client (initialize_client) has a
 * third result field at the clients, their new states: out->client_state
 * (SPEC, "Client state"). */
fvm_status fvm_flow_build(fvm_arena *a, const fvm_program *p, const fvm_func *f, fvm_flow *out, fvm_diag *d);

/* Is node i an aggregation (an intrinsic from the clients to the server)? */
bool fvm_flow_is_aggregation(const fvm_flow *fl, int i);
/* Is node i a broadcast (federated_broadcast, or federated_value at the clients)? */
bool fvm_flow_is_broadcast(const fvm_flow *fl, int i);

/* The member type of a placed type, the type itself otherwise. */
const fvm_type *fvm_flow_unplaced(const fvm_type *t);

/* ---- writing generated functions ---------------------------------------- */

/* One generated function's body being written. Nodes are written on demand
 * (with their arguments first), each once, under their flow name; 'bound'
 * gives a node a name already defined in this function (a parameter or an
 * instruction written by hand). local: intrinsics become their local
 * counterparts (federated_map and federated_apply a call, federated_zip a
 * struct, federated_value its argument); broadcasts and aggregations must
 * then be bound. */
typedef struct fvm_fwriter {
    fvm_arena *a;
    const fvm_flow *fl;
    bool local;
    const char **bound; /* per node */
    fvm_doc *params; /* object: name -> type string */
    fvm_doc *body; /* array of instructions */
    fvm_diag *d;
    const fvm_loc *where; /* for errors: the planned function */
} fvm_fwriter;

fvm_status fvm_fwriter_init(fvm_fwriter *w, fvm_arena *a, const fvm_flow *fl, bool local, fvm_diag *d);
/* Adds a parameter; node >= 0 binds it to that node. */
fvm_status fvm_fwriter_param(fvm_fwriter *w, const char *name, const fvm_type *t, int node);
/* Writes node i (and what it needs); *name is its name in the function. */
fvm_status fvm_fwriter_node(fvm_fwriter *w, int i, const char **name);
/* Writes the round's result as the server computes it: the flow's result,
 * or in a round with client state the struct of its first two fields (the
 * server state and the metrics) without the clients' new states; *name is
 * its name in the function. */
fvm_status fvm_fwriter_result(fvm_fwriter *w, const char **name);
/* The type of what fvm_fwriter_result writes (placements kept). */
const fvm_type *fvm_flow_server_result(fvm_arena *a, const fvm_flow *fl);
/* Appends [name, op, attrs?, args...] (attrs may be NULL; args borrowed). */
fvm_status fvm_fwriter_instr(fvm_fwriter *w, const char *name, const char *op, fvm_doc *attrs, int nargs,
                             const char *const *args);
/* Appends name = struct(args) with the given field names (NULL: positional). */
fvm_status fvm_fwriter_struct(fvm_fwriter *w, const char *name, int n, const char *const *names,
                              const char *const *args);
/* Appends name = field(arg) by field name. */
fvm_status fvm_fwriter_field(fvm_fwriter *w, const char *name, const char *field, const char *arg);
/* Appends instructions making zeros of type t (tensors of known shape and
 * structs of them), the last one named name. */
fvm_status fvm_fwriter_zeros(fvm_fwriter *w, const char *name, const fvm_type *t);
/* The function object {doc, params, body, result}. */
fvm_doc *fvm_fwriter_finish(fvm_fwriter *w, const char *doc, const char *result);

/* n field names from a pattern with one %d: "b0", "b1", ... (NULL when out of memory). */
const char **fvm_flow_names(fvm_arena *a, int n, const char *fmt);

/* An attribute object with one string member (e.g. {"fn": "f"}). */
fvm_doc *fvm_attr1(fvm_arena *a, const char *key, const char *value);

/* ---- the form document ---------------------------------------------------- */

/* A round form as one self-contained program: p's type aliases and its
 * functions except the planned one, then the generated functions (an
 * object: name -> function), and a top-level "form" member describing the
 * parts. *out: the JSON text (malloc'd), which is loaded and checked
 * before it is returned, so a form is always a valid program. */
fvm_status fvm_form_write(fvm_arena *a, const fvm_flow *fl, const char *doc, fvm_doc *form, fvm_doc *generated,
                          char **out, size_t *len, fvm_diag *d);

#endif
