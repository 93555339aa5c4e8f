/* plan_xdev.c - an iterative process's round written as a cross-device plan: a client phase and a server phase (format/PLANS.md, "cross-device").
 *
 * The phases are the MapReduce form's parts (plan_mr.h), split by where
 * they run: the client program holds work and what it calls; the server
 * program holds initialize, prepare, an aggregation function (the form's
 * exchange: one federated_aggregate with zero, accumulate, merge and
 * report, and the secure sums, over the clients' updates) and update, as
 * 'result', and the aggregation in stages: a block's partial, merge and
 * combine. Each is a complete fedvm program, loaded and checked before the
 * plan is written. The configuration beside each program says what the
 * runtimes (xdev.h) bind to which parameter and which tensors the files
 * they exchange hold. A round that keeps a state on each client
 * (initialize_client) has the client's state as one more input of work and
 * its new state as one more field of work's result, which the device keeps
 * (client.state): the client program holds initialize_client too, and what
 * the server aggregates is only <updates, secure>. */
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "../ir/aggregation.h"
#include "../../format/doc_io.h"
#include "../ir/check.h"
#include "../ir/keys.h"
#include "passes.h"
#include "../../format/ir_read.h"
#include "../../format/ir_write.h"
#include "plan_form.h"
#include "plan_mr.h"
#include "../../format/safetensors.h"
#include "../../format/xdev_impl.h"

typedef struct xw {
    fvm_arena *a;
    fvm_diag *d;
    const fvm_program *p;
    const fvm_func *f, *init;
    fvm_flow fl;
    fvm_mr m;
    const char *aggregate; /* the generated aggregation function's name */
    const char *partial, *combine; /* the same in stages: a block's partial, the partials combined */
    const char *initialize; /* initialize's name in the server program: "<fn>.initialize" (a program
                               with a function 'initialize' must have 'next' too) */
    const fvm_func *init_client; /* initialize_client, in a round with client state; else NULL */
    const char *initialize_client; /* its name in the client program: "<fn>.initialize_client" */
} xw;

static fvm_status nomem(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

static fvm_doc *str(xw *x, const char *s)
{
    return fvm_doc_string(x->a, s);
}

/* obj[key] = val; false when out of memory (val NULL included). */
static bool put(xw *x, fvm_doc *obj, const char *key, fvm_doc *val)
{
    return obj && val && !fvm_doc_set(x->a, obj, key, val);
}

static fvm_doc *object(xw *x, bool flow)
{
    fvm_doc *o = fvm_doc_new(x->a, FVM_DOC_OBJECT);
    if (o)
        o->flow = flow;
    return o;
}

static fvm_doc *type_doc(xw *x, const fvm_type *t)
{
    const char *s = fvm_type_str(x->a, t, false);
    return s ? str(x, s) : NULL;
}

/* ---- what the plan refuses ------------------------------------------------- */

/* The server input kind of next's parameter i (one of the server's), or NULL
 * when the server of a plan has no such input. */
static const char *server_kind(const fvm_func *f, int i)
{
    if (i == 0)
        return "state";
    fvm_given g = fvm_given_param(f->param_names[i], f->param_types[i]);
    return g == FVM_GIVEN_KEY ? "round_key" : g == FVM_GIVEN_NUM_CLIENTS ? "num_clients" : NULL;
}

/* The client input kind of next's parameter i (one at the clients). */
static const char *client_kind(const xw *x, int i)
{
    fvm_given g = fvm_given_param(x->f->param_names[i], x->f->param_types[i]);
    return g == FVM_GIVEN_CLIENT_KEYS                                ? "client_key"
           : g == FVM_GIVEN_CLIENT_INDICES                           ? "client_index"
           : g == FVM_GIVEN_CLIENT_STATES && x->fl.client_state >= 0 ? "client_state"
                                                                     : "data";
}

/* The function must be the 'next' of an iterative process whose server
 * inputs are the state, the round key and the number of clients, and whose
 * client inputs are one value per client. */
static fvm_status check_round(xw *x)
{
    const fvm_func *f = x->f;
    if (strcmp(f->name, "next") || !x->init)
        return fvm_diag_add(x->d, FVM_ERR_USAGE, &f->loc,
                            "'%s' is not the 'next' of an iterative process (a program with 'initialize' and "
                            "'next'): a cross-device plan runs rounds that carry the server state from one to the "
                            "next; plan a single round with --to mapreduce",
                            f->name);
    fvm_status s = FVM_OK;
    for (int k = 0; k < x->m.nserver; k++) {
        int i = x->fl.nodes[x->m.server[k]].param;
        if (server_kind(f, i))
            continue;
        char buf[256];
        s = fvm_diag_add(x->d, FVM_ERR_PLACEMENT, &f->param_locs[i],
                         "'%s' (%s) is a server input other than the state, the round's 'key' and the number of "
                         "clients 'num_clients'; the server of a cross-device plan has only these: make it part of "
                         "the state",
                         f->param_names[i], fvm_type_format(f->param_types[i], true, buf, sizeof buf));
    }
    for (int k = 0; k < x->m.nclient; k++) {
        int i = x->fl.nodes[x->m.client[k]].param;
        const fvm_type *t = f->param_types[i];
        if (!t->u.fed.all_equal)
            continue;
        char buf[256];
        s = fvm_diag_add(x->d, FVM_ERR_PLACEMENT, &f->param_locs[i],
                         "'%s' (%s) is one value for all clients; a device reads only its own data ({T}@CLIENTS): "
                         "broadcast the value from the server state instead",
                         f->param_names[i], fvm_type_format(t, true, buf, sizeof buf));
    }
    return s;
}

/* ---- the tensors of the files exchanged ------------------------------------- */

/* The safetensors name of a part below prefix ("" at the root). */
static const char *join(xw *x, const char *prefix, const char *name)
{
    return *prefix ? fvm_arena_printf(x->a, "%s.%s", prefix, name) : name;
}

/* Appends {"name", "dtype", "shape"} for each tensor of t (named below
 * prefix; xdev_tensor_list, which the runtimes check the plan with) to list,
 * or refuses a part that is no tensor: what names the value, at loc. */
static fvm_status tensors(xw *x, fvm_doc *list, const char *prefix, const fvm_type *t, const char *what,
                          const fvm_loc *loc)
{
    const char *bad = NULL;
    const fvm_type *bad_type = NULL;
    fvm_status s = xdev_tensor_list(x->a, list, prefix, t, &bad, &bad_type);
    if (s == FVM_ERR_NOMEM)
        return nomem(x->d);
    if (s) {
        char buf[256];
        return fvm_diag_add(x->d, FVM_ERR_TYPE, loc,
                            "%s is written to safetensors files, which hold tensors only, and its part '%s' is %s",
                            what, bad, fvm_type_format(bad_type, true, buf, sizeof buf));
    }
    return FVM_OK;
}

/* {"tensors": [...]} of a value of type t under prefix (see tensors). */
static fvm_status tensor_list(xw *x, fvm_doc *obj, const char *prefix, const fvm_type *t, const char *what,
                              const fvm_loc *loc)
{
    fvm_doc *list = fvm_doc_new(x->a, FVM_DOC_ARRAY);
    if (!put(x, obj, "tensors", list))
        return nomem(x->d);
    return tensors(x, list, prefix, t, what, loc);
}

/* "'name' (op)" of flow node i. */
static const char *what_node(xw *x, const char *role, int i)
{
    const fvm_fnode *n = &x->fl.nodes[i];
    return fvm_arena_printf(x->a, "%s '%s' (%s)", role, n->name, fvm_op_table[n->in->op].name);
}

/* ---- the configuration ----------------------------------------------------- */

static fvm_status client_inputs(xw *x, fvm_doc *list)
{
    const fvm_func *f = x->f;
    for (int k = 0; k < x->m.nclient; k++) {
        int i = x->fl.nodes[x->m.client[k]].param;
        const fvm_type *t = f->param_types[i], *member = t->u.fed.member;
        const char *kind = client_kind(x, i);
        bool data = !strcmp(kind, "data");
        fvm_doc *e = object(x, true);
        if (!put(x, e, "param", str(x, f->param_names[i])) || !put(x, e, "kind", str(x, kind)) ||
            !put(x, e, "type", type_doc(x, t)))
            return nomem(x->d);
        bool oom = false;
        fvm_doc *cols = data ? xdev_columns(x->a, member, &oom) : NULL;
        if (oom || (cols && !put(x, e, "columns", cols)))
            return nomem(x->d);
        if (fvm_doc_push(x->a, list, e))
            return nomem(x->d);
    }
    return FVM_OK;
}

static fvm_status broadcasts(xw *x, fvm_doc *list)
{
    for (int j = 0; j < x->m.nbcast; j++) {
        int i = x->m.bcast[j];
        const fvm_fnode *n = &x->fl.nodes[i];
        const char *name = fvm_arena_printf(x->a, "b%d", j);
        fvm_doc *e = object(x, false);
        if (!put(x, e, "name", str(x, name)) || !put(x, e, "value", str(x, x->fl.nodes[n->args[0]].name)) ||
            !put(x, e, "instruction", str(x, n->name)) || fvm_doc_push(x->a, list, e))
            return nomem(x->d);
        FVM_TRY(tensor_list(x, e, name, fvm_mr_node_type(&x->m, n->args[0]), what_node(x, "the broadcast", i),
                            &n->in->loc));
    }
    return FVM_OK;
}

/* "sum", "weighted_mean", "aggregate": the intrinsic's name after "federated_". */
static const char *aggregation_name(fvm_op op)
{
    return fvm_op_table[op].name + strlen("federated_");
}

static fvm_status outputs(xw *x, fvm_doc *list)
{
    fvm_mr *m = &x->m;
    for (int k = 0; k < m->nagg + m->nsec; k++) {
        bool secure = k >= m->nagg;
        int i = secure ? m->sec[k - m->nagg] : m->agg[k];
        const fvm_fnode *n = &x->fl.nodes[i];
        const char *name = secure ? fvm_arena_printf(x->a, "s%d", k - m->nagg) : fvm_arena_printf(x->a, "u%d", k),
                   *prefix = fvm_arena_printf(x->a, "%s.%s", secure ? "secure" : "updates", name);
        fvm_doc *e = object(x, false);
        if (!put(x, e, "name", str(x, name)) ||
            !put(x, e, "aggregation", str(x, secure ? "secure_sum" : aggregation_name(n->in->op))) ||
            !put(x, e, "instruction", str(x, n->name)))
            return nomem(x->d);
        const fvm_type *t = fvm_mr_node_type(m, n->args[0]);
        if (secure) { /* the intrinsic, and its bit width (and modulus 2^bitwidth), modulus or max_input */
            const fvm_attrs *at = &n->in->a;
            if (!put(x, e, "op", str(x, fvm_op_table[n->in->op].name)))
                return nomem(x->d);
            if (n->in->op == FVM_OP_FEDERATED_SECURE_SUM_BITWIDTH) {
                int64_t bits = at->bitwidth;
                /* 2^63 and 2^64 do not fit an int64: written as (exact) reals */
                fvm_doc *modulus =
                    bits < 63 ? fvm_doc_int(x->a, INT64_C(1) << bits) : fvm_doc_real(x->a, ldexp(1.0, (int)bits));
                if (!put(x, e, "bitwidth", fvm_doc_int(x->a, bits)) || !put(x, e, "modulus", modulus))
                    return nomem(x->d);
            } else if (n->in->op == FVM_OP_FEDERATED_SECURE_MODULAR_SUM) {
                if (!put(x, e, "modulus", fvm_doc_int(x->a, at->modulus)))
                    return nomem(x->d);
            } else if ((at->present & A(MAX_INPUT)) && !put(x, e, "max_input", fvm_doc_int(x->a, at->max_input))) {
                return nomem(x->d);
            }
        } else if (fvm_agg_rule_of(n->in->op)->client_args == 2) { /* <value, weight> */
            if (!put(x, e, "value", str(x, join(x, prefix, "value"))) ||
                !put(x, e, "weight", str(x, join(x, prefix, "weight"))))
                return nomem(x->d);
            t = m->t.U->u.strct.elems[k];
        } else if (fvm_agg_rule_of(n->in->op)->lift == FVM_AGG_LIFT_USER) {
            const fvm_attrs *at = &n->in->a;
            if (!put(x, e, "accumulate", str(x, at->accumulate->name)) ||
                !put(x, e, "merge", str(x, at->merge->name)) ||
                (at->report && !put(x, e, "report", str(x, at->report->name))))
                return nomem(x->d);
        }
        if (fvm_doc_push(x->a, list, e))
            return nomem(x->d);
        FVM_TRY(tensor_list(x, e, prefix, t, what_node(x, secure ? "the secure sum's input to" : "the update of", i),
                            &n->in->loc));
    }
    return FVM_OK;
}

/* client.state: which input is the client's state and which field of
 * work's result its new state, the state's type and tensors, and the
 * function that makes a client's first state. */
static fvm_status client_state(xw *x, fvm_doc **out)
{
    const fvm_func *f = x->f;
    fvm_doc *e = *out = object(x, false);
    for (int k = 0; k < x->m.nclient; k++) {
        int i = x->fl.nodes[x->m.client[k]].param;
        if (!strcmp(client_kind(x, i), "client_state") && !put(x, e, "input", str(x, f->param_names[i])))
            return nomem(x->d);
    }
    if (!put(x, e, "output", str(x, "client_state")) || !put(x, e, "initialize", str(x, x->initialize_client)) ||
        !put(x, e, "type", type_doc(x, x->m.t.CS)))
        return nomem(x->d);
    return tensor_list(x, e, "", x->m.t.CS, "a client's state", &x->init_client->result_loc);
}

/* ---- the aggregation functions ----------------------------------------------- */

/* The partial aggregate of a block of clients: <acc=A, secure=SECR> (unplaced). */
static const fvm_type *partial_type(xw *x)
{
    const char *names[2] = {"acc", "secure"};
    const fvm_type *elems[2] = {x->m.t.A, x->m.t.SECR};
    return fvm_type_struct(x->a, 2, names, elems);
}

/* The aggregation of all updates, the round's exchange (report: the
 * accumulator reported, as "aggregate"), or the same in stages, first: the
 * partial of one block of clients (!report: the federated_aggregate without
 * report, and the block's secure sums, as "partial"). */
static fvm_status write_exchange(xw *x, bool report)
{
    fvm_mr *m = &x->m;
    const fvm_type *updates = fvm_type_fed(x->a, m->t.WORK, FVM_PL_CLIENTS, false);
    if (!updates)
        return nomem(x->d);
    const char *names[2] = {report ? "report" : "acc", "secure"}, *args[2] = {report ? "@report" : "@acc", "@secure"};
    const char *result = report ? "@aggregate" : "@partial";
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, x->a, &x->fl, false, x->d));
    FVM_TRY(fvm_fwriter_param(&w, "@work", updates, -1));
    FVM_TRY(fvm_mr_exchange(m, &w, "@work", report));
    FVM_TRY(fvm_fwriter_struct(&w, result, 2, names, args));
    const char *doc = report ? "Cross-device plan: aggregate. The clients' updates (work's results), in client index "
                               "order, combined as the round's aggregations: report's results and the secure sums."
                             : "Cross-device plan: partial. The updates of one block of consecutive clients of the "
                               "round, in client index order, folded from the zero (the accumulator, before report) "
                               "and their secure sums.";
    fvm_doc *fn = fvm_fwriter_finish(&w, doc, result);
    return put(x, m->funcs, report ? x->aggregate : x->partial, fn) ? FVM_OK : nomem(x->d);
}

/* ... then, once the blocks' accumulators are merged: report, and the
 * secure sums of the blocks' secure sums. */
static fvm_status write_combine(xw *x)
{
    fvm_mr *m = &x->m;
    const fvm_type *pt = partial_type(x), *partials = pt ? fvm_type_fed(x->a, pt, FVM_PL_CLIENTS, false) : NULL,
                   *acc = fvm_type_fed(x->a, m->t.A, FVM_PL_SERVER, false);
    if (!partials || !acc)
        return nomem(x->d);
    const char *names[2] = {"report", "secure"}, *args[2] = {"@report", "@secure"}, *a = "@acc";
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, x->a, &x->fl, false, x->d));
    FVM_TRY(fvm_fwriter_param(&w, "@acc", acc, -1));
    FVM_TRY(fvm_fwriter_param(&w, "@partials", partials, -1));
    FVM_TRY(fvm_fwriter_instr(&w, "@report", "federated_apply", fvm_attr1(x->a, "fn", m->part[FVM_MR_REPORT]), 1, &a));
    FVM_TRY(fvm_mr_secure_sums(m, &w, "@partials", pt, fvm_arena_printf(x->a, "%s.partial.secure", x->f->name), true));
    FVM_TRY(fvm_fwriter_struct(&w, "@combine", 2, names, args));
    fvm_doc *fn = fvm_fwriter_finish(&w,
                                     "Cross-device plan: combine. The accumulator of all blocks (their partials "
                                     "merged pairwise in block order) reported, and the secure sums of the blocks' "
                                     "partials: what aggregate gives.",
                                     "@combine");
    return put(x, m->funcs, x->combine, fn) ? FVM_OK : nomem(x->d);
}

/* ---- the two programs -------------------------------------------------------- */

/* Marks f and every function it names (fn, accumulate, then, ...), directly or not. */
static void mark(const fvm_program *q, const fvm_func *f, bool *keep)
{
    int idx = 0;
    while (idx < q->nfuncs && q->funcs[idx] != f)
        idx++;
    if (idx == q->nfuncs || keep[idx])
        return;
    keep[idx] = true;
    for (int k = 0; k < f->ninstrs; k++) {
        const fvm_instr *in = &f->instrs[k];
        for (int id = 0; id < FVM_ATTR_COUNT; id++)
            if (fvm_attr_table[id].kind == FVM_AK_FUNC && (in->a.present & (UINT64_C(1) << id))) {
                const fvm_func *callee = *(struct fvm_func *const *)((const char *)&in->a + fvm_attr_table[id].offset);
                if (callee)
                    mark(q, callee, keep);
            }
    }
}

/* A phase program's name for function name: 'initialize' and
 * 'initialize_client' are renamed (the checker takes a program with either
 * for an iterative process, which a phase is not). */
static const char *phase_name(const xw *x, const char *name)
{
    return !strcmp(name, "initialize")                                  ? x->initialize
           : !strcmp(name, "initialize_client") && x->initialize_client ? x->initialize_client
                                                                        : name;
}

/* Renames the references to functions 'initialize' and 'initialize_client'
 * in the attributes (fn, then, ...) of the function document fn
 * (phase_name). */
static fvm_status rename_initialize(xw *x, fvm_doc *fn)
{
    const fvm_doc *body = fvm_doc_get(fn, "body");
    for (size_t i = 0; body && i < body->u.coll.n; i++) {
        const fvm_doc *ins = body->u.coll.items[i];
        fvm_doc *attrs = ins->u.coll.n > 2 ? ins->u.coll.items[2] : NULL;
        if (!attrs || attrs->kind != FVM_DOC_OBJECT)
            continue;
        for (size_t k = 0; k < attrs->u.coll.n; k++) {
            fvm_attr_id id = fvm_attr_lookup(attrs->u.coll.keys[k]->u.str.s);
            const fvm_doc *v = attrs->u.coll.items[k];
            if (id < FVM_ATTR_COUNT && fvm_attr_table[id].kind == FVM_AK_FUNC && v->kind == FVM_DOC_STRING &&
                phase_name(x, v->u.str.s) != v->u.str.s &&
                !(attrs->u.coll.items[k] = str(x, phase_name(x, v->u.str.s))))
                return nomem(x->d);
        }
    }
    return FVM_OK;
}

/* The program made of the functions roots[0..n) need, from q (checked, one
 * module) and its canonical document full, 'initialize' renamed; with
 * privacy, full's "privacy" too (the server's, which reports (epsilon,
 * delta) for the rounds it aggregates). */
static fvm_status phase_program(xw *x, const fvm_program *q, const fvm_doc *full, const char *doc, bool privacy, int n,
                                const char *const *roots, fvm_doc **out)
{
    bool *keep = fvm_arena_array(x->a, (size_t)q->nfuncs + 1, sizeof *keep);
    fvm_doc *prog = object(x, false), *funcs = object(x, false);
    const fvm_doc *dp = privacy ? fvm_doc_get(full, "privacy") : NULL;
    if (!keep || !put(x, prog, "fedvm", fvm_doc_int(x->a, 1)) || !put(x, prog, "doc", str(x, doc)) ||
        (dp && !put(x, prog, "privacy", (fvm_doc *)dp)))
        return nomem(x->d);
    const fvm_doc *hparams = fvm_doc_get(full, "hparams"), *types = fvm_doc_get(full, "types"),
                  *written = fvm_doc_get(full, "functions");
    if ((hparams && !put(x, prog, "hparams", (fvm_doc *)hparams)) ||
        (types && !put(x, prog, "types", (fvm_doc *)types)))
        return nomem(x->d);
    for (int k = 0; k < n; k++)
        mark(q, fvm_program_func(q, roots[k]), keep);
    for (int i = 0; i < q->nfuncs; i++) {
        const char *name = q->funcs[i]->name;
        fvm_doc *fn = fvm_doc_get(written, name);
        if (!keep[i] || !fn) /* derived functions are derived again when the phase is checked */
            continue;
        FVM_TRY(rename_initialize(x, fn));
        if (!put(x, funcs, phase_name(x, name), fn))
            return nomem(x->d);
    }
    if (!put(x, prog, "functions", funcs))
        return nomem(x->d);
    *out = prog;
    return FVM_OK;
}

/* Loads and checks a phase's program, as the runtimes will. */
static fvm_status verify(xw *x, const fvm_doc *prog, const char *phase)
{
    char *text = NULL;
    size_t len = 0;
    fvm_diag sub = {0};
    fvm_program *q = NULL;
    fvm_status s = fvm_json_write(prog, &text, &len, &sub);
    if (s == FVM_OK)
        s = fvm_program_load_text(fvm_arena_printf(x->a, "plan.json#/%s/program", phase), text, len, &q, &sub);
    if (s == FVM_OK)
        s = fvm_compile(q, &sub);
    fvm_program_free(q);
    free(text);
    if (s) {
        fvm_diag_add(x->d, s, &x->f->loc,
                     "internal: the %s program of the plan of '%s' does not check (a fedvm bug; "
                     "please report it with the program):",
                     phase, x->f->name);
        fvm_diag_append(x->d, &sub);
    }
    fvm_diag_clear(&sub);
    return s;
}

/* ---- the document ------------------------------------------------------------ */

static fvm_status plan_doc(xw *x, const fvm_program *q, fvm_doc **out)
{
    fvm_mr *m = &x->m;
    const fvm_func *f = x->f;
    const char *src = f->module->path;
    fvm_doc *full = fvm_module_to_doc(x->a, q->root);
    fvm_doc *root = object(x, false), *client = object(x, false), *server = object(x, false);
    fvm_doc *cin = fvm_doc_new(x->a, FVM_DOC_ARRAY), *bc = fvm_doc_new(x->a, FVM_DOC_ARRAY),
            *outs = fvm_doc_new(x->a, FVM_DOC_ARRAY), *sin = fvm_doc_new(x->a, FVM_DOC_ARRAY);
    fvm_doc *state = object(x, false), *metrics = object(x, true);
    if (!full || !root || !client || !server || !cin || !bc || !outs || !sin || !state || !metrics)
        return nomem(x->d);
    FVM_TRY(client_inputs(x, cin));
    FVM_TRY(broadcasts(x, bc));
    FVM_TRY(outputs(x, outs));
    for (int k = 0; k < m->nserver; k++) {
        int i = x->fl.nodes[m->server[k]].param;
        fvm_doc *e = object(x, true);
        if (!put(x, e, "param", str(x, f->param_names[i])) || !put(x, e, "kind", str(x, server_kind(f, i))) ||
            !put(x, e, "type", type_doc(x, f->param_types[i])) || fvm_doc_push(x->a, sin, e))
            return nomem(x->d);
    }
    const fvm_type *st = fvm_flow_unplaced(x->init->result_type),
                   *mt = fvm_flow_unplaced(f->result_type->u.strct.elems[1]);
    if (!put(x, state, "type", type_doc(x, st)) || !put(x, metrics, "type", type_doc(x, mt)))
        return nomem(x->d);
    FVM_TRY(tensor_list(x, state, "", st, "the server state", &x->init->result_loc));
    fvm_doc *partial = object(x, false);
    if (!put(x, partial, "block", fvm_doc_int(x->a, FVM_AGG_BLOCK)) ||
        !put(x, partial, "function", str(x, x->partial)) || !put(x, partial, "merge", str(x, m->part[FVM_MR_MERGE])) ||
        !put(x, partial, "combine", str(x, x->combine)))
        return nomem(x->d);
    FVM_TRY(tensor_list(x, partial, "", partial_type(x), "the partial aggregate of a block of clients", &f->loc));

    fvm_doc *cstate = NULL;
    if (x->init_client)
        FVM_TRY(client_state(x, &cstate));
    const char *work = m->part[FVM_MR_WORK], *client_roots[2] = {work, "initialize_client"};
    const char *server_roots[] = {x->init->name, m->part[FVM_MR_PREPARE], x->aggregate, m->part[FVM_MR_UPDATE],
                                  x->partial,    m->part[FVM_MR_MERGE],   x->combine};
    fvm_doc *cprog, *sprog;
    FVM_TRY(phase_program(x, q, full,
                          fvm_arena_printf(x->a,
                                           "The client phase of the cross-device plan of '%s' of %s: work, "
                                           "run by each client on its data%s.",
                                           f->name, src,
                                           x->init_client ? " and its state (initialize_client: its first state)" : ""),
                          false, x->init_client ? 2 : 1, client_roots, &cprog));
    FVM_TRY(phase_program(x, q, full,
                          fvm_arena_printf(x->a,
                                           "The server phase of the cross-device plan of '%s' of %s: "
                                           "initialize, prepare, aggregate (or partial, merge and combine) and "
                                           "result.",
                                           f->name, src),
                          true, 7, server_roots, &sprog));
    FVM_TRY(verify(x, cprog, "client"));
    FVM_TRY(verify(x, sprog, "server"));
    const char *doc = fvm_arena_printf(x->a,
                                       "'%s' of %s as a cross-device plan (written by fedplan; "
                                       "format/PLANS.md). %s",
                                       f->name, src, x->p->root->doc ? x->p->root->doc : "");
    if (!put(x, root, "plan", fvm_doc_int(x->a, FVM_XDEV_VERSION)) || !put(x, root, "kind", str(x, "cross-device")) ||
        !put(x, root, "doc", str(x, doc)) || !put(x, root, "source", str(x, src)) ||
        !put(x, root, "function", str(x, f->name)) || !put(x, client, "work", str(x, work)) ||
        !put(x, client, "inputs", cin) || !put(x, client, "broadcast", bc) || !put(x, client, "outputs", outs) ||
        (cstate && !put(x, client, "state", cstate)) || !put(x, client, "program", cprog) ||
        !put(x, root, "client", client) || !put(x, server, "initialize", str(x, x->initialize)) ||
        !put(x, server, "prepare", str(x, m->part[FVM_MR_PREPARE])) ||
        !put(x, server, "aggregate", str(x, x->aggregate)) ||
        !put(x, server, "result", str(x, m->part[FVM_MR_UPDATE])) || !put(x, server, "partial", partial) ||
        !put(x, server, "inputs", sin) || !put(x, server, "state", state) || !put(x, server, "metrics", metrics) ||
        !put(x, server, "program", sprog) || !put(x, root, "server", server))
        return nomem(x->d);
    *out = root;
    return FVM_OK;
}

fvm_status fvm_plan_cross_device(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len, fvm_diag *d)
{
    *out = NULL;
    fvm_arena a = {0};
    xw x = {.a = &a, .d = d, .p = p, .init = fvm_program_func(p, "initialize")};
    fvm_status s = fvm_form_entry(p, o, &x.f, d);
    if (s == FVM_OK)
        s = fvm_mr_build(&a, p, x.f, &x.fl, &x.m, d);
    if (s == FVM_OK)
        s = check_round(&x);
    if (s == FVM_OK && x.fl.client_state >= 0 &&
        (!(x.init_client = fvm_program_func(p, "initialize_client")) ||
         !(x.initialize_client = fvm_arena_printf(&a, "%s.initialize_client", x.f->name))))
        s = nomem(d);
    if (s == FVM_OK && (!(x.aggregate = fvm_arena_printf(&a, "%s.aggregate", x.f->name)) ||
                        !(x.partial = fvm_arena_printf(&a, "%s.partial", x.f->name)) ||
                        !(x.combine = fvm_arena_printf(&a, "%s.combine", x.f->name)) ||
                        !(x.initialize = fvm_arena_printf(&a, "%s.initialize", x.f->name))))
        s = nomem(d);
    if (s == FVM_OK)
        s = fvm_mr_round(&x.m);
    if (s == FVM_OK)
        s = write_exchange(&x, true);
    if (s == FVM_OK)
        s = write_exchange(&x, false);
    if (s == FVM_OK)
        s = write_combine(&x);
    /* every part in one program, checked, from which each phase takes what it needs */
    char *text = NULL;
    size_t n = 0;
    fvm_doc *form = object(&x, true), *root = NULL;
    if (s == FVM_OK && !put(&x, form, "kind", str(&x, "cross-device")))
        s = nomem(d);
    if (s == FVM_OK)
        s = fvm_form_write(&a, &x.fl, NULL, form, x.m.funcs, &text, &n, d);
    fvm_program *q = NULL;
    if (s == FVM_OK && (s = fvm_program_load_text("plan.json", text, n, &q, d)) == FVM_OK)
        s = fvm_compile(q, d);
    free(text);
    if (s == FVM_OK)
        s = plan_doc(&x, q, &root);
    if (s == FVM_OK)
        s = fvm_json_write(root, out, len, d);
    fvm_program_free(q);
    fvm_arena_free(&a);
    return s;
}
