/* plan_dot.c - the 'dot' plan: a function's dataflow for Graphviz, SERVER and CLIENTS values as clusters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_dot.h"
#include "../vm/core/doc.h"

/* Edge labels: the type written with its aliases, when at most this long. */
#define SHORT_TYPE 28
/* Parameter labels: the type, cut with "..." past this length. */
#define PARAM_TYPE 40

/* Where a value lives, from its checked type. */
typedef enum where { AT_NONE, AT_SERVER, AT_CLIENTS, AT_MIXED } where;

/* T@SERVER is a server value, {T}@CLIENTS and T@CLIENTS client values; a
 * struct whose fields all live in one place lives there; an unplaced value,
 * and a struct with fields in different places (or placed and unplaced
 * ones), belongs to neither. */
static where where_of(const fvm_type *t)
{
    if (!t)
        return AT_NONE;
    if (t->kind == FVM_T_FED)
        return t->u.fed.pl == FVM_PL_SERVER ? AT_SERVER : AT_CLIENTS;
    if (t->kind != FVM_T_STRUCT || t->u.strct.n == 0)
        return AT_NONE;
    where w = where_of(t->u.strct.elems[0]);
    for (int i = 1; i < t->u.strct.n && w != AT_MIXED; i++)
        if (where_of(t->u.strct.elems[i]) != w)
            w = AT_MIXED;
    return w;
}

static bool placed(where w)
{
    return w == AT_SERVER || w == AT_CLIENTS;
}

/* Length of the UTF-8 sequence at s (1-4), or 0 when it is not one. */
static int utf8_len(const unsigned char *s)
{
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 2 && s[0] < 0xc2)
        return 0; /* overlong */
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

void fvm_plan_dot_escape(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        int n = utf8_len(s);
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\\\n", f);
        else if (*s == '\t')
            fputs("\\\\t", f);
        else if (*s == '\r')
            fputs("\\\\r", f);
        else if (*s < 0x20 || *s == 0x7f || n == 0)
            fprintf(f, "\\\\x%02x", *s);
        else {
            fwrite(s, 1, (size_t)n, f);
            s += n;
            continue;
        }
        s++;
    }
}

/* ---- one function's graph ------------------------------------------------------ */

typedef struct graph {
    FILE *f;
    const fvm_func *fn;
    where *at; /* per slot (parameters, then instructions), then the result */
    const char *indent; /* of node lines: deeper inside a cluster */
} graph;

/* The attribute of in with id as a name (a function, a placement or a
 * string: fn, then, else, placement, name, wrt, ...), or NULL when it is
 * absent or of another kind. */
static const char *named_attr(const fvm_instr *in, int id)
{
    const fvm_attr_info *info = &fvm_attr_table[id];
    const char *field = (const char *)&in->a + info->offset;
    if (!(in->a.present & (UINT64_C(1) << id)))
        return NULL;
    switch (info->kind) {
    case FVM_AK_FUNC: {
        const fvm_func *callee = *(struct fvm_func *const *)field;
        return callee ? callee->name : NULL;
    }
    case FVM_AK_PLACEMENT:
        return *(const fvm_placement *)field == FVM_PL_SERVER ? "SERVER" : "CLIENTS";
    case FVM_AK_STRING:
        return *(const char *const *)field;
    default:
        return NULL;
    }
}

/* The op and its named attributes: "op(f)" for one, else "op" and one line
 * "attr=value" per attribute. */
static void op_text(FILE *f, const fvm_instr *in)
{
    if (in->lowered) { /* drawn as written: field(name) of a placed struct */
        fvm_plan_dot_escape(f, fvm_op_table[in->written_op].name);
        const fvm_doc *v = fvm_doc_get(in->written_attrs, "name");
        if (v && v->kind == FVM_DOC_STRING) {
            fputc('(', f);
            fvm_plan_dot_escape(f, v->u.str.s);
            fputc(')', f);
        } else if ((v = fvm_doc_get(in->written_attrs, "index")) && v->kind == FVM_DOC_INT) {
            fprintf(f, "(%lld)", (long long)v->u.i);
        }
        return;
    }
    int n = 0;
    for (int id = 0; id < FVM_ATTR_COUNT; id++)
        n += named_attr(in, id) != NULL;
    fvm_plan_dot_escape(f, fvm_op_table[in->op].name);
    for (int id = 0; id < FVM_ATTR_COUNT; id++) {
        const char *value = named_attr(in, id);
        if (!value)
            continue;
        if (n == 1) {
            fputc('(', f);
            fvm_plan_dot_escape(f, value);
            fputc(')', f);
        } else {
            fputs("\\n", f);
            fvm_plan_dot_escape(f, fvm_attr_table[id].name);
            fputc('=', f);
            fvm_plan_dot_escape(f, value);
        }
    }
}

/* Does instruction in move values between placements: an intrinsic with a
 * result placed elsewhere than one of its arguments (broadcasts,
 * aggregations, federated_value)? */
static bool moves(const graph *g, const fvm_instr *in)
{
    where w = g->at[in->slot];
    for (int i = 0; i < in->nargs; i++)
        if (g->at[in->args[i]] != w)
            return true;
    return false;
}

static void param_node(graph *g, int i)
{
    char type[PARAM_TYPE + 1];
    FILE *f = g->f;
    fprintf(f, "%sp%d [label=\"", g->indent, i);
    fvm_plan_dot_escape(f, g->fn->param_names[i]);
    fputs("\\n", f);
    fvm_plan_dot_escape(f, fvm_type_format(g->fn->param_types[i], true, type, sizeof type));
    fputs("\", shape=invhouse, style=filled, fillcolor=\"#f3f3f3\"];\n", f);
}

static void instr_node(graph *g, int k)
{
    const fvm_instr *in = &g->fn->instrs[k];
    FILE *f = g->f;
    bool intrinsic = !in->lowered && (fvm_op_table[in->op].flags & OPF_FED) != 0;
    fprintf(f, "%si%d [label=\"", g->indent, k);
    fvm_plan_dot_escape(f, in->name);
    fputs("\\n", f);
    op_text(f, in);
    fputc('"', f);
    if (intrinsic && moves(g, in))
        fputs(", shape=hexagon, style=\"filled,bold\", fillcolor=\"#f7b267\"", f);
    else if (intrinsic)
        fputs(", style=\"rounded,filled,bold\", fillcolor=\"#fde3a7\"", f);
    fputs("];\n", f);
}

static void result_node(graph *g)
{
    fprintf(g->f, "%sresult [label=\"returns\", shape=house, style=filled, fillcolor=\"#f3f3f3\"];\n", g->indent);
}

/* The nodes living in w, in program order: parameters, instructions, result. */
static void nodes_at(graph *g, where w)
{
    const fvm_func *fn = g->fn;
    for (int i = 0; i < fn->nparams; i++)
        if (g->at[i] == w)
            param_node(g, i);
    for (int k = 0; k < fn->ninstrs; k++)
        if (g->at[fn->instrs[k].slot] == w)
            instr_node(g, k);
    if (g->at[fn->nslots] == w)
        result_node(g);
}

static void node_id(FILE *f, const fvm_func *fn, int slot)
{
    if (slot < fn->nparams)
        fprintf(f, "p%d", slot);
    else
        fprintf(f, "i%d", slot - fn->nparams);
}

/* An edge from the value in slot to node 'to' (living in 'at'), labelled
 * with the value's type when it is short; bold when it goes from SERVER to
 * CLIENTS or back. */
static void edge(graph *g, int slot, const fvm_type *t, const char *to, where at)
{
    char type[256];
    FILE *f = g->f;
    fputs("  ", f);
    node_id(f, g->fn, slot);
    fprintf(f, " -> %s", to);
    const char *text = fvm_type_format(t, true, type, sizeof type);
    if (strlen(text) > SHORT_TYPE)
        text = NULL;
    bool crosses = g->at[slot] != at && placed(g->at[slot]) && placed(at);
    if (!text && !crosses) {
        fputs(";\n", f);
        return;
    }
    fputs(" [", f);
    if (text) {
        fputs("label=\"", f);
        fvm_plan_dot_escape(f, text);
        fputs(crosses ? "\", " : "\"", f);
    }
    if (crosses)
        fputs("color=\"#c0392b\", fontcolor=\"#c0392b\", penwidth=2", f);
    fputs("];\n", f);
}

static const char *basename_of(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path;
}

static void write_graph(graph *g, const fvm_program *p)
{
    FILE *f = g->f;
    const fvm_func *fn = g->fn;
    fputs("digraph fedvm_plan {\n", f);
    fputs("  graph [label=\"", f);
    if (p->root && p->root->path) {
        fvm_plan_dot_escape(f, basename_of(p->root->path));
        fputs(": ", f);
    }
    fvm_plan_dot_escape(f, fn->name);
    fputs("\", labelloc=t, newrank=true, fontname=\"Helvetica\", fontsize=14, nodesep=0.25, ranksep=0.4];\n", f);
    fputs("  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=\"rounded,filled\", fillcolor=white, "
          "color=\"#444444\", margin=\"0.1,0.04\"];\n",
          f);
    fputs("  edge [fontname=\"Helvetica\", fontsize=8, color=\"#666666\", fontcolor=\"#555555\", arrowsize=0.6];\n", f);

    static const struct {
        where w;
        const char *name, *label, *fill, *line;
    } clusters[] = {
        {AT_SERVER, "cluster_server", "SERVER", "#e6eefa", "#4f78b8"},
        {AT_CLIENTS, "cluster_clients", "CLIENTS", "#e7f4e2", "#4e9a3f"},
    };
    for (size_t c = 0; c < sizeof clusters / sizeof clusters[0]; c++) {
        bool any = false;
        for (int s = 0; s <= fn->nslots; s++)
            any |= g->at[s] == clusters[c].w;
        if (!any)
            continue; /* Graphviz draws no empty cluster; leave it out */
        fprintf(f, "  subgraph %s {\n", clusters[c].name);
        fprintf(f,
                "    label=\"%s\"; style=\"rounded,filled\"; fillcolor=\"%s\"; color=\"%s\"; "
                "fontcolor=\"%s\"; fontname=\"Helvetica-Bold\";\n",
                clusters[c].label, clusters[c].fill, clusters[c].line, clusters[c].line);
        g->indent = "    ";
        nodes_at(g, clusters[c].w);
        fputs("  }\n", f);
    }
    g->indent = "  ";
    nodes_at(g, AT_NONE);
    nodes_at(g, AT_MIXED);

    char to[32];
    for (int k = 0; k < fn->ninstrs; k++) {
        const fvm_instr *in = &fn->instrs[k];
        snprintf(to, sizeof to, "i%d", k);
        for (int i = 0; i < in->nargs; i++)
            edge(g, in->args[i], in->arg_types[i], to, g->at[in->slot]);
    }
    if (fn->result_slot >= 0)
        edge(g, fn->result_slot, fn->result_type, "result", g->at[fn->nslots]);
    fputs("}\n", f);
}

fvm_status fvm_plan_dot(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len, fvm_diag *d)
{
    *out = NULL;
    *len = 0;
    const fvm_func *fn = NULL;
    fvm_status s = fvm_plan_entry(p, o ? o->fn : NULL, &fn, d);
    if (s)
        return s;
    if (!fn->ok || fn->result_slot < 0 || fn->nslots != fn->nparams + fn->ninstrs)
        return fvm_diag_add(d, FVM_ERR_USAGE, &fn->loc, "function '%s' is not checked: check the program first",
                            fn->name);
    graph g = {.fn = fn};
    g.at = calloc((size_t)fn->nslots + 1, sizeof *g.at);
    char *text = NULL;
    size_t n = 0;
    FILE *f = g.at ? open_memstream(&text, &n) : NULL;
    if (!f) {
        free(g.at);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    for (int i = 0; i < fn->nparams; i++)
        g.at[i] = where_of(fn->param_types[i]);
    for (int k = 0; k < fn->ninstrs; k++)
        g.at[fn->instrs[k].slot] = where_of(fn->instrs[k].type);
    g.at[fn->nslots] = where_of(fn->result_type);
    g.f = f;
    write_graph(&g, p);
    bool failed = ferror(f) != 0;
    failed |= fclose(f) != 0;
    free(g.at);
    if (failed || !text) {
        free(text);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    *out = text;
    *len = n;
    return FVM_OK;
}
