/* types.c - type constructors, the parser and printer of TFF's type notation, equality. */
#include "types.h"

#include <stdio.h>
#include <string.h>

#include "../core/doc.h"

/* ---- constructors ------------------------------------------------------- */

static fvm_type *new_type(fvm_arena *a, fvm_tkind k)
{
    fvm_type *t = fvm_arena_alloc(a, sizeof *t);
    if (t)
        t->kind = k;
    return t;
}

fvm_type *fvm_type_tensor(fvm_arena *a, fvm_dtype dt, const fvm_dims *dims)
{
    fvm_type *t = new_type(a, FVM_T_TENSOR);
    if (t) {
        t->u.tensor.dtype = dt;
        t->u.tensor.dims = *dims;
    }
    return t;
}

fvm_type *fvm_type_scalar(fvm_arena *a, fvm_dtype dt)
{
    fvm_dims d = {0};
    return fvm_type_tensor(a, dt, &d);
}

fvm_type *fvm_type_struct(fvm_arena *a, int n, const char *const *names, const fvm_type *const *elems)
{
    fvm_type *t = new_type(a, FVM_T_STRUCT);
    if (!t)
        return NULL;
    t->u.strct.n = n;
    t->u.strct.names = fvm_arena_array(a, (size_t)(n ? n : 1), sizeof(char *));
    t->u.strct.elems = fvm_arena_array(a, (size_t)(n ? n : 1), sizeof(fvm_type *));
    if (!t->u.strct.names || !t->u.strct.elems)
        return NULL;
    for (int i = 0; i < n; i++) {
        t->u.strct.names[i] = names ? names[i] : NULL;
        t->u.strct.elems[i] = elems[i];
    }
    return t;
}

fvm_type *fvm_type_seq(fvm_arena *a, const fvm_type *elem)
{
    fvm_type *t = new_type(a, FVM_T_SEQ);
    if (t)
        t->u.seq.elem = elem;
    return t;
}

fvm_type *fvm_type_fed(fvm_arena *a, const fvm_type *member, fvm_placement pl, bool all_equal)
{
    fvm_type *t = new_type(a, FVM_T_FED);
    if (t) {
        t->u.fed.member = member;
        t->u.fed.pl = pl;
        t->u.fed.all_equal = pl == FVM_PL_SERVER ? true : all_equal;
    }
    return t;
}

fvm_type *fvm_type_fn(fvm_arena *a, const fvm_type *param, const fvm_type *result)
{
    fvm_type *t = new_type(a, FVM_T_FN);
    if (t) {
        t->u.fn.param = param;
        t->u.fn.result = result;
    }
    return t;
}

/* ---- parser ------------------------------------------------------------- */

typedef struct parser {
    const char *text;
    size_t pos;
    fvm_arena *a;
    const fvm_type_env *env;
    const fvm_loc *loc;
    const fvm_doc *node; /* the string in its document, for exact columns */
    fvm_diag *d;
    int depth, max_depth;
} parser;

/* The location of byte 'at' of the text. */
static fvm_loc loc_at(const parser *p, size_t at)
{
    fvm_loc l = {0};
    if (!p->loc)
        return l;
    l = *p->loc;
    if (l.line <= 0)
        return l;
    if (p->node) {
        l.col = fvm_doc_string_col(p->node, at);
        return l;
    }
    int cps = 0;
    for (size_t i = 0; i < at && p->text[i]; i++)
        if ((p->text[i] & 0xC0) != 0x80)
            cps++;
    l.col += 1 + cps; /* +1 for the opening quote */
    return l;
}

static fvm_status perr(parser *p, size_t at, fvm_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static fvm_status perr(parser *p, size_t at, fvm_status code, const char *fmt, ...)
{
    fvm_loc l = loc_at(p, at);
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fvm_diag_add(p->d, code, &l, "in type \"%.200s\": %s", p->text, msg);
}

static void skip_sp(parser *p)
{
    while (p->text[p->pos] == ' ' || p->text[p->pos] == '\t' || p->text[p->pos] == '\n')
        p->pos++;
}

static bool is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident_char(char c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

static size_t ident_len(const char *s)
{
    size_t n = 0;
    if (!is_ident_start(s[0]))
        return 0;
    while (is_ident_char(s[n]))
        n++;
    return n;
}

static const char *describe(parser *p, char buf[32])
{
    char c = p->text[p->pos];
    if (!c)
        return "the end";
    if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
        snprintf(buf, 32, "byte 0x%02x", (unsigned char)c);
    else
        snprintf(buf, 32, "'%c'", c);
    return buf;
}

static fvm_status parse_type(parser *p, const fvm_type **out);

static fvm_status parse_dims(parser *p, fvm_dims *dims)
{
    char b[32];
    dims->rank = 0;
    p->pos++; /* [ */
    skip_sp(p);
    if (p->text[p->pos] == ']') {
        p->pos++;
        return FVM_OK;
    }
    for (;;) {
        skip_sp(p);
        size_t start = p->pos;
        int64_t v;
        if (p->text[p->pos] == '?') {
            v = -1;
            p->pos++;
        } else if (p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
            v = 0;
            while (p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
                if (v > (INT64_MAX - 9) / 10)
                    return perr(p, start, FVM_ERR_LIMIT, "dimension too large");
                v = v * 10 + (p->text[p->pos++] - '0');
            }
            if (is_ident_char(p->text[p->pos]) || p->text[p->pos] == '.')
                return perr(p, start, FVM_ERR_SYNTAX, "a dimension must be a decimal integer or '?'");
        } else {
            return perr(p, p->pos, FVM_ERR_SYNTAX, "expected a dimension (an integer or '?'), found %s",
                        describe(p, b));
        }
        if (dims->rank == FVM_MAX_RANK)
            return perr(p, start, FVM_ERR_LIMIT, "more than %d dimensions", FVM_MAX_RANK);
        dims->d[dims->rank++] = v;
        skip_sp(p);
        if (p->text[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->text[p->pos] == ']') {
            p->pos++;
            return FVM_OK;
        }
        return perr(p, p->pos, FVM_ERR_SYNTAX, "expected ',' or ']' in the shape, found %s", describe(p, b));
    }
}

static fvm_status parse_struct(parser *p, const fvm_type **out)
{
    char b[32];
    enum { MAXF = 4096 };
    const char *names[64];
    const fvm_type *elems[64];
    const char **pn = names;
    const fvm_type **pe = elems;
    int n = 0, cap = 64;
    p->pos++; /* < */
    skip_sp(p);
    if (p->text[p->pos] == '>') {
        p->pos++;
        *out = fvm_type_struct(p->a, 0, NULL, NULL);
        return *out ? FVM_OK : FVM_ERR_NOMEM;
    }
    for (;;) {
        skip_sp(p);
        size_t start = p->pos;
        const char *name = NULL;
        size_t il = ident_len(p->text + p->pos);
        size_t after = p->pos + il;
        while (p->text[after] == ' ' || p->text[after] == '\t' || p->text[after] == '\n')
            after++;
        if (il && p->text[after] == '=') {
            name = fvm_arena_strndup(p->a, p->text + p->pos, il);
            if (!name)
                return FVM_ERR_NOMEM;
            for (int i = 0; i < n; i++)
                if (pn[i] && strcmp(pn[i], name) == 0)
                    return perr(p, start, FVM_ERR_NAME, "duplicate field name '%s'", name);
            p->pos = after + 1;
        }
        const fvm_type *e;
        fvm_status s = parse_type(p, &e);
        if (s)
            return s;
        if (n == MAXF)
            return perr(p, start, FVM_ERR_LIMIT, "more than %d fields", MAXF);
        if (n == cap) {
            const char **nn = fvm_arena_array(p->a, (size_t)cap * 2, sizeof *nn);
            const fvm_type **ne = fvm_arena_array(p->a, (size_t)cap * 2, sizeof *ne);
            if (!nn || !ne)
                return FVM_ERR_NOMEM;
            memcpy(nn, pn, (size_t)n * sizeof *nn);
            memcpy(ne, pe, (size_t)n * sizeof *ne);
            pn = nn;
            pe = ne;
            cap *= 2;
        }
        pn[n] = name;
        pe[n++] = e;
        skip_sp(p);
        if (p->text[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->text[p->pos] == '>') {
            p->pos++;
            break;
        }
        return perr(p, p->pos, FVM_ERR_SYNTAX, "expected ',' or '>' in the struct, found %s", describe(p, b));
    }
    *out = fvm_type_struct(p->a, n, pn, pe);
    return *out ? FVM_OK : FVM_ERR_NOMEM;
}

static fvm_status expect_placement(parser *p, fvm_placement *pl)
{
    char b[32];
    if (strncmp(p->text + p->pos, "CLIENTS", 7) == 0 && !is_ident_char(p->text[p->pos + 7])) {
        *pl = FVM_PL_CLIENTS;
        p->pos += 7;
        return FVM_OK;
    }
    if (strncmp(p->text + p->pos, "SERVER", 6) == 0 && !is_ident_char(p->text[p->pos + 6])) {
        *pl = FVM_PL_SERVER;
        p->pos += 6;
        return FVM_OK;
    }
    return perr(p, p->pos, FVM_ERR_SYNTAX, "expected a placement, CLIENTS or SERVER, after '@', found %s",
                describe(p, b));
}

static fvm_status no_placement_inside(parser *p, size_t at, const fvm_type *t, const char *where)
{
    if (fvm_type_is_placed(t))
        return perr(p, at, FVM_ERR_TYPE, "a federated type cannot appear inside %s", where);
    if (t->kind == FVM_T_FN)
        return perr(p, at, FVM_ERR_TYPE, "a function type cannot appear inside %s", where);
    return FVM_OK;
}

static fvm_status parse_primary(parser *p, const fvm_type **out)
{
    char b[32];
    skip_sp(p);
    size_t start = p->pos;
    char c = p->text[p->pos];
    fvm_status s;
    if (c == '<')
        return parse_struct(p, out);
    if (c == '{') {
        p->pos++;
        const fvm_type *m;
        if ((s = parse_type(p, &m)))
            return s;
        if ((s = no_placement_inside(p, start + 1, m, "a federated type")))
            return s;
        skip_sp(p);
        if (p->text[p->pos] != '}')
            return perr(p, p->pos, FVM_ERR_SYNTAX, "expected '}' closing the federated member type, found %s",
                        describe(p, b));
        p->pos++;
        skip_sp(p);
        if (p->text[p->pos] != '@')
            return perr(p, p->pos, FVM_ERR_SYNTAX, "expected '@CLIENTS' after '{...}'");
        p->pos++;
        size_t at = p->pos;
        fvm_placement pl;
        if ((s = expect_placement(p, &pl)))
            return s;
        if (pl != FVM_PL_CLIENTS)
            return perr(p, at, FVM_ERR_TYPE, "'{T}@SERVER' is not a type: the server holds one value, write T@SERVER");
        *out = fvm_type_fed(p->a, m, FVM_PL_CLIENTS, false);
        return *out ? FVM_OK : FVM_ERR_NOMEM;
    }
    if (c == '(') {
        p->pos++;
        skip_sp(p);
        const fvm_type *param = NULL, *result;
        if (!(p->text[p->pos] == '-' && p->text[p->pos + 1] == '>')) {
            if ((s = parse_type(p, &param)))
                return s;
            skip_sp(p);
        }
        if (!(p->text[p->pos] == '-' && p->text[p->pos + 1] == '>'))
            return perr(p, p->pos, FVM_ERR_SYNTAX, "expected '->' in the function type, found %s", describe(p, b));
        p->pos += 2;
        if ((s = parse_type(p, &result)))
            return s;
        skip_sp(p);
        if (p->text[p->pos] != ')')
            return perr(p, p->pos, FVM_ERR_SYNTAX, "expected ')' closing the function type, found %s", describe(p, b));
        p->pos++;
        *out = fvm_type_fn(p->a, param, result);
        return *out ? FVM_OK : FVM_ERR_NOMEM;
    }
    size_t il = ident_len(p->text + p->pos);
    if (!il)
        return perr(p, p->pos, FVM_ERR_SYNTAX, "expected a type, found %s", describe(p, b));
    fvm_dtype dt;
    if (fvm_dtype_parse(p->text + p->pos, il, &dt)) {
        p->pos += il;
        fvm_dims dims = {0};
        skip_sp(p);
        if (p->text[p->pos] == '[' && (s = parse_dims(p, &dims)))
            return s;
        fvm_diag tmp = {0};
        if (fvm_dims_check_size(&dims, dt, &tmp) != FVM_OK) {
            fvm_diag_clear(&tmp);
            return perr(p, start, FVM_ERR_LIMIT,
                        "a tensor of dtype %s and this shape is larger than the %llu-byte "
                        "limit",
                        fvm_dtype_name(dt), (unsigned long long)FVM_MAX_TENSOR_BYTES);
        }
        *out = fvm_type_tensor(p->a, dt, &dims);
        return *out ? FVM_OK : FVM_ERR_NOMEM;
    }
    char name[128];
    if (il >= sizeof name)
        return perr(p, start, FVM_ERR_NAME, "type name too long");
    memcpy(name, p->text + p->pos, il);
    name[il] = 0;
    if (!strcmp(name, "CLIENTS") || !strcmp(name, "SERVER"))
        return perr(p, start, FVM_ERR_SYNTAX, "a placement must follow '@' (as in f32[]@%s)", name);
    p->pos += il;
    const fvm_type *t = NULL;
    if (p->env && p->env->lookup) {
        fvm_loc l = loc_at(p, start);
        int levels = 1;
        t = p->env->lookup(p->env->ctx, name, &l, p->depth, &levels, p->d);
        if (p->depth - 1 + levels > p->max_depth)
            p->max_depth = p->depth - 1 + levels;
        if (!t)
            return FVM_ERR_NAME;
    } else {
        return perr(p, start, FVM_ERR_NAME, "unknown type '%s' (dtypes are bool, u8, i32, i64, u32, f32, f64)", name);
    }
    *out = t;
    return FVM_OK;
}

static fvm_status parse_type(parser *p, const fvm_type **out)
{
    if (++p->depth > FVM_MAX_TYPE_DEPTH)
        return perr(p, p->pos, FVM_ERR_LIMIT, "nested deeper than %d levels", FVM_MAX_TYPE_DEPTH);
    if (p->depth > p->max_depth)
        p->max_depth = p->depth;
    skip_sp(p);
    size_t start = p->pos;
    const fvm_type *t;
    fvm_status s = parse_primary(p, &t);
    if (s)
        return s;
    int stars = 0;
    for (;;) {
        skip_sp(p);
        if (p->text[p->pos] != '*')
            break;
        /* Each '*' is a level of nesting (which also bounds the check below). */
        if (++p->depth > FVM_MAX_TYPE_DEPTH)
            return perr(p, p->pos, FVM_ERR_LIMIT, "nested deeper than %d levels", FVM_MAX_TYPE_DEPTH);
        if (p->depth > p->max_depth)
            p->max_depth = p->depth;
        stars++;
        if (stars == 1 && (s = no_placement_inside(p, start, t, "a sequence")))
            return s;
        p->pos++;
        if (!(t = fvm_type_seq(p->a, t)))
            return FVM_ERR_NOMEM;
    }
    p->depth -= stars;
    skip_sp(p);
    if (p->text[p->pos] == '@') {
        if (t->kind == FVM_T_FED)
            return perr(p, p->pos, FVM_ERR_TYPE, "a federated type cannot be placed again");
        if ((s = no_placement_inside(p, start, t, "a federated type")))
            return s;
        p->pos++;
        fvm_placement pl;
        if ((s = expect_placement(p, &pl)))
            return s;
        if (!(t = fvm_type_fed(p->a, t, pl, true)))
            return FVM_ERR_NOMEM;
    }
    p->depth--;
    *out = t;
    return FVM_OK;
}

fvm_status fvm_type_parse(fvm_arena *a, const char *text, const fvm_type_env *env, const fvm_loc *loc,
                          const fvm_type **out, fvm_diag *d)
{
    return fvm_type_parse_ex(a, text, NULL, env, loc, 0, NULL, out, d);
}

fvm_status fvm_type_parse_ex(fvm_arena *a, const char *text, const fvm_doc *node, const fvm_type_env *env,
                             const fvm_loc *loc, int depth, int *height, const fvm_type **out, fvm_diag *d)
{
    char b[32];
    parser p = {.text = text, .a = a, .env = env, .loc = loc, .node = node, .d = d, .depth = depth, .max_depth = depth};
    const fvm_type *t;
    fvm_status s = parse_type(&p, &t);
    if (s == FVM_ERR_NOMEM)
        return fvm_diag_add(d, s, loc, "out of memory");
    if (s)
        return s;
    skip_sp(&p);
    if (text[p.pos])
        return perr(&p, p.pos, FVM_ERR_SYNTAX, "unexpected %s after the type", describe(&p, b));
    if (height)
        *height = p.max_depth - depth;
    *out = t;
    return FVM_OK;
}

/* ---- printer ------------------------------------------------------------ */

typedef struct out {
    char *buf;
    size_t n, len; /* len may exceed n: the full length */
} out;

static void put(out *o, const char *s)
{
    size_t l = strlen(s);
    if (o->len < o->n) {
        size_t room = o->n - o->len;
        memcpy(o->buf + o->len, s, l < room ? l : room);
    }
    o->len += l;
}

static void print_type(out *o, const fvm_type *t, bool use_alias, bool top)
{
    if (use_alias && t->alias && !top) {
        put(o, t->alias);
        return;
    }
    char dbuf[FVM_DIMS_STR];
    switch (t->kind) {
    case FVM_T_TENSOR:
        put(o, fvm_dtype_name(t->u.tensor.dtype));
        fvm_dims_format(&t->u.tensor.dims, dbuf);
        put(o, dbuf);
        return;
    case FVM_T_STRUCT:
        put(o, "<");
        for (int i = 0; i < t->u.strct.n; i++) {
            if (i)
                put(o, ",");
            if (t->u.strct.names[i]) {
                put(o, t->u.strct.names[i]);
                put(o, "=");
            }
            print_type(o, t->u.strct.elems[i], use_alias, false);
        }
        put(o, ">");
        return;
    case FVM_T_SEQ:
        print_type(o, t->u.seq.elem, use_alias, false);
        put(o, "*");
        return;
    case FVM_T_FED:
        if (!t->u.fed.all_equal) {
            put(o, "{");
            print_type(o, t->u.fed.member, use_alias, false);
            put(o, "}@CLIENTS");
            return;
        }
        print_type(o, t->u.fed.member, use_alias, false);
        put(o, t->u.fed.pl == FVM_PL_SERVER ? "@SERVER" : "@CLIENTS");
        return;
    case FVM_T_FN:
        put(o, "(");
        if (t->u.fn.param)
            print_type(o, t->u.fn.param, use_alias, false);
        put(o, " -> ");
        print_type(o, t->u.fn.result, use_alias, false);
        put(o, ")");
        return;
    }
}

const char *fvm_type_format(const fvm_type *t, bool use_alias, char *buf, size_t n)
{
    out o = {buf, n ? n - 1 : 0, 0};
    print_type(&o, t, use_alias, !use_alias);
    if (!n)
        return buf;
    if (o.len > o.n) {
        if (o.n >= 3)
            memcpy(buf + o.n - 3, "...", 3);
        buf[o.n] = 0;
    } else {
        buf[o.len] = 0;
    }
    return buf;
}

char *fvm_type_str(fvm_arena *a, const fvm_type *t, bool use_alias)
{
    out o = {NULL, 0, 0};
    print_type(&o, t, use_alias, false);
    char *s = fvm_arena_alloc(a, o.len + 1);
    if (!s)
        return NULL;
    out o2 = {s, o.len, 0};
    print_type(&o2, t, use_alias, false);
    s[o.len] = 0;
    return s;
}

/* ---- relations ---------------------------------------------------------- */

static bool relate(const fvm_type *a, const fvm_type *b, bool compat)
{
    if (a == b)
        return true;
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case FVM_T_TENSOR:
        if (a->u.tensor.dtype != b->u.tensor.dtype || a->u.tensor.dims.rank != b->u.tensor.dims.rank)
            return false;
        for (int i = 0; i < a->u.tensor.dims.rank; i++) {
            int64_t x = a->u.tensor.dims.d[i], y = b->u.tensor.dims.d[i];
            if (x != y && !(compat && (x < 0 || y < 0)))
                return false;
        }
        return true;
    case FVM_T_STRUCT:
        if (a->u.strct.n != b->u.strct.n)
            return false;
        for (int i = 0; i < a->u.strct.n; i++) {
            const char *x = a->u.strct.names[i], *y = b->u.strct.names[i];
            if (compat ? (x && y && strcmp(x, y)) : ((!x) != (!y) || (x && strcmp(x, y))))
                return false;
            if (!relate(a->u.strct.elems[i], b->u.strct.elems[i], compat))
                return false;
        }
        return true;
    case FVM_T_SEQ:
        return relate(a->u.seq.elem, b->u.seq.elem, compat);
    case FVM_T_FED:
        if (a->u.fed.pl != b->u.fed.pl)
            return false;
        /* An all-equal value may go where one value per client is expected. */
        if (a->u.fed.all_equal != b->u.fed.all_equal && !(compat && a->u.fed.all_equal))
            return false;
        return relate(a->u.fed.member, b->u.fed.member, compat);
    case FVM_T_FN:
        if ((!a->u.fn.param) != (!b->u.fn.param))
            return false;
        if (a->u.fn.param && !relate(a->u.fn.param, b->u.fn.param, compat))
            return false;
        return relate(a->u.fn.result, b->u.fn.result, compat);
    }
    return false;
}

bool fvm_type_equal(const fvm_type *a, const fvm_type *b)
{
    return relate(a, b, false);
}

bool fvm_type_compatible(const fvm_type *actual, const fvm_type *formal)
{
    return relate(actual, formal, true);
}

/* The first place where actual does not fit formal (as fvm_type_compatible
 * judges), written into buf after the path 'at' to it; false when none. */
static bool mismatch(const fvm_type *a, const fvm_type *b, const char *at, char *buf, size_t n)
{
    char ta[128], tb[128], sub[256];
    const char *where = *at ? at : "the value";
    if (a->kind != b->kind || (a->kind == FVM_T_TENSOR && (a->u.tensor.dtype != b->u.tensor.dtype ||
                                                           a->u.tensor.dims.rank != b->u.tensor.dims.rank))) {
        snprintf(buf, n, "%s is %s where %s is expected", where, fvm_type_format(a, true, ta, sizeof ta),
                 fvm_type_format(b, true, tb, sizeof tb));
        return true;
    }
    switch (a->kind) {
    case FVM_T_TENSOR:
        if (relate(a, b, true))
            return false;
        snprintf(buf, n, "%s has shape %s where %s is expected", where, fvm_type_format(a, true, ta, sizeof ta),
                 fvm_type_format(b, true, tb, sizeof tb));
        return true;
    case FVM_T_STRUCT:
        for (int i = 0; i < b->u.strct.n; i++) {
            const char *y = b->u.strct.names[i];
            if (y && fvm_type_field_index(a, y) < 0) {
                snprintf(buf, n, "%s has no field '%s' (of type %s)", where, y,
                         fvm_type_format(b->u.strct.elems[i], true, tb, sizeof tb));
                return true;
            }
        }
        for (int i = 0; i < a->u.strct.n; i++) {
            const char *x = a->u.strct.names[i];
            if (x && fvm_type_field_index(b, x) < 0) {
                snprintf(buf, n, "%s has a field '%s' that is not expected", where, x);
                return true;
            }
        }
        if (a->u.strct.n != b->u.strct.n) {
            snprintf(buf, n, "%s has %d fields where %d are expected", where, a->u.strct.n, b->u.strct.n);
            return true;
        }
        for (int i = 0; i < a->u.strct.n; i++) {
            const char *x = a->u.strct.names[i], *y = b->u.strct.names[i];
            if (x && y && strcmp(x, y)) {
                snprintf(buf, n, "%s has field '%s' at position %d where '%s' is expected (fields are in order)", where,
                         x, i, y);
                return true;
            }
            if (x)
                snprintf(sub, sizeof sub, "%s.%s", *at ? at : "", x);
            else
                snprintf(sub, sizeof sub, "%s[%d]", *at ? at : "", i);
            if (mismatch(a->u.strct.elems[i], b->u.strct.elems[i], sub, buf, n))
                return true;
        }
        return false;
    case FVM_T_SEQ:
        snprintf(sub, sizeof sub, "%s*", *at ? at : "");
        return mismatch(a->u.seq.elem, b->u.seq.elem, sub, buf, n);
    case FVM_T_FED:
        if (a->u.fed.pl != b->u.fed.pl || (a->u.fed.all_equal != b->u.fed.all_equal && !a->u.fed.all_equal)) {
            snprintf(buf, n, "%s is %s where %s is expected", where, fvm_type_format(a, true, ta, sizeof ta),
                     fvm_type_format(b, true, tb, sizeof tb));
            return true;
        }
        return mismatch(a->u.fed.member, b->u.fed.member, at, buf, n);
    case FVM_T_FN:
        if (relate(a, b, true))
            return false;
        snprintf(buf, n, "%s is %s where %s is expected", where, fvm_type_format(a, true, ta, sizeof ta),
                 fvm_type_format(b, true, tb, sizeof tb));
        return true;
    }
    return false;
}

const char *fvm_type_mismatch(const fvm_type *actual, const fvm_type *formal, char *buf, size_t n)
{
    if (!n)
        return buf;
    buf[0] = 0;
    mismatch(actual, formal, "", buf, n);
    return buf;
}

bool fvm_type_is_placed(const fvm_type *t)
{
    switch (t->kind) {
    case FVM_T_FED:
        return true;
    case FVM_T_STRUCT:
        for (int i = 0; i < t->u.strct.n; i++)
            if (fvm_type_is_placed(t->u.strct.elems[i]))
                return true;
        return false;
    case FVM_T_SEQ:
        return fvm_type_is_placed(t->u.seq.elem);
    case FVM_T_FN:
        return (t->u.fn.param && fvm_type_is_placed(t->u.fn.param)) || fvm_type_is_placed(t->u.fn.result);
    case FVM_T_TENSOR:
        return false;
    }
    return false;
}

bool fvm_type_is_tensor_tree(const fvm_type *t)
{
    if (t->kind == FVM_T_TENSOR)
        return true;
    if (t->kind != FVM_T_STRUCT)
        return false;
    for (int i = 0; i < t->u.strct.n; i++)
        if (!fvm_type_is_tensor_tree(t->u.strct.elems[i]))
            return false;
    return true;
}

bool fvm_type_all_leaves(const fvm_type *t, bool (*pred)(fvm_dtype))
{
    if (t->kind == FVM_T_TENSOR)
        return pred(t->u.tensor.dtype);
    if (t->kind != FVM_T_STRUCT)
        return false;
    for (int i = 0; i < t->u.strct.n; i++)
        if (!fvm_type_all_leaves(t->u.strct.elems[i], pred))
            return false;
    return true;
}

bool fvm_is_identifier(const char *s)
{
    return *s && ident_len(s) == strlen(s);
}

int fvm_type_field_index(const fvm_type *t, const char *name)
{
    if (t->kind != FVM_T_STRUCT)
        return -1;
    for (int i = 0; i < t->u.strct.n; i++)
        if (t->u.strct.names[i] && strcmp(t->u.strct.names[i], name) == 0)
            return i;
    return -1;
}

/* ---- differentiation ---------------------------------------------------------- */

bool fvm_type_has_floats(const fvm_type *t)
{
    switch (t->kind) {
    case FVM_T_TENSOR:
        return fvm_dtype_is_float(t->u.tensor.dtype);
    case FVM_T_STRUCT:
        for (int i = 0; i < t->u.strct.n; i++)
            if (fvm_type_has_floats(t->u.strct.elems[i]))
                return true;
        return false;
    case FVM_T_SEQ:
        return fvm_type_has_floats(t->u.seq.elem);
    case FVM_T_FED:
        return fvm_type_has_floats(t->u.fed.member);
    case FVM_T_FN:
        return false;
    }
    return false;
}

bool fvm_type_has_seq(const fvm_type *t)
{
    switch (t->kind) {
    case FVM_T_SEQ:
        return true;
    case FVM_T_STRUCT:
        for (int i = 0; i < t->u.strct.n; i++)
            if (fvm_type_has_seq(t->u.strct.elems[i]))
                return true;
        return false;
    case FVM_T_FED:
        return fvm_type_has_seq(t->u.fed.member);
    default:
        return false;
    }
}

const fvm_type *fvm_type_cotangent(fvm_arena *a, const fvm_type *t)
{
    if (t->kind == FVM_T_FED && t->u.fed.pl == FVM_PL_CLIENTS && t->u.fed.all_equal)
        return fvm_type_fed(a, t->u.fed.member, FVM_PL_CLIENTS, false);
    if (t->kind == FVM_T_STRUCT && fvm_type_is_placed(t)) {
        const fvm_type **es = fvm_arena_array(a, (size_t)t->u.strct.n + 1, sizeof *es);
        if (!es)
            return NULL;
        for (int i = 0; i < t->u.strct.n; i++)
            if (!(es[i] = fvm_type_cotangent(a, t->u.strct.elems[i])))
                return NULL;
        return fvm_type_struct(a, t->u.strct.n, t->u.strct.names, es);
    }
    return t;
}
