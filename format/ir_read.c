/* ir_read.c - document trees to the IR: structure checks, includes, the merged namespace, type strings. */
#include "ir_read.h"
#include "doc_io.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../vm/core/suggest.h"
#include "../vm/core/doc.h"
#include "value_doc.h"

enum { MAX_MODULES = 1000, MAX_INCLUDE_DEPTH = 64, MAX_NAME = 256 };

typedef struct loader {
    fvm_program *p;
    fvm_diag *d;
    int errors;
    bool fatal; /* a file could not be read or parsed */
    int cap_modules;
    const char *stack[MAX_INCLUDE_DEPTH]; /* canonical paths being loaded */
    const char *stack_disp[MAX_INCLUDE_DEPTH];
    int depth;
    fvm_alias *aliases[FVM_MAX_TYPE_DEPTH + 2]; /* aliases being resolved, outermost first */
    int nresolving;
    const char *member; /* the root program's JSON pointer in its file ("" for the whole file) */
    const fvm_load_opts *o; /* NULL: the defaults */
} loader;

static fvm_loc loc_of(loader *L, const fvm_module *m, const fvm_doc *n, const char *ptr)
{
    fvm_loc l = {.file = m->path, .ptr = ptr};
    if (n) {
        l.line = n->line;
        l.col = n->col;
    }
    return l;
}

static void err(loader *L, fvm_status code, const fvm_module *m, const fvm_doc *n, const char *ptr, const char *fmt,
                ...) __attribute__((format(printf, 6, 7)));

static void err(loader *L, fvm_status code, const fvm_module *m, const fvm_doc *n, const char *ptr, const char *fmt,
                ...)
{
    fvm_loc l = loc_of(L, m, n, ptr);
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(L->d, code, &l, fmt, ap);
    va_end(ap);
    L->errors++;
}

static const char *kind_name(const fvm_doc *n)
{
    switch (n->kind) {
    case FVM_DOC_NULL:
        return "null";
    case FVM_DOC_BOOL:
        return "a boolean";
    case FVM_DOC_INT:
        return "an integer";
    case FVM_DOC_REAL:
        return "a number";
    case FVM_DOC_STRING:
        return "a string";
    case FVM_DOC_ARRAY:
        return "an array";
    case FVM_DOC_OBJECT:
        return "an object";
    }
    return "?";
}

static bool expect_kind(loader *L, const fvm_module *m, const fvm_doc *n, const char *ptr, fvm_doc_kind k,
                        const char *what)
{
    if (n->kind == k)
        return true;
    err(L, FVM_ERR_FORMAT, m, n, ptr, "expected %s, found %s", what, kind_name(n));
    return false;
}

/* Names of functions, params and instructions: any non-empty string without
 * control characters, at most MAX_NAME bytes. */
static bool check_name(loader *L, const fvm_module *m, const fvm_doc *n, const char *ptr, const char *what)
{
    if (n->kind != FVM_DOC_STRING) {
        err(L, FVM_ERR_FORMAT, m, n, ptr, "expected %s (a string), found %s", what, kind_name(n));
        return false;
    }
    if (n->u.str.len == 0 || n->u.str.len > MAX_NAME) {
        err(L, FVM_ERR_NAME, m, n, ptr, "%s must have 1 to %d bytes", what, MAX_NAME);
        return false;
    }
    for (size_t i = 0; i < n->u.str.len; i++)
        if ((unsigned char)n->u.str.s[i] < 0x20 || n->u.str.s[i] == 0x7f) {
            err(L, FVM_ERR_NAME, m, n, ptr, "%s must not contain control characters", what);
            return false;
        }
    return true;
}

static void unknown_key(loader *L, const fvm_module *m, const fvm_doc *key, const char *ptr, const char *const *allowed,
                        const char *where)
{
    fvm_suggest s;
    fvm_suggest_init(&s, key->u.str.s);
    char list[256] = "";
    for (int i = 0; allowed[i]; i++) {
        fvm_suggest_add(&s, allowed[i]);
        if (i)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, allowed[i], sizeof list - strlen(list) - 1);
    }
    if (s.best)
        err(L, FVM_ERR_FORMAT, m, key, ptr, "unknown field '%s' in %s; did you mean '%s'?", key->u.str.s, where,
            s.best);
    else
        err(L, FVM_ERR_FORMAT, m, key, ptr, "unknown field '%s' in %s (expected one of: %s)", key->u.str.s, where,
            list);
}

static bool key_allowed(const char *k, const char *const *allowed)
{
    for (int i = 0; allowed[i]; i++)
        if (strcmp(k, allowed[i]) == 0)
            return true;
    return false;
}

/* ---- instructions and functions ---------------------------------------- */

/* A scalar literal argument: a JSON number or boolean (format/SPEC.md, "Literals"). */
static bool is_literal(const fvm_doc *n)
{
    return n->kind == FVM_DOC_INT || n->kind == FVM_DOC_REAL || n->kind == FVM_DOC_BOOL;
}

/* The instructions a written one can become: itself, a const per literal
 * argument, a field per bound name of a destructuring (beyond the first). */
static size_t instr_count(const fvm_doc *n)
{
    if (n->kind != FVM_DOC_ARRAY || n->u.coll.n < 2)
        return 1;
    size_t k = 1, len = n->u.coll.n, first = len > 2 && n->u.coll.items[2]->kind == FVM_DOC_OBJECT ? 3 : 2;
    for (size_t i = first; i < len; i++)
        k += is_literal(n->u.coll.items[i]);
    if (n->u.coll.items[0]->kind == FVM_DOC_ARRAY && n->u.coll.items[0]->u.coll.n > 1)
        k += n->u.coll.items[0]->u.coll.n - 1;
    return k;
}

/* The op named by n (an error at ptr with a suggestion when there is none), FVM_OP_COUNT when unknown. */
static fvm_op read_op(loader *L, fvm_module *m, const fvm_doc *op, const char *p1)
{
    if (op->kind != FVM_DOC_STRING) {
        err(L, FVM_ERR_FORMAT, m, op, p1, "expected the op name (a string), found %s", kind_name(op));
        return FVM_OP_COUNT;
    }
    fvm_op id = fvm_op_lookup(op->u.str.s);
    if (id != FVM_OP_COUNT)
        return id;
    fvm_suggest s;
    fvm_suggest_init(&s, op->u.str.s);
    for (int i = 0; i < FVM_OP_COUNT; i++)
        fvm_suggest_add(&s, fvm_op_table[i].name);
    const char *why, *meant = fvm_suggest_synonym(op->u.str.s, &why);
    if (meant)
        err(L, FVM_ERR_FORMAT, m, op, p1, "unknown op '%.100s'; did you mean '%s' (%s)?", op->u.str.s, meant, why);
    else if (s.best)
        err(L, FVM_ERR_FORMAT, m, op, p1, "unknown op '%.100s'; did you mean '%s'?", op->u.str.s, s.best);
    else
        err(L, FVM_ERR_FORMAT, m, op, p1, "unknown op '%.100s' (format/SPEC.md lists the ops)", op->u.str.s);
    return FVM_OP_COUNT;
}

/* A destructuring [[n1, ..., nk], "fields", {"names"?}, s]: in (already
 * read, its op FIELDS) becomes field 0 and the next k - 1 instructions the
 * other fields, each binding one name; the checker picks each one's field
 * (fvm_fields). Returns the instructions it fills. */
static int read_fields(loader *L, fvm_module *m, const fvm_doc *n, const char *ptr, fvm_instr *in)
{
    fvm_arena *a = &L->p->arena;
    const fvm_doc *names = n->u.coll.items[0];
    const char *p0 = fvm_pointer_index(a, ptr, 0);
    size_t k = names->u.coll.n;
    fvm_fields *fs = fvm_arena_alloc(a, sizeof *fs);
    if (!fs || !(fs->names = fvm_arena_array(a, k + 1, sizeof *fs->names)) ||
        !(fs->name_locs = fvm_arena_array(a, k + 1, sizeof *fs->name_locs))) {
        err(L, FVM_ERR_NOMEM, m, n, ptr, "out of memory");
        in->op = FVM_OP_COUNT;
        return 1;
    }
    fs->n = (int)k;
    fs->attrs = in->attrs;
    fs->attrs_loc = in->attrs_loc;
    bool ok = k > 0;
    if (!ok)
        err(L, FVM_ERR_FORMAT, m, names, p0, "fields needs at least one name to bind: [[\"a\", \"b\"], \"fields\", s]");
    for (size_t j = 0; j < k; j++) {
        const fvm_doc *nm = names->u.coll.items[j];
        const char *pj = fvm_pointer_index(a, p0, j);
        fs->name_locs[j] = loc_of(L, m, nm, pj);
        if (check_name(L, m, nm, pj, "a name to bind"))
            fs->names[j] = nm->u.str.s;
        else
            ok = false;
    }
    if (in->nargs != 1) {
        err(L, FVM_ERR_TYPE, m, n, ptr, "fields takes 1 argument (the struct), found %d", in->nargs);
        ok = false;
    }
    fvm_instr first = *in;
    for (size_t j = 0; j < (k ? k : 1); j++) {
        fvm_instr *e = &in[j];
        *e = first;
        e->op = ok ? FVM_OP_FIELD : FVM_OP_COUNT; /* malformed: not checked further */
        e->name = k ? fs->names[j] : NULL;
        e->name_loc = k ? fs->name_locs[j] : first.name_loc;
        e->attrs = NULL; /* the checker names the field */
        e->attrs_loc = fs->attrs ? fs->attrs_loc : e->name_loc;
        e->fields = fs;
        e->field_pos = (int)j;
    }
    return k ? (int)k : 1;
}

/* Reads the written instruction n into f->instrs from *pos on: a const per
 * scalar literal argument (of an op that takes them), then the instruction
 * (or the fields of a destructuring); *pos moves past them. */
static void read_instr(loader *L, fvm_module *m, fvm_func *f, const fvm_doc *n, const char *ptr, int *pos)
{
    fvm_arena *a = &L->p->arena;
    fvm_instr *in = &f->instrs[*pos];
    in->loc = loc_of(L, m, n, ptr);
    in->attrs_loc = in->loc;
    in->op = FVM_OP_COUNT;
    *pos += 1;
    if (!expect_kind(L, m, n, ptr, FVM_DOC_ARRAY, "an instruction [name, op, {attributes}?, args...]"))
        return;
    size_t len = n->u.coll.n;
    if (len < 2) {
        err(L, FVM_ERR_FORMAT, m, n, ptr, "an instruction needs at least a name and an op: [name, op, ...]");
        return;
    }
    const fvm_doc *nm = n->u.coll.items[0], *opd = n->u.coll.items[1];
    const char *p0 = fvm_pointer_index(a, ptr, 0), *p1 = fvm_pointer_index(a, ptr, 1);
    fvm_op op = read_op(L, m, opd, p1);
    bool destructure = nm->kind == FVM_DOC_ARRAY;
    if (destructure && op != FVM_OP_FIELDS && op != FVM_OP_COUNT) {
        err(L, FVM_ERR_FORMAT, m, nm, p0,
            "an array of names binds several fields of a struct: its op is fields, not %s ([[\"a\", \"b\"], "
            "\"fields\", s])",
            fvm_op_table[op].name);
        op = FVM_OP_COUNT;
    } else if (!destructure && op == FVM_OP_FIELDS) {
        err(L, FVM_ERR_FORMAT, m, nm, p0,
            "fields binds an array of names, one per field: [[\"a\", \"b\"], \"fields\", s] (one field is field)");
        op = FVM_OP_COUNT;
    }
    size_t first = 2;
    const fvm_doc *attrs = NULL;
    if (len > 2 && n->u.coll.items[2]->kind == FVM_DOC_OBJECT) {
        attrs = n->u.coll.items[2];
        first = 3;
    }
    /* the consts of literal arguments come first, then the instruction */
    int nlit = 0;
    for (size_t i = first; op != FVM_OP_COUNT && (fvm_op_table[op].flags & OPF_LIT) && i < len; i++)
        nlit += is_literal(n->u.coll.items[i]);
    fvm_instr *lits = in;
    in = &f->instrs[*pos - 1 + nlit];
    *pos += nlit;
    in->loc = loc_of(L, m, n, ptr);
    in->attrs_loc = in->loc;
    in->op = op;
    if (!destructure && check_name(L, m, nm, p0, "the instruction's name"))
        in->name = nm->u.str.s;
    in->name_loc = loc_of(L, m, nm, p0);
    if (attrs) {
        in->attrs = attrs;
        in->attrs_loc = loc_of(L, m, in->attrs, fvm_pointer_index(a, ptr, 2));
    }
    in->nargs = (int)(len - first);
    in->arg_names = fvm_arena_array(a, len, sizeof(char *));
    in->arg_locs = fvm_arena_array(a, len, sizeof(fvm_loc));
    if (!in->arg_names || !in->arg_locs || (nlit && !(in->arg_literals = fvm_arena_array(a, len, sizeof(fvm_doc *))))) {
        err(L, FVM_ERR_NOMEM, m, n, ptr, "out of memory");
        in->op = FVM_OP_COUNT;
        return;
    }
    int lit = 0;
    for (size_t i = first; i < len; i++) {
        const fvm_doc *arg = n->u.coll.items[i];
        const char *pi = fvm_pointer_index(a, ptr, i);
        int k = (int)(i - first);
        in->arg_locs[k] = loc_of(L, m, arg, pi);
        if (arg->kind == FVM_DOC_OBJECT) {
            err(L, FVM_ERR_FORMAT, m, arg, pi, "attributes must come right after the op, at position 2");
            in->op = FVM_OP_COUNT; /* malformed: not checked further */
        } else if (is_literal(arg) && lit < nlit) { /* a const, its dtype the checker's */
            fvm_instr *c = &lits[lit++];
            c->name = fvm_arena_printf(a, "%s#%d", in->name ? in->name : "literal", k + 1);
            c->op = FVM_OP_CONST;
            c->literal = arg;
            c->lit_user = nlit - lit + 1;
            c->lit_arg = k;
            c->loc = c->name_loc = c->attrs_loc = in->arg_locs[k];
            c->arg_names = fvm_arena_array(a, 1, sizeof(char *));
            if (!c->name || !c->arg_names) {
                err(L, FVM_ERR_NOMEM, m, arg, pi, "out of memory");
                in->op = c->op = FVM_OP_COUNT;
                continue;
            }
            in->arg_names[k] = c->name;
            in->arg_literals[k] = arg;
        } else if (is_literal(arg) && op != FVM_OP_COUNT) {
            err(L, FVM_ERR_FORMAT, m, arg, pi,
                "%s takes no literal arguments (a number or boolean stands for a scalar only where an "
                "elementwise op's other operand gives its dtype): name a const",
                fvm_op_table[op].name);
        } else if (!is_literal(arg) &&
                   check_name(L, m, arg, pi, "an argument (the name of a parameter or an earlier instruction)")) {
            in->arg_names[k] = arg->u.str.s;
        }
    }
    if (destructure && in->op == FVM_OP_FIELDS)
        *pos += read_fields(L, m, n, ptr, in) - 1;
    else if (destructure)
        in->op = FVM_OP_COUNT;
}

/* The consts of literal arguments are named "<instruction>#<argument>"
 * ("y#2"); a name the function gives itself that contains '#' could be one
 * of them, and then the const's name gets more '#'s until it is new. */
static void literal_names(loader *L, fvm_func *f)
{
    const char **taken = NULL;
    int ntaken = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < f->nparams + f->ninstrs; i++) {
            const char *nm = i < f->nparams ? f->param_names[i] : f->instrs[i - f->nparams].name;
            bool mine = i >= f->nparams && f->instrs[i - f->nparams].literal;
            if (nm && !mine && strchr(nm, '#')) {
                if (pass)
                    taken[ntaken] = nm;
                ntaken++;
            }
        }
        if (!ntaken)
            return;
        if (!pass && !(taken = fvm_arena_array(&L->p->arena, (size_t)ntaken, sizeof *taken)))
            return;
        if (!pass)
            ntaken = 0;
    }
    for (int i = 0; i < f->ninstrs; i++) {
        fvm_instr *c = &f->instrs[i];
        for (int k = 0; c->literal && c->name && k < ntaken; k++) {
            if (strcmp(c->name, taken[k]))
                continue;
            const char *more = fvm_arena_printf(&L->p->arena, "%s#", c->name);
            if (!more)
                return;
            c->name = more;
            f->instrs[i + c->lit_user].arg_names[c->lit_arg] = more;
            k = -1; /* again, against every taken name */
        }
    }
}

static fvm_func *read_function(loader *L, fvm_module *m, const fvm_doc *key, const fvm_doc *n, const char *ptr)
{
    static const char *const allowed[] = {"doc", "params", "body", "result", NULL};
    fvm_arena *a = &L->p->arena;
    fvm_func *f = fvm_arena_alloc(a, sizeof *f);
    if (!f)
        return NULL;
    f->name = key->u.str.s;
    f->module = m;
    f->loc = loc_of(L, m, n, ptr);
    f->result_loc = f->loc;
    if (!expect_kind(L, m, n, ptr, FVM_DOC_OBJECT, "a function {params, body, result}"))
        return f;
    const fvm_doc *params = NULL, *body = NULL, *result = NULL;
    for (size_t i = 0; i < n->u.coll.n; i++) {
        const fvm_doc *k = n->u.coll.keys[i], *v = n->u.coll.items[i];
        const char *pk = fvm_pointer_join(a, ptr, k->u.str.s);
        if (!key_allowed(k->u.str.s, allowed)) {
            unknown_key(L, m, k, pk, allowed, "a function");
            continue;
        }
        if (!strcmp(k->u.str.s, "doc")) {
            if (expect_kind(L, m, v, pk, FVM_DOC_STRING, "a string"))
                f->doc = v->u.str.s;
        } else if (!strcmp(k->u.str.s, "params")) {
            params = v;
        } else if (!strcmp(k->u.str.s, "body")) {
            body = v;
        } else {
            result = v;
        }
    }
    if (params) {
        const char *pp = fvm_pointer_join(a, ptr, "params");
        if (expect_kind(L, m, params, pp, FVM_DOC_OBJECT, "an object of parameter names to types")) {
            size_t np = params->u.coll.n;
            f->nparams = (int)np;
            f->param_names = fvm_arena_array(a, np + 1, sizeof(char *));
            f->param_types = fvm_arena_array(a, np + 1, sizeof(fvm_type *));
            f->param_type_text = fvm_arena_array(a, np + 1, sizeof(char *));
            f->param_type_nodes = fvm_arena_array(a, np + 1, sizeof(fvm_doc *));
            f->param_locs = fvm_arena_array(a, np + 1, sizeof(fvm_loc));
            f->param_name_locs = fvm_arena_array(a, np + 1, sizeof(fvm_loc));
            if (!f->param_names || !f->param_types || !f->param_type_text || !f->param_type_nodes || !f->param_locs ||
                !f->param_name_locs)
                return NULL;
            for (size_t i = 0; i < np; i++) {
                const fvm_doc *k = params->u.coll.keys[i], *v = params->u.coll.items[i];
                const char *pk = fvm_pointer_join(a, pp, k->u.str.s);
                check_name(L, m, k, pk, "a parameter name");
                f->param_names[i] = k->u.str.s;
                f->param_locs[i] = loc_of(L, m, v, pk);
                f->param_name_locs[i] = loc_of(L, m, k, pk);
                if (expect_kind(L, m, v, pk, FVM_DOC_STRING, "a type string such as \"f32[3]\"")) {
                    f->param_type_text[i] = v->u.str.s;
                    f->param_type_nodes[i] = v;
                }
            }
        }
    }
    if (body) {
        const char *pb = fvm_pointer_join(a, ptr, "body");
        if (expect_kind(L, m, body, pb, FVM_DOC_ARRAY, "an array of instructions")) {
            size_t cap = 0;
            for (size_t i = 0; i < body->u.coll.n; i++)
                cap += instr_count(body->u.coll.items[i]);
            f->instrs = fvm_arena_array(a, cap + 1, sizeof(fvm_instr));
            if (!f->instrs)
                return NULL;
            int pos = 0;
            for (size_t i = 0; i < body->u.coll.n; i++)
                read_instr(L, m, f, body->u.coll.items[i], fvm_pointer_index(a, pb, i), &pos);
            f->ninstrs = pos;
            literal_names(L, f);
        }
    }
    if (!result) {
        err(L, FVM_ERR_FORMAT, m, n, ptr, "function '%s' has no 'result' (the name of the value it returns)", f->name);
    } else {
        const char *pr = fvm_pointer_join(a, ptr, "result");
        f->result_loc = loc_of(L, m, result, pr);
        if (check_name(L, m, result, pr, "the result (the name of a parameter or instruction)"))
            f->result_name = result->u.str.s;
    }
    return f;
}

/* ---- modules and includes ------------------------------------------------ */

static fvm_status load_module(loader *L, const char *path, const char *text, size_t len, const fvm_module *from,
                              const fvm_doc *from_node, const char *from_ptr, fvm_module **out);

/* Removes "./" and "dir/../" segments lexically (for display; the file is
 * identified by its real path). */
static char *tidy_path(char *p)
{
    char *segs[256];
    int n = 0;
    bool abs = p[0] == '/';
    char *save = NULL;
    for (char *s = strtok_r(p, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (!strcmp(s, "."))
            continue;
        if (!strcmp(s, "..") && n > 0 && strcmp(segs[n - 1], ".."))
            n--;
        else if (n < 256)
            segs[n++] = s;
    }
    char out[PATH_MAX] = "";
    size_t len = 0;
    if (abs)
        out[len++] = '/';
    for (int i = 0; i < n && len < sizeof out - 1; i++)
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%s", i ? "/" : "", segs[i]);
    if (len >= sizeof out)
        len = sizeof out - 1;
    memcpy(p, out, len + 1);
    return p;
}

static const char *relative_to(loader *L, const char *file, const char *inc)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        return inc;
    char *p = fvm_arena_printf(&L->p->arena, "%.*s/%s", (int)(slash - file), file, inc);
    return p && strlen(p) < PATH_MAX ? tidy_path(p) : p;
}

/* Where an include is read from: an absolute path as it is; a relative one
 * next to the including file, else in the first include directory that has
 * it (fvm_load_opts.include_dirs), else next to the including file (whose
 * error then says where else was looked). */
static const char *include_path(loader *L, const fvm_module *m, const char *inc)
{
    if (inc[0] == '/')
        return inc;
    const char *here = relative_to(L, m->path, inc);
    if (!here || !L->o || !L->o->ninclude_dirs || access(here, F_OK) == 0)
        return here;
    for (int i = 0; i < L->o->ninclude_dirs; i++) {
        const char *dir = L->o->include_dirs[i];
        char *p = fvm_arena_printf(&L->p->arena, "%s/%s", dir, inc);
        if (p && strlen(p) < PATH_MAX && access(p, F_OK) == 0)
            return tidy_path(p);
    }
    return here;
}

/* "hparams": {"name": {"type": "f32[]", "default": 0.05, "doc": "..."}, ...}.
 * False when out of memory. */
static bool read_hparams(loader *L, fvm_module *m, const fvm_doc *hp, const char *ptr)
{
    static const char *const allowed[] = {"doc", "type", "default", NULL};
    fvm_arena *a = &L->p->arena;
    if (!expect_kind(L, m, hp, ptr, FVM_DOC_OBJECT,
                     "an object of hyperparameter names to {\"type\": ..., \"default\": ...}"))
        return true;
    if (!(m->hparams = fvm_arena_array(a, hp->u.coll.n + 1, sizeof(fvm_hparam))))
        return false;
    for (size_t i = 0; i < hp->u.coll.n; i++) {
        const fvm_doc *k = hp->u.coll.keys[i], *v = hp->u.coll.items[i];
        const char *pk = fvm_pointer_join(a, ptr, k->u.str.s);
        if (!pk)
            return false;
        if (!fvm_is_identifier(k->u.str.s)) {
            err(L, FVM_ERR_NAME, m, k, pk, "a hyperparameter name must be an identifier ([A-Za-z_][A-Za-z0-9_]*)");
            continue;
        }
        if (!expect_kind(L, m, v, pk, FVM_DOC_OBJECT, "{\"type\": a tensor type, \"default\": its value}"))
            continue;
        fvm_hparam *h = &m->hparams[m->nhparams];
        *h = (fvm_hparam){.name = k->u.str.s, .loc = loc_of(L, m, k, pk), .module = m};
        bool ok = true;
        for (size_t j = 0; j < v->u.coll.n; j++) {
            const fvm_doc *fk = v->u.coll.keys[j], *fv = v->u.coll.items[j];
            const char *pf = fvm_pointer_join(a, pk, fk->u.str.s);
            if (!pf)
                return false;
            if (!key_allowed(fk->u.str.s, allowed)) {
                unknown_key(L, m, fk, pf, allowed, "a hyperparameter");
                ok = false;
            } else if (!strcmp(fk->u.str.s, "doc")) {
                if ((ok &= expect_kind(L, m, fv, pf, FVM_DOC_STRING, "a string")))
                    h->doc = fv->u.str.s;
            } else if (!strcmp(fk->u.str.s, "type")) {
                if ((ok &= expect_kind(L, m, fv, pf, FVM_DOC_STRING, "a tensor type string such as \"f32[]\"")))
                    h->type_text = fv->u.str.s, h->type_node = fv, h->type_loc = loc_of(L, m, fv, pf);
            } else {
                h->def = fv;
                h->def_loc = loc_of(L, m, fv, pf);
            }
        }
        if (ok && !h->def)
            err(L, FVM_ERR_FORMAT, m, v, pk, "hyperparameter '%s' needs a \"default\" value", h->name);
        else if (ok) {
            h->new_default = !h->type_text; /* merge_namespace finds what it sets */
            m->nhparams++;
        }
    }
    return true;
}

/* "privacy": {"noise_multiplier": Z or "HPARAM", "delta": D}: Z >= 0, D in (0, 1). */
static void read_privacy(loader *L, fvm_module *m, const fvm_doc *v, const char *pv)
{
    static const char *const allowed[] = {"noise_multiplier", "delta", NULL};
    fvm_arena *a = &L->p->arena;
    if (!expect_kind(L, m, v, pv, FVM_DOC_OBJECT, "an object {\"noise_multiplier\": ..., \"delta\": ...}"))
        return;
    const fvm_doc *z = NULL, *delta = NULL;
    int before = L->errors;
    for (size_t i = 0; i < v->u.coll.n; i++) {
        const fvm_doc *k = v->u.coll.keys[i], *fv = v->u.coll.items[i];
        const char *pk = fvm_pointer_join(a, pv, k->u.str.s);
        if (!key_allowed(k->u.str.s, allowed)) {
            unknown_key(L, m, k, pk, allowed, "\"privacy\"");
            continue;
        }
        bool is_z = !strcmp(k->u.str.s, "noise_multiplier");
        bool number = fv->kind == FVM_DOC_INT || fv->kind == FVM_DOC_REAL;
        double x = fv->kind == FVM_DOC_INT ? (double)fv->u.i : fv->kind == FVM_DOC_REAL ? fv->u.r : NAN;
        if (is_z) {
            m->privacy_z_loc = loc_of(L, m, fv, pk);
            if (fv->kind == FVM_DOC_STRING && fvm_is_identifier(fv->u.str.s))
                m->privacy_z_hparam = fv->u.str.s, z = fv;
            else if (number && x >= 0 && isfinite(x))
                m->privacy_z = x, z = fv;
            else
                err(L, FVM_ERR_FORMAT, m, fv, pk,
                    "the noise multiplier must be a number >= 0 or the name of a hyperparameter, found %s",
                    number ? "a negative number" : kind_name(fv));
        } else if (number && x > 0 && x < 1) {
            m->privacy_delta = x, delta = fv;
        } else {
            if (number)
                err(L, FVM_ERR_FORMAT, m, fv, pk, "delta must be a number in (0, 1), found %g", x);
            else
                err(L, FVM_ERR_FORMAT, m, fv, pk, "delta must be a number in (0, 1), found %s", kind_name(fv));
        }
    }
    if (L->errors > before)
        return;
    if (!z || !delta) {
        err(L, FVM_ERR_FORMAT, m, v, pv, "\"privacy\" needs \"%s\"", !z ? "noise_multiplier" : "delta");
        return;
    }
    m->privacy = v;
}

static void read_module(loader *L, fvm_module *m, const fvm_doc *root)
{
    static const char *const allowed[] = {"fedvm",   "doc",   "form",      "include", "privacy",
                                          "hparams", "types", "functions", NULL};
    fvm_arena *a = &L->p->arena;
    const char *base = m->base, *ptypes = fvm_pointer_join(a, base, "types"),
               *pfuncs = fvm_pointer_join(a, base, "functions"), *pinc = fvm_pointer_join(a, base, "include"),
               *php = fvm_pointer_join(a, base, "hparams");
    if (!ptypes || !pfuncs || !pinc || !php) {
        err(L, FVM_ERR_NOMEM, m, root, base, "out of memory");
        return;
    }
    if (!expect_kind(L, m, root, base, FVM_DOC_OBJECT, "a fedvm program (an object with \"fedvm\": 1)"))
        return;
    const fvm_doc *ver = fvm_doc_get(root, "fedvm");
    if (!ver) {
        err(L, FVM_ERR_FORMAT, m, root, base, "missing \"fedvm\": 1 (the format version)");
        return;
    }
    int64_t version = 0; /* 1 or 1.0, as JSON Schema counts integers */
    if (!fvm_doc_integer(ver, &version) || version != 1) {
        const char *pv = fvm_pointer_join(a, base, "fedvm");
        if (fvm_doc_integer(ver, &version))
            err(L, FVM_ERR_FORMAT, m, ver, pv, "unsupported format version %lld; this fedvm reads version 1",
                (long long)version);
        else
            err(L, FVM_ERR_FORMAT, m, ver, pv, "the format version must be the integer 1, found %s", kind_name(ver));
        return;
    }
    m->version = 1;
    const fvm_doc *includes = NULL, *types = NULL, *funcs = NULL, *hparams = NULL;
    for (size_t i = 0; i < root->u.coll.n; i++) {
        const fvm_doc *k = root->u.coll.keys[i], *v = root->u.coll.items[i];
        const char *pk = fvm_pointer_join(a, base, k->u.str.s);
        if (!key_allowed(k->u.str.s, allowed))
            unknown_key(L, m, k, pk, allowed, "the program");
        else if (!strcmp(k->u.str.s, "doc") && expect_kind(L, m, v, pk, FVM_DOC_STRING, "a string"))
            m->doc = v->u.str.s;
        else if (!strcmp(k->u.str.s, "form") &&
                 expect_kind(L, m, v, pk, FVM_DOC_OBJECT, "an object (written by fedplan; see format/PLANS.md)"))
            m->form = v;
        else if (!strcmp(k->u.str.s, "privacy"))
            read_privacy(L, m, v, pk);
        else if (!strcmp(k->u.str.s, "include"))
            includes = v;
        else if (!strcmp(k->u.str.s, "types"))
            types = v;
        else if (!strcmp(k->u.str.s, "hparams"))
            hparams = v;
        else if (!strcmp(k->u.str.s, "functions"))
            funcs = v;
    }
    if (types && expect_kind(L, m, types, ptypes, FVM_DOC_OBJECT, "an object of alias names to type strings")) {
        m->aliases = fvm_arena_array(a, types->u.coll.n + 1, sizeof(fvm_alias));
        if (!m->aliases)
            return;
        for (size_t i = 0; i < types->u.coll.n; i++) {
            const fvm_doc *k = types->u.coll.keys[i], *v = types->u.coll.items[i];
            const char *pk = fvm_pointer_join(a, ptypes, k->u.str.s);
            if (!fvm_is_identifier(k->u.str.s)) {
                err(L, FVM_ERR_NAME, m, k, pk, "a type alias name must be an identifier ([A-Za-z_][A-Za-z0-9_]*)");
                continue;
            }
            fvm_dtype dt;
            if (fvm_dtype_parse(k->u.str.s, k->u.str.len, &dt) || !strcmp(k->u.str.s, "CLIENTS") ||
                !strcmp(k->u.str.s, "SERVER")) {
                err(L, FVM_ERR_NAME, m, k, pk, "'%s' is reserved and cannot name a type alias", k->u.str.s);
                continue;
            }
            if (!expect_kind(L, m, v, pk, FVM_DOC_STRING, "a type string"))
                continue;
            fvm_alias *al = &m->aliases[m->naliases++];
            al->name = k->u.str.s;
            al->text = v->u.str.s;
            al->node = v;
            al->loc = loc_of(L, m, v, pk);
            al->module = m;
        }
    }
    if (hparams && !read_hparams(L, m, hparams, php))
        return;
    if (funcs && expect_kind(L, m, funcs, pfuncs, FVM_DOC_OBJECT, "an object of function names to functions")) {
        m->funcs = fvm_arena_array(a, funcs->u.coll.n + 1, sizeof(fvm_func *));
        if (!m->funcs)
            return;
        for (size_t i = 0; i < funcs->u.coll.n; i++) {
            const fvm_doc *k = funcs->u.coll.keys[i];
            const char *pk = fvm_pointer_join(a, pfuncs, k->u.str.s);
            if (!check_name(L, m, k, pk, "a function name"))
                continue;
            fvm_func *f = read_function(L, m, k, funcs->u.coll.items[i], pk);
            if (!f) {
                err(L, FVM_ERR_NOMEM, m, k, pk, "out of memory");
                return;
            }
            m->funcs[m->nfuncs++] = f;
        }
    }
    if (includes && (L->o && L->o->no_include))
        err(L, FVM_ERR_FORMAT, m, includes, pinc,
            "\"include\" is refused here: this program must be self-contained (no other file is read)");
    else if (includes && expect_kind(L, m, includes, pinc, FVM_DOC_ARRAY, "an array of file paths")) {
        size_t ni = includes->u.coll.n;
        m->includes = fvm_arena_array(a, ni + 1, sizeof(char *));
        m->include_locs = fvm_arena_array(a, ni + 1, sizeof(fvm_loc));
        m->included = fvm_arena_array(a, ni + 1, sizeof(fvm_module *));
        if (!m->includes || !m->include_locs || !m->included)
            return;
        for (size_t i = 0; i < ni; i++) {
            const fvm_doc *v = includes->u.coll.items[i];
            const char *pi = fvm_pointer_index(a, pinc, i);
            if (!expect_kind(L, m, v, pi, FVM_DOC_STRING, "a file path"))
                continue;
            if (v->u.str.len == 0) {
                err(L, FVM_ERR_FORMAT, m, v, pi, "an include path must not be empty");
                continue;
            }
            int k = m->nincludes++;
            m->includes[k] = v->u.str.s;
            m->include_locs[k] = loc_of(L, m, v, pi);
            load_module(L, include_path(L, m, v->u.str.s), NULL, 0, m, v, pi, &m->included[k]);
        }
    }
}

/* The node at JSON pointer ptr ("/a/b": object members, without '~' escapes) below root, or NULL. */
static const fvm_doc *doc_member(const fvm_doc *root, const char *ptr)
{
    char key[MAX_NAME + 1];
    while (root && *ptr == '/') {
        const char *end = strchr(ptr + 1, '/');
        size_t n = end ? (size_t)(end - ptr - 1) : strlen(ptr + 1);
        if (n > MAX_NAME || root->kind != FVM_DOC_OBJECT)
            return NULL;
        memcpy(key, ptr + 1, n);
        key[n] = 0;
        root = fvm_doc_get(root, key);
        ptr += n + 1;
    }
    return *ptr ? NULL : root;
}

static fvm_status load_module(loader *L, const char *path, const char *text, size_t len, const fvm_module *from,
                              const fvm_doc *from_node, const char *from_ptr, fvm_module **out)
{
    fvm_arena *a = &L->p->arena;
    *out = NULL;
    char real[PATH_MAX];
    const char *canon = path;
    if (!text) {
        if (!realpath(path, real)) {
            if (from) {
                int e = errno;
                if (L->o && L->o->ninclude_dirs && from_node && from_node->kind == FVM_DOC_STRING &&
                    from_node->u.str.s[0] != '/')
                    err(L, FVM_ERR_IO, from, from_node, from_ptr,
                        "cannot include '%s': %s (nor found in the %d include director%s)", path, strerror(e),
                        L->o->ninclude_dirs, L->o->ninclude_dirs == 1 ? "y" : "ies");
                else
                    err(L, FVM_ERR_IO, from, from_node, from_ptr, "cannot include '%s': %s", path, strerror(e));
            } else {
                fvm_diag_add(L->d, FVM_ERR_IO, &(fvm_loc){.file = path}, "cannot open: %s", strerror(errno));
                L->errors++;
            }
            L->fatal = true;
            return FVM_ERR_IO;
        }
        canon = real;
    }
    for (int i = 0; i < L->depth; i++) {
        if (strcmp(L->stack[i], canon) == 0) {
            char chain[1024] = "";
            for (int j = i; j < L->depth; j++) {
                strncat(chain, L->stack_disp[j], sizeof chain - strlen(chain) - 1);
                strncat(chain, " -> ", sizeof chain - strlen(chain) - 1);
            }
            strncat(chain, path, sizeof chain - strlen(chain) - 1);
            err(L, FVM_ERR_CYCLE, from, from_node, from_ptr, "include cycle: %s", chain);
            return FVM_ERR_CYCLE;
        }
    }
    for (int i = 0; i < L->p->nmodules; i++) {
        if (strcmp(L->p->modules[i]->real, canon) == 0) {
            *out = L->p->modules[i]; /* included twice (a diamond): loaded once */
            return FVM_OK;
        }
    }
    if (L->depth == MAX_INCLUDE_DEPTH || L->p->nmodules == MAX_MODULES) {
        err(L, FVM_ERR_LIMIT, from, from_node, from_ptr, "includes nested deeper than %d or more than %d files",
            MAX_INCLUDE_DEPTH, MAX_MODULES);
        return FVM_ERR_LIMIT;
    }
    fvm_module *m = fvm_arena_alloc(a, sizeof *m);
    if (!m)
        return FVM_ERR_NOMEM;
    m->path = fvm_arena_strdup(a, path);
    m->real = fvm_arena_strdup(a, canon);
    if (!m->path || !m->real)
        return FVM_ERR_NOMEM;
    if (L->p->nmodules == L->cap_modules) {
        int cap = L->cap_modules ? L->cap_modules * 2 : 8;
        fvm_module **mods = fvm_arena_array(a, (size_t)cap, sizeof *mods);
        if (!mods)
            return FVM_ERR_NOMEM;
        if (L->p->nmodules)
            memcpy(mods, L->p->modules, (size_t)L->p->nmodules * sizeof *mods);
        L->p->modules = mods;
        L->cap_modules = cap;
    }
    L->p->modules[L->p->nmodules++] = m;

    char *owned = NULL;
    if (!text) {
        int before = L->d ? L->d->n : 0;
        if (fvm_read_file(path, &owned, &len, L->d) != FVM_OK) {
            L->errors += (L->d ? L->d->n : 1) - before;
            L->fatal = true;
            return FVM_ERR_IO;
        }
        text = owned;
    }
    fvm_doc_src src = {.file = m->path, .text = text, .len = len};
    fvm_doc *root = NULL;
    fvm_status s = fvm_doc_parse(a, &src, &root, L->d);
    free(owned);
    if (s) {
        L->errors++;
        L->fatal = true;
        return s;
    }
    m->base = "";
    const fvm_doc *prog = root;
    if (!from && L->member[0]) { /* the program is one member of the file's document */
        if (!(prog = doc_member(root, L->member))) {
            err(L, FVM_ERR_FORMAT, m, root, "", "no fedvm program at %s (an object with \"fedvm\": 1)", L->member);
            L->fatal = true;
            return FVM_ERR_FORMAT;
        }
        m->base = L->member;
    }
    m->root = prog;
    L->stack[L->depth] = m->real;
    L->stack_disp[L->depth] = m->path;
    L->depth++;
    read_module(L, m, prog);
    L->depth--;
    *out = m;
    return FVM_OK;
}

/* ---- namespace and types -------------------------------------------------- */

static void merge_namespace(loader *L)
{
    fvm_program *p = L->p;
    fvm_arena *a = &p->arena;
    int nf = 0, na = 0, nh = 0;
    for (int i = 0; i < p->nmodules; i++) {
        nf += p->modules[i]->nfuncs;
        na += p->modules[i]->naliases;
        nh += p->modules[i]->nhparams;
    }
    p->funcs = fvm_arena_array(a, (size_t)nf + 1, sizeof(fvm_func *));
    p->aliases = fvm_arena_array(a, (size_t)na + 1, sizeof(fvm_alias *));
    p->hparams = fvm_arena_array(a, (size_t)nh + 1, sizeof(fvm_hparam *));
    if (!p->funcs || !p->aliases || !p->hparams)
        return;
    for (int i = 0; i < p->nmodules; i++) {
        fvm_module *m = p->modules[i];
        for (int j = 0; j < m->nfuncs; j++) {
            fvm_func *f = m->funcs[j], *prev = fvm_program_func(p, f->name);
            if (prev) {
                fvm_diag_add(L->d, FVM_ERR_NAME, &f->loc, "function '%s' is also defined at %s:%d:%d", f->name,
                             prev->loc.file, prev->loc.line, prev->loc.col);
                L->errors++;
                continue;
            }
            p->funcs[p->nfuncs++] = f;
        }
        for (int j = 0; j < m->naliases; j++) {
            fvm_alias *al = &m->aliases[j], *prev = fvm_program_alias(p, al->name);
            if (prev) {
                fvm_diag_add(L->d, FVM_ERR_NAME, &al->loc, "type alias '%s' is also defined at %s:%d:%d", al->name,
                             prev->loc.file, prev->loc.line, prev->loc.col);
                L->errors++;
                continue;
            }
            p->aliases[p->naliases++] = al;
        }
        for (int j = 0; j < m->nhparams; j++) {
            fvm_hparam *h = &m->hparams[j], *prev = fvm_program_hparam(p, h->name);
            if (h->new_default)
                continue;
            if (prev) {
                fvm_diag_add(L->d, FVM_ERR_NAME, &h->loc, "hyperparameter '%s' is also declared at %s:%d:%d", h->name,
                             prev->loc.file, prev->loc.line, prev->loc.col);
                L->errors++;
                continue;
            }
            p->hparams[p->nhparams++] = h;
        }
    }
    /* New defaults: only the program's own file (the first module) sets them,
     * each for a declaration of an included file. */
    for (int i = 0; i < p->nmodules; i++) {
        fvm_module *m = p->modules[i];
        for (int j = 0; j < m->nhparams; j++) {
            fvm_hparam *h = &m->hparams[j], *decl = fvm_program_hparam(p, h->name);
            if (!h->new_default)
                continue;
            L->errors++;
            if (i > 0)
                fvm_diag_add(L->d, FVM_ERR_FORMAT, &h->loc,
                             "hyperparameter '%s' needs a \"type\" (only the program's own file may give an "
                             "included hyperparameter a new default without one)",
                             h->name);
            else if (!decl)
                fvm_diag_add(L->d, FVM_ERR_NAME, &h->loc,
                             "hyperparameter '%s' has no \"type\", so it sets a new default, but no included file "
                             "declares '%s'",
                             h->name, h->name);
            else { /* the program's own file cannot also declare it: an object's names are unique */
                L->errors--;
                decl->default_from = h;
            }
        }
    }
}

enum { ALIAS_NEW, ALIAS_BUSY, ALIAS_DONE, ALIAS_BAD };

static const fvm_type *resolve_alias(loader *L, fvm_alias *al, int depth);

/* An alias used inside a type at nesting level 'depth': its definition's top
 * type is at that same level and its inner levels come below, whether or not
 * it was resolved before. */
static const fvm_type *lookup_alias(void *ctx, const char *name, const fvm_loc *loc, int depth, int *levels,
                                    fvm_diag *d)
{
    loader *L = ctx;
    fvm_alias *al = fvm_program_alias(L->p, name);
    if (!al) {
        fvm_suggest s;
        fvm_suggest_init(&s, name);
        for (int i = 0; i < L->p->naliases; i++)
            fvm_suggest_add(&s, L->p->aliases[i]->name);
        static const char *const dts[] = {"bool", "u8", "i32", "i64", "u32", "f32", "f64"};
        for (int i = 0; i < 7; i++)
            fvm_suggest_add(&s, dts[i]);
        if (s.best)
            fvm_diag_add(d, FVM_ERR_NAME, loc, "unknown type '%s'; did you mean '%s'?", name, s.best);
        else
            fvm_diag_add(d, FVM_ERR_NAME, loc,
                         "unknown type '%s' (dtypes are bool, u8, i32, i64, u32, f32, f64; aliases "
                         "are declared under \"types\")",
                         name);
        L->errors++;
        return NULL;
    }
    if (al->state == ALIAS_BUSY) {
        char chain[512] = "";
        int from = 0;
        for (int i = 0; i < L->nresolving; i++)
            if (L->aliases[i] == al)
                from = i;
        for (int i = from; i < L->nresolving; i++) {
            strncat(chain, L->aliases[i]->name, sizeof chain - strlen(chain) - 1);
            strncat(chain, " -> ", sizeof chain - strlen(chain) - 1);
        }
        strncat(chain, name, sizeof chain - strlen(chain) - 1);
        fvm_diag_add(d, FVM_ERR_CYCLE, loc, "type alias '%s' is defined in terms of itself: %s", name, chain);
        L->errors++;
        return NULL;
    }
    if (al->state == ALIAS_DONE && depth - 1 + al->height > FVM_MAX_TYPE_DEPTH) {
        fvm_diag_add(d, FVM_ERR_LIMIT, loc, "type alias '%s' makes the type nested deeper than %d levels", name,
                     FVM_MAX_TYPE_DEPTH);
        L->errors++;
        return NULL;
    }
    const fvm_type *t = resolve_alias(L, al, depth - 1);
    *levels = al->height;
    return t;
}

static const fvm_type *resolve_alias(loader *L, fvm_alias *al, int depth)
{
    if (al->state == ALIAS_DONE)
        return al->type;
    if (al->state == ALIAS_BAD)
        return NULL;
    al->state = ALIAS_BUSY;
    fvm_type_env env = {lookup_alias, L};
    const fvm_type *t;
    int before = L->d->n;
    /* Depth is bounded by FVM_MAX_TYPE_DEPTH, so the stack of aliases is too. */
    if (L->nresolving < (int)(sizeof L->aliases / sizeof *L->aliases))
        L->aliases[L->nresolving++] = al;
    fvm_status st = fvm_type_parse_ex(&L->p->arena, al->text, al->node, &env, &al->loc, depth, &al->height, &t, L->d);
    L->nresolving--;
    if (st) {
        if (L->d->n > before)
            L->errors++;
        al->state = ALIAS_BAD;
        return NULL;
    }
    fvm_type *copy = fvm_arena_alloc(&L->p->arena, sizeof *copy);
    if (!copy) {
        al->state = ALIAS_BAD;
        return NULL;
    }
    *copy = *t;
    copy->alias = al->name;
    al->type = copy;
    al->state = ALIAS_DONE;
    return copy;
}

static bool has_fn_type(const fvm_type *t)
{
    switch (t->kind) {
    case FVM_T_FN:
        return true;
    case FVM_T_STRUCT:
        for (int i = 0; i < t->u.strct.n; i++)
            if (has_fn_type(t->u.strct.elems[i]))
                return true;
        return false;
    case FVM_T_SEQ:
        return has_fn_type(t->u.seq.elem);
    case FVM_T_FED:
        return has_fn_type(t->u.fed.member);
    case FVM_T_TENSOR:
        return false;
    }
    return false;
}

static void resolve_types(loader *L)
{
    fvm_program *p = L->p;
    fvm_type_env env = {lookup_alias, L};
    for (int i = 0; i < p->naliases; i++)
        resolve_alias(L, p->aliases[i], 0);
    for (int i = 0; i < p->nfuncs; i++) {
        fvm_func *f = p->funcs[i];
        for (int j = 0; j < f->nparams; j++) {
            if (!f->param_type_text[j])
                continue;
            int before = L->d->n;
            if (fvm_type_parse_ex(&p->arena, f->param_type_text[j], f->param_type_nodes[j], &env, &f->param_locs[j], 0,
                                  NULL, &f->param_types[j], L->d) != FVM_OK) {
                f->param_types[j] = NULL;
                if (L->d->n > before)
                    L->errors++;
            } else if (has_fn_type(f->param_types[j])) {
                fvm_diag_add(L->d, FVM_ERR_TYPE, &f->param_locs[j],
                             "a parameter cannot have or contain a function type; pass functions by name in "
                             "attributes (as {\"fn\": \"name\"})");
                L->errors++;
                f->param_types[j] = NULL;
            }
        }
    }
}

/* ---- hyperparameters -------------------------------------------------------- */

/* Each hyperparameter's type: a tensor type with a static shape. */
static void resolve_hparam_types(loader *L)
{
    fvm_program *p = L->p;
    fvm_type_env env = {lookup_alias, L};
    for (int i = 0; i < p->nhparams; i++) {
        fvm_hparam *h = p->hparams[i];
        int before = L->d->n;
        if (fvm_type_parse_ex(&p->arena, h->type_text, h->type_node, &env, &h->type_loc, 0, NULL, &h->type, L->d)) {
            h->type = NULL;
            if (L->d->n > before)
                L->errors++;
            continue;
        }
        bool static_shape = h->type->kind == FVM_T_TENSOR;
        for (int k = 0; static_shape && k < h->type->u.tensor.dims.rank; k++)
            static_shape = h->type->u.tensor.dims.d[k] >= 0;
        if (!static_shape) {
            char buf[128];
            fvm_diag_add(L->d, FVM_ERR_TYPE, &h->type_loc,
                         "hyperparameter '%s' must have a tensor type with a static shape (such as f32[] or "
                         "i32[3]), found %s",
                         h->name, fvm_type_format(h->type, true, buf, sizeof buf));
            L->errors++;
            h->type = NULL;
        }
    }
}

/* A value of h's type from v into h->value (file and ptr locate v). */
static bool hparam_value(loader *L, fvm_hparam *h, const fvm_doc *v, const char *file, const char *ptr)
{
    fvm_ints shape = {.n = h->type->u.tensor.dims.rank};
    for (int k = 0; k < shape.n; k++)
        shape.v[k] = h->type->u.tensor.dims.d[k];
    fvm_tensor t = {0};
    int before = L->d->n;
    if (fvm_tensor_from_doc(v, true, h->type->u.tensor.dtype, &shape, file, ptr, &t, L->d)) {
        if (L->d->n > before)
            L->errors++;
        return false;
    }
    fvm_tensor_release(&h->value);
    h->value = t;
    h->bound = true;
    return true;
}

/* One override "name=value" (fvm_load_opts.sets): value is JSON text of the
 * hyperparameter's type. */
static void set_hparam(loader *L, const char *set)
{
    fvm_program *p = L->p;
    fvm_loc where = {.file = fvm_arena_printf(&p->arena, "--set %s", set)};
    const char *eq = strchr(set, '=');
    char *name = eq ? fvm_arena_printf(&p->arena, "%.*s", (int)(eq - set), set) : NULL;
    if (!where.file || (eq && !name)) {
        fvm_diag_add(L->d, FVM_ERR_NOMEM, NULL, "out of memory");
        L->errors++;
        return;
    }
    if (!eq || eq == set) {
        fvm_diag_add(L->d, FVM_ERR_USAGE, &where, "expected NAME=VALUE (a hyperparameter and its value)");
        L->errors++;
        return;
    }
    fvm_hparam *h = fvm_program_hparam(p, name);
    if (!h) {
        fvm_suggest s;
        fvm_suggest_init(&s, name);
        for (int i = 0; i < p->nhparams; i++)
            fvm_suggest_add(&s, p->hparams[i]->name);
        if (s.best)
            fvm_diag_add(L->d, FVM_ERR_NAME, &where, "the program has no hyperparameter '%s'; did you mean '%s'?", name,
                         s.best);
        else if (p->nhparams)
            fvm_diag_add(L->d, FVM_ERR_NAME, &where, "the program has no hyperparameter '%s'", name);
        else
            fvm_diag_add(L->d, FVM_ERR_NAME, &where,
                         "the program has no hyperparameter '%s' (it declares none: see \"hparams\" in "
                         "format/SPEC.md)",
                         name);
        L->errors++;
        return;
    }
    if (!h->type)
        return; /* its declaration is at fault, reported */
    /* errors at the option itself: the value is one line of the command */
    fvm_diag local = {0};
    fvm_doc *v = NULL;
    fvm_doc_src src = {where.file, eq + 1, strlen(eq + 1)};
    loader sub = *L;
    sub.d = &local;
    if (fvm_json_parse(&p->arena, &src, &v, &local) == FVM_OK && hparam_value(&sub, h, v, where.file, NULL))
        h->set = set;
    for (int i = 0; i < local.n; i++) {
        fvm_diag_add(L->d, local.errs[i].code, &where, "%s (a value of %s as JSON)", local.errs[i].msg, h->type_text);
        L->errors++;
    }
    fvm_diag_clear(&local);
}

/* Binds every hyperparameter: its default, then the overrides in order (the last one for a name wins). */
static void bind_hparams(loader *L)
{
    fvm_program *p = L->p;
    for (int i = 0; i < p->nhparams; i++) {
        fvm_hparam *h = p->hparams[i];
        const fvm_hparam *src = h->default_from ? h->default_from : h; /* where the default is written */
        if (h->type)
            hparam_value(L, h, src->def, src->def_loc.file, src->def_loc.ptr);
    }
    for (int i = 0; L->o && i < L->o->nsets; i++)
        set_hparam(L, L->o->sets[i]);
}

/* The root module's privacy noise multiplier when it names a hyperparameter:
 * that hyperparameter's (bound) value, a number >= 0. */
static void bind_privacy(loader *L)
{
    fvm_module *m = L->p->root;
    if (!m->privacy || !m->privacy_z_hparam)
        return;
    const fvm_loc *loc = &m->privacy_z_loc;
    fvm_hparam *h = fvm_program_hparam(L->p, m->privacy_z_hparam);
    if (!h) {
        fvm_suggest s;
        fvm_suggest_init(&s, m->privacy_z_hparam);
        for (int i = 0; i < L->p->nhparams; i++)
            fvm_suggest_add(&s, L->p->hparams[i]->name);
        fvm_diag_add(L->d, FVM_ERR_NAME, loc, "the noise multiplier names no hyperparameter '%s'%s%s%s",
                     m->privacy_z_hparam, s.best ? "; did you mean '" : "", s.best ? s.best : "", s.best ? "'?" : "");
        L->errors++;
        return;
    }
    if (!h->type || !h->bound)
        return; /* its own error is reported */
    const fvm_type *t = h->type;
    if (t->u.tensor.dims.rank != 0 || t->u.tensor.dtype == FVM_DTYPE_BOOL) {
        fvm_diag_add(L->d, FVM_ERR_TYPE, loc, "the noise multiplier's hyperparameter '%s' must be a number (a scalar)",
                     h->name);
        L->errors++;
        return;
    }
    double z = fvm_tensor_get_f64(&h->value, 0);
    if (!(z >= 0) || isinf(z)) {
        fvm_diag_add(L->d, FVM_ERR_TYPE, loc, "the noise multiplier (hyperparameter '%s') is %g, not a number >= 0",
                     h->name, z);
        L->errors++;
        return;
    }
    m->privacy_z = z;
}

/* A destructuring's attributes as written (fields takes "names": the
 * field bound to each name), decoded at its first field: as many as the
 * names bound. */
static void decode_fields(loader *L, fvm_instr *in)
{
    fvm_fields *fs = (fvm_fields *)in->fields;
    fvm_instr written = *in;
    written.op = FVM_OP_FIELDS;
    written.attrs = fs->attrs;
    written.attrs_loc = fs->attrs_loc;
    if (fvm_ir_decode_attrs(L->p, &L->p->arena, &written, L->d)) {
        L->errors++;
        return;
    }
    if (!(written.a.present & A(NAMES)))
        return;
    fs->fields = written.a.names;
    if (fs->fields.n != fs->n) {
        const fvm_doc *v = fvm_doc_get(fs->attrs, "names");
        fvm_loc l = {fs->attrs_loc.file, v->line, v->col, fvm_pointer_join(&L->p->arena, fs->attrs_loc.ptr, "names")};
        fvm_diag_add(L->d, FVM_ERR_FORMAT, &l, "fields: names has %d entr%s for %d bound name%s", fs->fields.n,
                     fs->fields.n == 1 ? "y" : "ies", fs->n, fs->n == 1 ? "" : "s");
        L->errors++;
    }
}

/* Every instruction's attributes, now that the namespace is known. */
static void decode_attrs(loader *L)
{
    for (int i = 0; i < L->p->nfuncs; i++) {
        fvm_func *f = L->p->funcs[i];
        for (int k = 0; k < f->ninstrs; k++) {
            fvm_instr *in = &f->instrs[k];
            if (in->fields && in->field_pos == 0 && in->op == FVM_OP_FIELD)
                decode_fields(L, in);
            if (fvm_ir_decode_attrs(L->p, &L->p->arena, in, L->d))
                L->errors++;
        }
    }
}

static fvm_status load(const char *path, const char *text, size_t len, const char *member, const fvm_load_opts *o,
                       fvm_program **out, fvm_diag *d)
{
    *out = NULL;
    fvm_diag local = {0};
    if (!d)
        d = &local;
    fvm_program *p = calloc(1, sizeof *p);
    if (!p)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    p->decode_attrs = fvm_ir_decode_attrs;
    loader L = {.p = p, .d = d, .member = member, .o = o};
    fvm_module *root = NULL;
    load_module(&L, path, text, len, NULL, NULL, NULL, &root);
    p->root = root;
    if (root && !L.fatal) {
        merge_namespace(&L);
        resolve_types(&L);
        resolve_hparam_types(&L);
        bind_hparams(&L);
        bind_privacy(&L);
        decode_attrs(&L);
    }
    fvm_diag_clear(&local);
    if (L.fatal || !root) {
        fvm_program_free(p);
        return d->n ? d->errs[0].code : FVM_ERR_FORMAT;
    }
    *out = p;
    if (L.errors) {
        p->load_errors = true;
        return d->n ? d->errs[0].code : FVM_ERR_FORMAT;
    }
    return FVM_OK;
}

fvm_status fvm_program_load(const char *path, fvm_program **out, fvm_diag *d)
{
    return load(path, NULL, 0, "", NULL, out, d);
}

fvm_status fvm_program_load_member(const char *path, const char *member, fvm_program **out, fvm_diag *d)
{
    return load(path, NULL, 0, member, NULL, out, d);
}

fvm_status fvm_program_load_text(const char *display_name, const char *text, size_t len, fvm_program **out, fvm_diag *d)
{
    return load(display_name, text, len, "", NULL, out, d);
}

fvm_status fvm_program_load_opts(const char *display_name, const char *text, size_t len, const char *member,
                                 const fvm_load_opts *o, fvm_program **out, fvm_diag *d)
{
    return load(display_name, text, len, member ? member : "", o, out, d);
}
