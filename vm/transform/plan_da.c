/* plan_da.c - a round in TFF's Distribute-Aggregate form (format/PLANS.md, "distribute-aggregate").
 *
 * From the staged graph (plan_flow.h) of the planned function F, five
 * federated functions, each at one placement:
 *   F.server_prepare(server inputs)               -> <broadcast=<b0@SERVER,...>, intermediate=<...>>
 *   F.server_to_client_broadcast(broadcast)       -> <c0@CLIENTS,...>    intrinsics only
 *   F.client_work(client inputs, context)         -> <v0={..}@CLIENTS, w0, ...>
 *   F.client_to_server_aggregation(intermediate, updates) -> <r0@SERVER,...>  intrinsics only
 *   F.server_result(intermediate, aggregates)     -> F's result
 * and F rewritten as the five calls in order. The instructions are F's own
 * (same ops, same attributes), only regrouped, so the form computes F's
 * values bit for bit. The intermediate state carries the server values that
 * the result needs from before the exchange (and federated_aggregate's
 * zeros), so server_result never reads the server inputs again. */
#include <string.h>

#include "../ir/aggregation.h"
#include "plan_flow.h"
#include "plan_form.h"

enum { PREPARE, BROADCAST, WORK, AGGREGATE, RESULT, NPARTS };
static const char *const role[] = {"server_prepare", "server_to_client_broadcast", "client_work",
                                   "client_to_server_aggregation", "server_result"};

typedef struct da {
    fvm_arena *a;
    const fvm_flow *fl;
    fvm_diag *d;
    int nserver, nclient, nbcast, nagg, ninter;
    int *server, *client, *bcast, *agg, *inter; /* node indices */
    int *inter_of; /* per node: its index in inter, or -1 */
    int nupdates;
    const char **update_names; /* client_work's result fields */
    const char *part[NPARTS];
    fvm_doc *funcs;
} da;

static fvm_status nomem(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

static const char *str(da *m, const char *fmt, int i)
{
    return fvm_arena_printf(m->a, fmt, i);
}

static void mark(da *m, int i)
{
    if (m->inter_of[i] < 0) {
        m->inter_of[i] = m->ninter;
        m->inter[m->ninter++] = i;
    }
}

/* The server values (and federated_aggregate zeros) the post-exchange part needs. */
static void need(da *m, int i, bool *seen)
{
    if (seen[i])
        return;
    seen[i] = true;
    const fvm_fnode *n = &m->fl->nodes[i];
    if (fvm_flow_is_aggregation(m->fl, i)) { /* its arguments past the clients' are the server's */
        for (int k = fvm_agg_rule_of(n->in->op)->client_args; k < n->nargs; k++)
            mark(m, n->args[k]);
        return;
    }
    if (!n->view && n->stage == FVM_STAGE_SERVER) {
        mark(m, i);
        return;
    }
    for (int k = 0; k < n->nargs; k++)
        need(m, n->args[k], seen);
}

static fvm_status classify(da *m)
{
    const fvm_flow *fl = m->fl;
    size_t n = (size_t)fl->n + 1;
    m->server = fvm_arena_array(m->a, n, sizeof(int));
    m->client = fvm_arena_array(m->a, n, sizeof(int));
    m->bcast = fvm_arena_array(m->a, n, sizeof(int));
    m->agg = fvm_arena_array(m->a, n, sizeof(int));
    m->inter = fvm_arena_array(m->a, n, sizeof(int));
    m->inter_of = fvm_arena_array(m->a, n, sizeof(int));
    bool *seen = fvm_arena_array(m->a, n, sizeof(bool));
    m->update_names = fvm_arena_array(m->a, 2 * n, sizeof(char *));
    if (!m->server || !m->client || !m->bcast || !m->agg || !m->inter || !m->inter_of || !seen || !m->update_names)
        return nomem(m->d);
    for (int i = 0; i < fl->n; i++) {
        const fvm_fnode *x = &fl->nodes[i];
        m->inter_of[i] = -1;
        if (x->param >= 0)
            *(x->stage == FVM_STAGE_CLIENTS ? &m->client[m->nclient++] : &m->server[m->nserver++]) = i;
        else if (fvm_flow_is_broadcast(fl, i))
            m->bcast[m->nbcast++] = i;
        else if (fvm_flow_is_aggregation(fl, i))
            m->agg[m->nagg++] = i;
    }
    if (m->nagg == 0)
        return fvm_diag_add(m->d, FVM_ERR_PLACEMENT, &fl->f->loc,
                            "'%s' aggregates nothing from the clients, so it has no round to put in a form",
                            fl->f->name);
    if (fl->client_state < 0) {
        need(m, fl->result, seen);
    } else { /* the clients' new states are client_work's, not the server's */
        need(m, fl->nodes[fl->result].args[0], seen);
        need(m, fl->nodes[fl->result].args[1], seen);
    }
    for (int i = 0; i < m->nagg; i++)
        need(m, m->agg[i], seen);
    return FVM_OK;
}

static const fvm_type *struct_of(da *m, int n, const char *const *names, const int *nodes, bool args0)
{
    const fvm_type **elems = fvm_arena_array(m->a, (size_t)n + 1, sizeof *elems);
    if (!elems || !names)
        return NULL;
    for (int k = 0; k < n; k++) {
        int i = args0 ? m->fl->nodes[nodes[k]].args[0] : nodes[k];
        elems[k] = m->fl->nodes[i].type;
    }
    return fvm_type_struct(m->a, n, names, elems);
}

static fvm_status add_func(da *m, int part, fvm_fwriter *w, const char *doc, const char *result)
{
    fvm_doc *fn = fvm_fwriter_finish(w, doc, result);
    return fn && !fvm_doc_set(m->a, m->funcs, m->part[part], fn) ? FVM_OK : nomem(m->d);
}

/* Binds every intermediate node to a field of the parameter "@intermediate". */
static fvm_status bind_intermediate(da *m, fvm_fwriter *w, const fvm_type *t)
{
    FVM_TRY(fvm_fwriter_param(w, "@intermediate", t, -1));
    for (int k = 0; k < m->ninter; k++) {
        const char *name = str(m, "@intermediate/i%d", k);
        FVM_TRY(fvm_fwriter_field(w, name, str(m, "i%d", k), "@intermediate"));
        w->bound[m->inter[k]] = name;
    }
    return FVM_OK;
}

typedef struct da_types {
    const fvm_type *broadcast, *context, *inter, *updates, *aggregates;
} da_types;

static fvm_status types_of(da *m, da_types *t)
{
    t->broadcast = struct_of(m, m->nbcast, fvm_flow_names(m->a, m->nbcast, "b%d"), m->bcast, true);
    t->context = struct_of(m, m->nbcast, fvm_flow_names(m->a, m->nbcast, "c%d"), m->bcast, false);
    t->inter = struct_of(m, m->ninter, fvm_flow_names(m->a, m->ninter, "i%d"), m->inter, false);
    t->aggregates = struct_of(m, m->nagg, fvm_flow_names(m->a, m->nagg, "r%d"), m->agg, false);
    int *un = fvm_arena_array(m->a, 2 * (size_t)m->nagg + 1, sizeof *un);
    if (!un)
        return nomem(m->d);
    for (int i = 0; i < m->nagg; i++) {
        const fvm_fnode *g = &m->fl->nodes[m->agg[i]];
        for (int k = 0; k < fvm_agg_rule_of(g->in->op)->client_args; k++) {
            un[m->nupdates] = g->args[k];
            m->update_names[m->nupdates++] = str(m, k ? "w%d" : "v%d", i);
        }
    }
    t->updates = struct_of(m, m->nupdates, m->update_names, un, false);
    m->update_names[m->nupdates] = "client_state"; /* client_work's last field in a round with client state */
    return t->broadcast && t->context && t->inter && t->aggregates && t->updates ? FVM_OK : nomem(m->d);
}

static fvm_status write_prepare(da *m, const da_types *t)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, false, m->d));
    const fvm_func *f = m->fl->f;
    for (int k = 0; k < m->nserver; k++) {
        int i = m->server[k];
        FVM_TRY(fvm_fwriter_param(&w, f->param_names[m->fl->nodes[i].param], m->fl->nodes[i].type, i));
    }
    const char **b = fvm_arena_array(m->a, (size_t)m->nbcast + 1, sizeof *b),
               **in = fvm_arena_array(m->a, (size_t)m->ninter + 1, sizeof *in);
    if (!b || !in)
        return nomem(m->d);
    for (int j = 0; j < m->nbcast; j++)
        FVM_TRY(fvm_fwriter_node(&w, m->fl->nodes[m->bcast[j]].args[0], &b[j]));
    for (int k = 0; k < m->ninter; k++)
        FVM_TRY(fvm_fwriter_node(&w, m->inter[k], &in[k]));
    FVM_TRY(fvm_fwriter_struct(&w, "@broadcast", m->nbcast, fvm_flow_names(m->a, m->nbcast, "b%d"), b));
    FVM_TRY(fvm_fwriter_struct(&w, "@intermediate", m->ninter, fvm_flow_names(m->a, m->ninter, "i%d"), in));
    const char *names[2] = {"broadcast", "intermediate"}, *args[2] = {"@broadcast", "@intermediate"};
    FVM_TRY(fvm_fwriter_struct(&w, "@prepared", 2, names, args));
    (void)t;
    return add_func(m, PREPARE, &w,
                    "Distribute-Aggregate form: server_prepare (at the server). What the server broadcasts, and "
                    "the intermediate state server_result needs from before the exchange.",
                    "@prepared");
}

static fvm_status write_broadcast(da *m, const da_types *t)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, false, m->d));
    FVM_TRY(fvm_fwriter_param(&w, "@broadcast", t->broadcast, -1));
    const char **c = fvm_arena_array(m->a, (size_t)m->nbcast + 1, sizeof *c);
    if (!c)
        return nomem(m->d);
    for (int j = 0; j < m->nbcast; j++) {
        const fvm_fnode *n = &m->fl->nodes[m->bcast[j]];
        const char *in = str(m, "@broadcast/b%d", j);
        FVM_TRY(fvm_fwriter_field(&w, in, str(m, "b%d", j), "@broadcast"));
        c[j] = n->name;
        FVM_TRY(fvm_fwriter_instr(&w, n->name, fvm_op_table[n->in->op].name, (fvm_doc *)n->in->attrs, 1, &in));
    }
    FVM_TRY(fvm_fwriter_struct(&w, "@context", m->nbcast, fvm_flow_names(m->a, m->nbcast, "c%d"), c));
    return add_func(m, BROADCAST, &w,
                    "Distribute-Aggregate form: server_to_client_broadcast. The round's broadcasts, as written.",
                    "@context");
}

static fvm_status write_work(da *m, const da_types *t)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, false, m->d));
    const fvm_func *f = m->fl->f;
    for (int k = 0; k < m->nclient; k++) {
        int i = m->client[k];
        FVM_TRY(fvm_fwriter_param(&w, f->param_names[m->fl->nodes[i].param], m->fl->nodes[i].type, i));
    }
    FVM_TRY(fvm_fwriter_param(&w, "@context", t->context, -1));
    for (int j = 0; j < m->nbcast; j++) {
        const char *name = str(m, "@context/c%d", j);
        FVM_TRY(fvm_fwriter_field(&w, name, str(m, "c%d", j), "@context"));
        w.bound[m->bcast[j]] = name;
    }
    const char **u = fvm_arena_array(m->a, (size_t)m->nupdates + 1, sizeof *u);
    if (!u)
        return nomem(m->d);
    int k = 0;
    for (int i = 0; i < m->nagg; i++) {
        const fvm_fnode *g = &m->fl->nodes[m->agg[i]];
        for (int j = 0; j < fvm_agg_rule_of(g->in->op)->client_args; j++)
            FVM_TRY(fvm_fwriter_node(&w, g->args[j], &u[k++]));
    }
    if (m->fl->client_state < 0) {
        FVM_TRY(fvm_fwriter_struct(&w, "@updates", m->nupdates, m->update_names, u));
        return add_func(m, WORK, &w,
                        "Distribute-Aggregate form: client_work (at the clients). What each client sends to the "
                        "aggregations.",
                        "@updates");
    }
    /* the clients' new states, one more field, which the round keeps at the clients */
    FVM_TRY(fvm_fwriter_node(&w, m->fl->client_state, &u[m->nupdates]));
    FVM_TRY(fvm_fwriter_struct(&w, "@work", m->nupdates + 1, m->update_names, u));
    return add_func(m, WORK, &w,
                    "Distribute-Aggregate form: client_work (at the clients). What each client sends to the "
                    "aggregations, and its new state (client_state, which stays at the client).",
                    "@work");
}

static fvm_status write_aggregate(da *m, const da_types *t)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, false, m->d));
    FVM_TRY(bind_intermediate(m, &w, t->inter));
    FVM_TRY(fvm_fwriter_param(&w, "@updates", t->updates, -1));
    const char **r = fvm_arena_array(m->a, (size_t)m->nagg + 1, sizeof *r);
    if (!r)
        return nomem(m->d);
    int k = 0;
    for (int i = 0; i < m->nagg; i++) {
        const fvm_fnode *g = &m->fl->nodes[m->agg[i]];
        const char **args = fvm_arena_array(m->a, (size_t)g->nargs + 1, sizeof *args);
        if (!args)
            return nomem(m->d);
        int nclient = fvm_agg_rule_of(g->in->op)->client_args;
        for (int j = 0; j < g->nargs; j++) { /* the clients' updates, then the server's values */
            if (j < nclient) {
                args[j] = str(m, "@updates/%d", k);
                FVM_TRY(fvm_fwriter_field(&w, args[j], m->update_names[k++], "@updates"));
            } else {
                args[j] = w.bound[g->args[j]];
            }
        }
        int nargs = g->nargs;
        r[i] = g->name;
        FVM_TRY(fvm_fwriter_instr(&w, g->name, fvm_op_table[g->in->op].name, (fvm_doc *)g->in->attrs, nargs, args));
    }
    FVM_TRY(fvm_fwriter_struct(&w, "@aggregates", m->nagg, fvm_flow_names(m->a, m->nagg, "r%d"), r));
    return add_func(m, AGGREGATE, &w,
                    "Distribute-Aggregate form: client_to_server_aggregation. The round's aggregations, as written.",
                    "@aggregates");
}

static fvm_status write_result(da *m, const da_types *t)
{
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, false, m->d));
    FVM_TRY(bind_intermediate(m, &w, t->inter));
    FVM_TRY(fvm_fwriter_param(&w, "@aggregates", t->aggregates, -1));
    for (int i = 0; i < m->nagg; i++) {
        const char *name = str(m, "@aggregates/r%d", i);
        FVM_TRY(fvm_fwriter_field(&w, name, str(m, "r%d", i), "@aggregates"));
        w.bound[m->agg[i]] = name;
    }
    const char *result;
    FVM_TRY(fvm_fwriter_result(&w, &result));
    return add_func(m, RESULT, &w,
                    "Distribute-Aggregate form: server_result (at the server). The round's result from the "
                    "intermediate state and the aggregates.",
                    result);
}

static fvm_status call(da *m, fvm_fwriter *w, const char *name, int part, int nargs, const char *const *args)
{
    fvm_doc *attrs = fvm_attr1(m->a, "fn", m->part[part]);
    return attrs ? fvm_fwriter_instr(w, name, "call", attrs, nargs, args) : nomem(m->d);
}

/* {"index": k} */
static fvm_doc *index_attr(da *m, int k)
{
    fvm_doc *o = fvm_doc_new(m->a, FVM_DOC_OBJECT);
    if (!o || fvm_doc_set(m->a, o, "index", fvm_doc_int(m->a, k)))
        return NULL;
    o->flow = true;
    return o;
}

/* "@work" (client_work's result with the new states) taken apart:
 * "@updates", its fields for the aggregations, and "@client_states". */
static fvm_status split_work(da *m, fvm_fwriter *w)
{
    const char **u = fvm_arena_array(m->a, (size_t)m->nupdates + 1, sizeof *u);
    if (!u)
        return nomem(m->d);
    for (int k = 0; k < m->nupdates; k++) {
        u[k] = str(m, "@work/%d", k);
        FVM_TRY(fvm_fwriter_field(w, u[k], m->update_names[k], "@work"));
    }
    FVM_TRY(fvm_fwriter_field(w, "@client_states", "client_state", "@work"));
    return fvm_fwriter_struct(w, "@updates", m->nupdates, m->update_names, u);
}

static fvm_status write_round(da *m)
{
    const fvm_func *f = m->fl->f;
    fvm_fwriter w;
    FVM_TRY(fvm_fwriter_init(&w, m->a, m->fl, false, m->d));
    const char **args = fvm_arena_array(m->a, (size_t)f->nparams + 2, sizeof *args);
    if (!args)
        return nomem(m->d);
    for (int i = 0; i < f->nparams; i++)
        FVM_TRY(fvm_fwriter_param(&w, f->param_names[i], f->param_types[i], -1));
    for (int k = 0; k < m->nserver; k++)
        args[k] = f->param_names[m->fl->nodes[m->server[k]].param];
    FVM_TRY(call(m, &w, "@prepared", PREPARE, m->nserver, args));
    FVM_TRY(fvm_fwriter_field(&w, "@broadcast", "broadcast", "@prepared"));
    FVM_TRY(fvm_fwriter_field(&w, "@intermediate", "intermediate", "@prepared"));
    const char *bc = "@broadcast";
    FVM_TRY(call(m, &w, "@context", BROADCAST, 1, &bc));
    for (int k = 0; k < m->nclient; k++)
        args[k] = f->param_names[m->fl->nodes[m->client[k]].param];
    args[m->nclient] = "@context";
    bool cs = m->fl->client_state >= 0;
    FVM_TRY(call(m, &w, cs ? "@work" : "@updates", WORK, m->nclient + 1, args));
    if (cs) /* the updates go to the aggregations; the new states stay at the clients */
        FVM_TRY(split_work(m, &w));
    const char *ag[2] = {"@intermediate", "@updates"}, *rs[2] = {"@intermediate", "@aggregates"};
    FVM_TRY(call(m, &w, "@aggregates", AGGREGATE, 2, ag));
    FVM_TRY(call(m, &w, "@result", RESULT, 2, rs));
    const char *result = "@result";
    if (cs) { /* <state, metrics> from server_result, then the clients' new states */
        const fvm_type *t = f->result_type;
        const char *parts[3] = {"@result/0", "@result/1", "@client_states"};
        for (int k = 0; k < 2; k++)
            FVM_TRY(t->u.strct.names[k] ? fvm_fwriter_field(&w, parts[k], t->u.strct.names[k], "@result")
                                        : fvm_fwriter_instr(&w, parts[k], "field", index_attr(m, k), 1, &result));
        result = "@round";
        FVM_TRY(fvm_fwriter_struct(&w, result, 3, t->u.strct.names[0] ? t->u.strct.names : NULL, parts));
    }
    fvm_doc *fn = fvm_fwriter_finish(&w, f->doc, result);
    return fn && !fvm_doc_set(m->a, m->funcs, f->name, fn) ? FVM_OK : nomem(m->d);
}

static fvm_doc *form_doc(da *m, const char *source)
{
    fvm_arena *a = m->a;
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT), *parts = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!o || !parts)
        return NULL;
    for (int k = 0; k < NPARTS; k++)
        if (fvm_doc_set(a, parts, role[k], fvm_doc_string(a, m->part[k])))
            return NULL;
    if (fvm_doc_set(a, o, "kind", fvm_doc_string(a, "distribute-aggregate")) ||
        fvm_doc_set(a, o, "function", fvm_doc_string(a, m->fl->f->name)) ||
        fvm_doc_set(a, o, "source", fvm_doc_string(a, source)) || fvm_doc_set(a, o, "parts", parts))
        return NULL;
    if (m->fl->client_state >= 0) { /* a fedvm extension: client_work's field that stays at the clients */
        fvm_doc *cs = fvm_doc_new(a, FVM_DOC_OBJECT);
        if (!cs || fvm_doc_set(a, cs, "output", fvm_doc_string(a, "client_state")) ||
            fvm_doc_set(a, cs, "initialize", fvm_doc_string(a, "initialize_client")) ||
            fvm_doc_set(a, o, "client_state", cs))
            return NULL;
        cs->flow = true;
    }
    return o;
}

fvm_status fvm_plan_distribute_aggregate(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len,
                                         fvm_diag *d)
{
    *out = NULL;
    const fvm_func *f;
    fvm_status s = fvm_form_entry(p, o, &f, d);
    if (s)
        return s;
    fvm_arena a = {0};
    fvm_flow fl;
    da m = {.a = &a, .fl = &fl, .d = d};
    da_types t = {0};
    s = fvm_flow_build(&a, p, f, &fl, d);
    if (s == FVM_OK)
        s = classify(&m);
    if (s == FVM_OK && !(m.funcs = fvm_doc_new(&a, FVM_DOC_OBJECT)))
        s = nomem(d);
    for (int k = 0; k < NPARTS && s == FVM_OK; k++)
        if (!(m.part[k] = fvm_arena_printf(&a, "%s.%s", f->name, role[k])))
            s = nomem(d);
    if (s == FVM_OK)
        s = types_of(&m, &t);
    if (s == FVM_OK)
        s = write_prepare(&m, &t);
    if (s == FVM_OK)
        s = write_broadcast(&m, &t);
    if (s == FVM_OK)
        s = write_work(&m, &t);
    if (s == FVM_OK)
        s = write_aggregate(&m, &t);
    if (s == FVM_OK)
        s = write_result(&m, &t);
    if (s == FVM_OK)
        s = write_round(&m);
    fvm_doc *form = NULL;
    if (s == FVM_OK && !(form = form_doc(&m, f->module->path)))
        s = nomem(d);
    if (s == FVM_OK) {
        const char *doc = fvm_arena_printf(&a,
                                           "'%s' of %s in TFF's Distribute-Aggregate form (written by fedplan; "
                                           "format/PLANS.md). %s",
                                           f->name, f->module->path, p->root->doc ? p->root->doc : "");
        s = doc ? fvm_form_write(&a, &fl, doc, form, m.funcs, out, len, d) : nomem(d);
    }
    fvm_arena_free(&a);
    return s;
}
