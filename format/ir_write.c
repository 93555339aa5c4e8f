/* ir_write.c - IR modules to canonical documents and text. */
#include "ir_write.h"
#include "doc_io.h"
#include "value_doc.h"

#include <string.h>

#define TRY(x) \
    do { \
        if ((x) != FVM_OK) \
            return NULL; \
    } while (0)

static fvm_doc *type_doc(fvm_arena *a, const fvm_type *t, bool definition)
{
    if (definition && t->alias) {
        fvm_type copy = *t; /* print the definition, not the alias's own name */
        copy.alias = NULL;
        const char *s = fvm_type_str(a, &copy, true);
        return s ? fvm_doc_string(a, s) : NULL;
    }
    const char *s = fvm_type_str(a, t, true);
    return s ? fvm_doc_string(a, s) : NULL;
}

static fvm_doc *attrs_doc(fvm_arena *a, const fvm_doc *attrs)
{
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!o)
        return NULL;
    o->flow = true;
    for (int id = 0; id < FVM_ATTR_COUNT; id++) {
        const fvm_doc *v = fvm_doc_get(attrs, fvm_attr_table[id].name);
        if (v)
            TRY(fvm_doc_set(a, o, fvm_attr_table[id].name, (fvm_doc *)v));
    }
    /* where a generator made the instruction (format/SPEC.md, "Source locations"), last */
    const fvm_doc *loc = fvm_doc_get(attrs, "loc");
    if (loc)
        TRY(fvm_doc_set(a, o, "loc", (fvm_doc *)loc));
    /* Unknown keys cannot reach here: the checker refuses them. */
    return o;
}

/* h's bound value as a document. */
static fvm_doc *hparam_value_doc(fvm_arena *a, const fvm_hparam *h)
{
    fvm_tensor t = h->value;
    fvm_tensor_retain(&t);
    fvm_value *v = fvm_value_tensor_take(&t);
    if (!v) {
        fvm_tensor_release(&t);
        return NULL;
    }
    fvm_doc *doc = fvm_value_to_doc(a, v, h->type);
    fvm_value_release(v);
    return doc;
}

fvm_doc *fvm_hparams_doc(fvm_arena *a, const fvm_program *p)
{
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!o)
        return NULL;
    o->flow = true;
    for (int i = 0; i < p->nhparams; i++)
        TRY(fvm_doc_set(a, o, p->hparams[i]->name, hparam_value_doc(a, p->hparams[i])));
    return o;
}

/* {"name": {"doc"?, "type", "default"}} for n hyperparameters; with bound,
 * each one's bound value is its default, else the default as written. */
static fvm_doc *hparams_doc(fvm_arena *a, fvm_hparam *const *hs, int n, bool bound)
{
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!o)
        return NULL;
    for (int i = 0; i < n; i++) {
        const fvm_hparam *h = hs[i];
        fvm_doc *e = fvm_doc_new(a, FVM_DOC_OBJECT), *def = bound ? hparam_value_doc(a, h) : (fvm_doc *)h->def;
        if (!e)
            return NULL;
        e->flow = !h->doc;
        if (h->doc)
            TRY(fvm_doc_set(a, e, "doc", fvm_doc_string(a, h->doc)));
        if (!h->new_default) /* a new default for an included declaration has no type */
            TRY(fvm_doc_set(a, e, "type", type_doc(a, h->type, false)));
        TRY(fvm_doc_set(a, e, "default", def));
        TRY(fvm_doc_set(a, o, h->name, e));
    }
    return o;
}

/* Is the instruction one the loader made from another that the source's
 * writer writes (a literal's const, a destructuring's second field on)? */
static bool made(const fvm_instr *in)
{
    return in->literal || (in->fields && in->field_pos > 0);
}

/* An instruction as the program runs it, or (source) as written: literal
 * arguments as the literals, a destructuring as [[names...], "fields", ...]. */
static fvm_doc *instr_doc(fvm_arena *a, const fvm_instr *in, bool source)
{
    fvm_doc *arr = fvm_doc_new(a, FVM_DOC_ARRAY);
    if (!arr)
        return NULL;
    arr->flow = true;
    bool destructure = source && in->fields, written = source && in->lowered && !destructure;
    const fvm_doc *attrs = destructure ? in->fields->attrs : written ? in->written_attrs : in->attrs;
    if (destructure) {
        fvm_doc *names = fvm_doc_new(a, FVM_DOC_ARRAY);
        if (!names)
            return NULL;
        names->flow = true;
        for (int k = 0; k < in->fields->n; k++)
            TRY(fvm_doc_push(a, names, fvm_doc_string(a, in->fields->names[k])));
        TRY(fvm_doc_push(a, arr, names));
    } else {
        TRY(fvm_doc_push(a, arr, fvm_doc_string(a, in->name)));
    }
    const char *op =
        destructure ? fvm_op_table[FVM_OP_FIELDS].name : fvm_op_table[written ? in->written_op : in->op].name;
    TRY(fvm_doc_push(a, arr, fvm_doc_string(a, op)));
    if (attrs && attrs->u.coll.n)
        TRY(fvm_doc_push(a, arr, attrs_doc(a, attrs)));
    for (int i = 0; i < in->nargs; i++) {
        const fvm_doc *lit = source && in->arg_literals ? in->arg_literals[i] : NULL;
        TRY(fvm_doc_push(a, arr, lit ? (fvm_doc *)lit : fvm_doc_string(a, in->arg_names[i])));
    }
    return arr;
}

static fvm_doc *func_body_doc(fvm_arena *a, const fvm_func *f, bool source)
{
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!o)
        return NULL;
    if (f->doc)
        TRY(fvm_doc_set(a, o, "doc", fvm_doc_string(a, f->doc)));
    fvm_doc *params = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!params)
        return NULL;
    for (int i = 0; i < f->nparams; i++)
        TRY(fvm_doc_set(a, params, f->param_names[i], type_doc(a, f->param_types[i], false)));
    TRY(fvm_doc_set(a, o, "params", params));
    fvm_doc *body = fvm_doc_new(a, FVM_DOC_ARRAY);
    if (!body)
        return NULL;
    for (int i = 0; i < f->ninstrs; i++)
        if (!source || !made(&f->instrs[i]))
            TRY(fvm_doc_push(a, body, instr_doc(a, &f->instrs[i], source)));
    TRY(fvm_doc_set(a, o, "body", body));
    TRY(fvm_doc_set(a, o, "result", fvm_doc_string(a, f->result_name)));
    return o;
}

fvm_doc *fvm_func_to_doc(fvm_arena *a, const fvm_func *f)
{
    fvm_doc *o = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!o)
        return NULL;
    TRY(fvm_doc_set(a, o, f->name, func_body_doc(a, f, false)));
    return o;
}

fvm_doc *fvm_module_to_doc(fvm_arena *a, const fvm_module *m)
{
    fvm_doc *root = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!root)
        return NULL;
    TRY(fvm_doc_set(a, root, "fedvm", fvm_doc_int(a, 1)));
    if (m->doc)
        TRY(fvm_doc_set(a, root, "doc", fvm_doc_string(a, m->doc)));
    if (m->form)
        TRY(fvm_doc_set(a, root, "form", (fvm_doc *)m->form));
    if (m->privacy)
        TRY(fvm_doc_set(a, root, "privacy", (fvm_doc *)m->privacy));
    if (m->nincludes) {
        fvm_doc *inc = fvm_doc_new(a, FVM_DOC_ARRAY);
        if (!inc)
            return NULL;
        for (int i = 0; i < m->nincludes; i++)
            TRY(fvm_doc_push(a, inc, fvm_doc_string(a, m->includes[i])));
        TRY(fvm_doc_set(a, root, "include", inc));
    }
    if (m->nhparams) {
        fvm_hparam **hs = fvm_arena_array(a, (size_t)m->nhparams, sizeof *hs);
        if (!hs)
            return NULL;
        for (int i = 0; i < m->nhparams; i++)
            hs[i] = &m->hparams[i];
        TRY(fvm_doc_set(a, root, "hparams", hparams_doc(a, hs, m->nhparams, false)));
    }
    if (m->naliases) {
        fvm_doc *types = fvm_doc_new(a, FVM_DOC_OBJECT);
        if (!types)
            return NULL;
        for (int i = 0; i < m->naliases; i++)
            TRY(fvm_doc_set(a, types, m->aliases[i].name, type_doc(a, m->aliases[i].type, true)));
        TRY(fvm_doc_set(a, root, "types", types));
    }
    fvm_doc *funcs = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!funcs)
        return NULL;
    for (int i = 0; i < m->nfuncs; i++)
        TRY(fvm_doc_set(a, funcs, m->funcs[i]->name, func_body_doc(a, m->funcs[i], true)));
    TRY(fvm_doc_set(a, root, "functions", funcs));
    return root;
}

fvm_doc *fvm_program_to_doc(fvm_arena *a, const fvm_program *p, const char *doc)
{
    fvm_doc *root = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!root)
        return NULL;
    TRY(fvm_doc_set(a, root, "fedvm", fvm_doc_int(a, 1)));
    if (doc)
        TRY(fvm_doc_set(a, root, "doc", fvm_doc_string(a, doc)));
    if (p->root && p->root->privacy)
        TRY(fvm_doc_set(a, root, "privacy", (fvm_doc *)p->root->privacy));
    if (p->nhparams)
        TRY(fvm_doc_set(a, root, "hparams", hparams_doc(a, p->hparams, p->nhparams, true)));
    if (p->naliases) {
        fvm_doc *types = fvm_doc_new(a, FVM_DOC_OBJECT);
        if (!types)
            return NULL;
        for (int i = 0; i < p->naliases; i++)
            TRY(fvm_doc_set(a, types, p->aliases[i]->name, type_doc(a, p->aliases[i]->type, true)));
        TRY(fvm_doc_set(a, root, "types", types));
    }
    fvm_doc *funcs = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!funcs)
        return NULL;
    for (int i = 0; i < p->nfuncs; i++)
        TRY(fvm_doc_set(a, funcs, p->funcs[i]->name, func_body_doc(a, p->funcs[i], false)));
    TRY(fvm_doc_set(a, root, "functions", funcs));
    return root;
}

fvm_status fvm_module_write(const fvm_module *m, bool yaml, char **out, size_t *out_len, fvm_diag *d)
{
    fvm_arena a = {0};
    fvm_doc *doc = fvm_module_to_doc(&a, m);
    fvm_status s = doc ? (yaml ? fvm_yaml_write(doc, out, out_len, d) : fvm_json_write(doc, out, out_len, d))
                       : fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    fvm_arena_free(&a);
    return s;
}
