/* xdev.c - a cross-device plan read back: its configuration checked against its phases' programs (see xdev.h). */
#include <errno.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/aggregate.h"
#include "../vm/check.h"
#include "doc.h"
#include "ir_read.h"
#include "xdev_impl.h"

typedef struct rd {
    fvm_xdev_plan *pl;
    fvm_diag *d;
} rd;

static fvm_status nomem(fvm_diag *d)
{
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

static fvm_loc at(rd *r, const fvm_doc *n, const char *ptr)
{
    return (fvm_loc){.file = r->pl->path, .line = n ? n->line : 0, .col = n ? n->col : 0, .ptr = ptr};
}

static const char *kind_name(fvm_doc_kind k)
{
    static const char *const names[] = {"null", "a boolean", "an integer", "a number", "a string", "an array",
                                        "an object"};
    return names[k];
}

/* Member key of object obj (at pointer ptr) of the given kind; NULL after an
 * error saying what it should be. */
static const fvm_doc *member(rd *r, const fvm_doc *obj, const char *ptr, const char *key, fvm_doc_kind kind,
                             const char *what)
{
    const fvm_doc *v = fvm_doc_get(obj, key);
    const char *p = fvm_pointer_join(&r->pl->arena, ptr, key);
    fvm_loc loc;
    if (!v) {
        loc = at(r, obj, ptr);
        fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "missing \"%s\" (%s)", key, what);
    } else if (v->kind != kind) {
        loc = at(r, v, p);
        fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "\"%s\" must be %s (%s), found %s", key, kind_name(kind), what,
                     kind_name(v->kind));
        v = NULL;
    }
    return v;
}

/* A function of phase program q named by member key of obj; NULL after an error. */
static const fvm_func *phase_func(rd *r, const fvm_program *q, const fvm_doc *obj, const char *ptr, const char *key,
                                  const char *what)
{
    const fvm_doc *v = member(r, obj, ptr, key, FVM_DOC_STRING, what);
    if (!v)
        return NULL;
    const fvm_func *f = fvm_program_func(q, v->u.str.s);
    if (!f) {
        fvm_loc loc = at(r, v, fvm_pointer_join(&r->pl->arena, ptr, key));
        fvm_diag_add(r->d, FVM_ERR_NAME, &loc, "no function '%s' in the program of %s", v->u.str.s,
                     q == r->pl->client ? "client" : "server");
    }
    return f;
}

/* Loads and checks the program at member ptr of the plan file. */
static fvm_status load_program(rd *r, const char *ptr, fvm_program **out)
{
    fvm_status s = fvm_program_load_member(r->pl->path, ptr, out, r->d);
    if (s == FVM_OK)
        s = fvm_check(*out, r->d);
    return s;
}

/* The inputs list at obj.inputs (at ptr): each {"param", "kind"} with kind
 * one of names[0..n) (mapped to kinds[]), in the order of f's parameters
 * from 0. */
static fvm_status inputs(rd *r, const fvm_doc *obj, const char *ptr, const fvm_func *f, int n,
                         const char *const *names, const xdev_input_kind *kinds, int *count,
                         xdev_input_kind **out)
{
    const fvm_doc *list = member(r, obj, ptr, "inputs", FVM_DOC_ARRAY, "the phase's inputs");
    if (!list)
        return FVM_ERR_FORMAT;
    const char *lp = fvm_pointer_join(&r->pl->arena, ptr, "inputs");
    *count = (int)list->u.coll.n;
    *out = fvm_arena_array(&r->pl->arena, list->u.coll.n + 1, sizeof **out);
    if (!*out || !lp)
        return nomem(r->d);
    fvm_status s = FVM_OK;
    for (size_t i = 0; i < list->u.coll.n; i++) {
        const fvm_doc *e = list->u.coll.items[i];
        const char *ep = fvm_pointer_index(&r->pl->arena, lp, i);
        fvm_loc loc = at(r, e, ep);
        if (e->kind != FVM_DOC_OBJECT) {
            s = fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "an input must be an object {\"param\", \"kind\"}");
            continue;
        }
        const fvm_doc *param = member(r, e, ep, "param", FVM_DOC_STRING, "a parameter name"),
                      *kind = member(r, e, ep, "kind", FVM_DOC_STRING, "how the parameter gets its value");
        if (!param || !kind) {
            s = FVM_ERR_FORMAT;
            continue;
        }
        int k = 0;
        while (k < n && strcmp(kind->u.str.s, names[k]))
            k++;
        loc = at(r, kind, fvm_pointer_join(&r->pl->arena, ep, "kind"));
        if (k == n) {
            s = fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "unknown kind of input '%s' (expected %s%s%s)",
                             kind->u.str.s, names[0], n > 1 ? " or " : "", n > 1 ? names[1] : "");
            continue;
        }
        (*out)[i] = kinds[k];
        loc = at(r, param, fvm_pointer_join(&r->pl->arena, ep, "param"));
        if ((int)i >= f->nparams || strcmp(f->param_names[i], param->u.str.s))
            s = fvm_diag_add(r->d, FVM_ERR_NAME, &loc, "input %zu is '%s', but parameter %zu of '%s' is %s%s%s", i,
                             param->u.str.s, i, f->name, (int)i < f->nparams ? "'" : "",
                             (int)i < f->nparams ? f->param_names[i] : "missing", (int)i < f->nparams ? "'" : "");
        else if ((kinds[k] == XDEV_CLIENT_KEY || kinds[k] == XDEV_ROUND_KEY) && !fvm_bind_is_key(f->param_types[i]))
            s = fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "'%s' receives a key, so it must be u32[2]", param->u.str.s);
    }
    return s;
}

/* ---- the client phase ---------------------------------------------------------- */

static bool integer_leaves(const fvm_type *t)
{
    if (t->kind == FVM_T_STRUCT) {
        for (int k = 0; k < t->u.strct.n; k++)
            if (!integer_leaves(t->u.strct.elems[k]))
                return false;
        return true;
    }
    return t->kind == FVM_T_TENSOR && t->u.tensor.dtype != FVM_DTYPE_BOOL && !fvm_dtype_is_float(t->u.tensor.dtype);
}

/* The secure sums among client.outputs, which must be the fields of work's
 * result 'secure', in order, with integer leaves and bit widths 1..62. */
static fvm_status secure_sums(rd *r, const fvm_doc *client)
{
    fvm_xdev_plan *pl = r->pl;
    const fvm_doc *outs = member(r, client, "/client", "outputs", FVM_DOC_ARRAY, "the client's outputs");
    if (!outs)
        return FVM_ERR_FORMAT;
    const fvm_type *res = pl->work->result_type;
    int sec = res->kind == FVM_T_STRUCT ? fvm_type_field_index(res, "secure") : -1;
    const fvm_type *st = sec >= 0 ? res->u.strct.elems[sec] : NULL;
    fvm_loc wloc = at(r, client, "/client");
    if (!st || st->kind != FVM_T_STRUCT || fvm_type_field_index(res, "updates") < 0)
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &wloc, "the client's '%s' must return <updates=..., secure=<...>>",
                            pl->work->name);
    pl->bitwidth = fvm_arena_array(&pl->arena, outs->u.coll.n + 1, sizeof *pl->bitwidth);
    if (!pl->bitwidth)
        return nomem(r->d);
    for (size_t i = 0; i < outs->u.coll.n; i++) {
        const fvm_doc *e = outs->u.coll.items[i];
        const char *ep = fvm_pointer_index(&pl->arena, "/client/outputs", i);
        const fvm_doc *agg = e->kind == FVM_DOC_OBJECT ? fvm_doc_get(e, "aggregation") : NULL;
        if (!agg || agg->kind != FVM_DOC_STRING || strcmp(agg->u.str.s, "secure_sum"))
            continue;
        const fvm_doc *name = member(r, e, ep, "name", FVM_DOC_STRING, "the output's name"),
                      *bits = member(r, e, ep, "bitwidth", FVM_DOC_INT, "the secure sum's bit width");
        if (!name || !bits)
            return FVM_ERR_FORMAT;
        int j = pl->nsecure;
        fvm_loc loc = at(r, e, ep);
        if (j >= st->u.strct.n || !st->u.strct.names[j] || strcmp(st->u.strct.names[j], name->u.str.s))
            return fvm_diag_add(r->d, FVM_ERR_NAME, &loc,
                                "secure sum '%s' is not field %d of the secure inputs that '%s' returns",
                                name->u.str.s, j, pl->work->name);
        if (bits->u.i < 1 || bits->u.i > 62 || !integer_leaves(st->u.strct.elems[j]))
            return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                                "secure sum '%s' needs a bit width from 1 to 62 over integer tensors", name->u.str.s);
        pl->bitwidth[pl->nsecure++] = (int)bits->u.i;
    }
    if (pl->nsecure != st->u.strct.n)
        return fvm_diag_add(r->d, FVM_ERR_FORMAT, &wloc, "'%s' returns %d secure-sum inputs; the outputs list %d",
                            pl->work->name, st->u.strct.n, pl->nsecure);
    return FVM_OK;
}

static fvm_status read_client(rd *r, const fvm_doc *root)
{
    fvm_xdev_plan *pl = r->pl;
    const fvm_doc *client = member(r, root, "", "client", FVM_DOC_OBJECT, "the client phase");
    if (!client)
        return FVM_ERR_FORMAT;
    fvm_status s = load_program(r, "/client/program", &pl->client);
    if (s)
        return s;
    if (!(pl->work = phase_func(r, pl->client, client, "/client", "work", "the client's function")))
        return FVM_ERR_NAME;
    static const char *const names[] = {"data", "client_key"};
    static const xdev_input_kind kinds[] = {XDEV_DATA, XDEV_CLIENT_KEY};
    if ((s = inputs(r, client, "/client", pl->work, 2, names, kinds, &pl->ninputs, &pl->inputs)))
        return s;
    fvm_loc loc = at(r, client, "/client");
    if (pl->work->federated || pl->work->nparams != pl->ninputs + 1)
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the client's '%s' must be a local function of the inputs and the broadcast (%d "
                            "parameters)",
                            pl->work->name, pl->ninputs + 1);
    return secure_sums(r, client);
}

/* ---- the server phase ------------------------------------------------------------ */

/* server.partial: the aggregation in stages, blocks of FVM_AGG_BLOCK
 * clients folded into partials <acc, secure>, merged and combined. */
static fvm_status read_partial(rd *r, const fvm_doc *server)
{
    fvm_xdev_plan *pl = r->pl;
    const char *pp = "/server/partial";
    const fvm_doc *part = member(r, server, "/server", "partial", FVM_DOC_OBJECT, "the aggregation in stages"),
                  *block = part ? member(r, part, pp, "block", FVM_DOC_INT, "the clients of a block") : NULL;
    if (!block)
        return FVM_ERR_FORMAT;
    pl->partial = phase_func(r, pl->server, part, pp, "function", "a block's partial aggregate");
    pl->merge = phase_func(r, pl->server, part, pp, "merge", "the merge of two accumulators");
    pl->combine = phase_func(r, pl->server, part, pp, "combine", "the partials combined");
    if (!pl->partial || !pl->merge || !pl->combine)
        return FVM_ERR_NAME;
    fvm_loc loc = at(r, block, "/server/partial/block");
    if (block->u.i != FVM_AGG_BLOCK)
        return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "blocks of %lld clients; fedvm aggregates blocks of %d",
                            (long long)block->u.i, FVM_AGG_BLOCK);
    loc = at(r, part, pp);
    const fvm_type *ps = pl->combine->nparams == 2 ? pl->combine->param_types[1] : NULL, *pt;
    if (!ps || ps->kind != FVM_T_FED || ps->u.fed.pl != FVM_PL_CLIENTS || (pt = ps->u.fed.member)->kind != FVM_T_STRUCT ||
        pt->u.strct.n != 2 || fvm_type_field_index(pt, "acc") != 0 || fvm_type_field_index(pt, "secure") != 1 ||
        pl->partial->nparams != 1 || !fvm_type_equal(pl->partial->param_types[0], pl->aggregate->param_types[0]) ||
        pl->merge->nparams != 2 || pl->merge->federated ||
        !fvm_type_equal(pl->combine->result_type, pl->aggregate->result_type))
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the partial aggregate's functions must be: '%s' the updates ({U}@CLIENTS) -> <acc, "
                            "secure>; '%s' (A, A) -> A; '%s' (A@SERVER, {<acc, secure>}@CLIENTS) -> <report, "
                            "secure>",
                            pl->partial->name, pl->merge->name, pl->combine->name);
    pl->partial_type = pt;
    return FVM_OK;
}

static fvm_status read_server(rd *r, const fvm_doc *root)
{
    fvm_xdev_plan *pl = r->pl;
    const fvm_doc *server = member(r, root, "", "server", FVM_DOC_OBJECT, "the server phase");
    if (!server)
        return FVM_ERR_FORMAT;
    fvm_status s = load_program(r, "/server/program", &pl->server);
    if (s)
        return s;
    const char *sp = "/server";
    pl->initialize = phase_func(r, pl->server, server, sp, "initialize", "the server's initial state");
    pl->prepare = phase_func(r, pl->server, server, sp, "prepare", "what the server broadcasts");
    pl->aggregate = phase_func(r, pl->server, server, sp, "aggregate", "the aggregation of the updates");
    pl->result = phase_func(r, pl->server, server, sp, "result", "the new state and the metrics");
    if (!pl->initialize || !pl->prepare || !pl->aggregate || !pl->result)
        return FVM_ERR_NAME;
    static const char *const names[] = {"state", "round_key"};
    static const xdev_input_kind kinds[] = {XDEV_STATE, XDEV_ROUND_KEY};
    if ((s = inputs(r, server, sp, pl->prepare, 2, names, kinds, &pl->nserver, &pl->server_inputs)))
        return s;
    fvm_loc loc = at(r, server, sp);
    const fvm_type *res = pl->result->result_type, *agg = pl->aggregate->result_type;
    const fvm_type *ws = pl->aggregate->nparams == 1 ? pl->aggregate->param_types[0] : NULL;
    if (pl->nserver < 1 || pl->server_inputs[0] != XDEV_STATE || pl->prepare->nparams != pl->nserver)
        return fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "the server's inputs are the state, then the round key, "
                            "and they are all of '%s''s parameters", pl->prepare->name);
    if (pl->initialize->nparams > 1 || (pl->initialize->nparams && !fvm_bind_is_key(pl->initialize->param_types[0])))
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc, "the server's '%s' takes nothing or a key", pl->initialize->name);
    if (!ws || ws->kind != FVM_T_FED || ws->u.fed.pl != FVM_PL_CLIENTS || ws->u.fed.all_equal ||
        agg->kind != FVM_T_STRUCT || agg->u.strct.n != 2)
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the server's '%s' must take the updates ({U}@CLIENTS) and return <report, secure>",
                            pl->aggregate->name);
    if (pl->result->nparams != pl->nserver + 2 || res->kind != FVM_T_STRUCT || res->u.strct.n != 2)
        return fvm_diag_add(r->d, FVM_ERR_TYPE, &loc,
                            "the server's '%s' must take the inputs, the report and the secure sums and return "
                            "<state, metrics>",
                            pl->result->name);
    const fvm_type *st = pl->initialize->result_type;
    pl->state = st->kind == FVM_T_FED ? st->u.fed.member : st;
    pl->metrics = res->u.strct.elems[1];
    return read_partial(r, server);
}

/* ---- the plan ------------------------------------------------------------------- */

static void sha256_hex(const char *text, size_t len, char out[65])
{
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, len, (const uint8_t *)text);
    sha256_digest(&ctx, sizeof digest, digest);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

fvm_status fvm_xdev_open(const char *path, unsigned phases, fvm_xdev_plan **out, fvm_diag *d)
{
    *out = NULL;
    fvm_xdev_plan *pl = calloc(1, sizeof *pl);
    if (!pl || !(pl->path = strdup(path))) {
        free(pl);
        return nomem(d);
    }
    rd r = {pl, d};
    char *text = NULL;
    size_t len = 0;
    fvm_doc *root = NULL;
    fvm_status s = fvm_read_file(path, &text, &len, d);
    if (s == FVM_OK) {
        sha256_hex(text, len, pl->id);
        fvm_doc_src src = {.file = pl->path, .text = text, .len = len};
        s = fvm_doc_parse(&pl->arena, &src, &root, d);
    }
    free(text);
    if (s == FVM_OK && root->kind != FVM_DOC_OBJECT) {
        fvm_loc loc = at(&r, root, "");
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "expected a cross-device plan (an object with \"plan\": %d), found %s",
                         FVM_XDEV_VERSION, kind_name(root->kind));
    }
    const fvm_doc *ver = s ? NULL : fvm_doc_get(root, "plan"), *kind = s ? NULL : fvm_doc_get(root, "kind");
    fvm_loc loc = at(&r, ver ? ver : root, ver ? "/plan" : "");
    if (s == FVM_OK && !ver)
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc,
                         "missing \"plan\": %d (the plan format version); a cross-device plan is written by "
                         "'fedplan PROGRAM --to cross-device'",
                         FVM_XDEV_VERSION);
    else if (s == FVM_OK && (ver->kind != FVM_DOC_INT || ver->u.i != FVM_XDEV_VERSION))
        s = ver->kind == FVM_DOC_INT
                ? fvm_diag_add(d, FVM_ERR_FORMAT, &loc,
                               "plan format version %lld; this fedvm reads version %d (write the plan again with "
                               "this version's fedplan)",
                               (long long)ver->u.i, FVM_XDEV_VERSION)
                : fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "the plan format version must be the integer %d, found %s",
                               FVM_XDEV_VERSION, kind_name(ver->kind));
    if (s == FVM_OK && (!kind || kind->kind != FVM_DOC_STRING || strcmp(kind->u.str.s, "cross-device"))) {
        loc = at(&r, kind ? kind : root, kind ? "/kind" : "");
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "expected \"kind\": \"cross-device\"%s%s",
                         kind && kind->kind == FVM_DOC_STRING ? ", found " : "",
                         kind && kind->kind == FVM_DOC_STRING ? kind->u.str.s : "");
    }
    if (s == FVM_OK && (phases & FVM_XDEV_CLIENT))
        s = read_client(&r, root);
    if (s == FVM_OK && (phases & FVM_XDEV_SERVER))
        s = read_server(&r, root);
    if (s) {
        fvm_xdev_close(pl);
        return s;
    }
    *out = pl;
    return FVM_OK;
}

void fvm_xdev_close(fvm_xdev_plan *pl)
{
    if (!pl)
        return;
    fvm_program_free(pl->client);
    fvm_program_free(pl->server);
    fvm_arena_free(&pl->arena);
    free(pl->path);
    free(pl);
}

const char *fvm_xdev_id(const fvm_xdev_plan *pl)
{
    return pl->id;
}

/* ---- the files exchanged --------------------------------------------------------- */

static const char *writer_of(const char *kind)
{
    return !strcmp(kind, "state")       ? "'fedvm server PLAN init', 'aggregate' or 'merge'"
           : !strcmp(kind, "broadcast") ? "'fedvm server PLAN prepare'"
           : !strcmp(kind, "partial")   ? "'fedvm device --partial'"
                                        : "'fedvm device'";
}

fvm_status xdev_load(const char *path, const char *kind, const fvm_xdev_plan *plan, fvm_safetensors **out,
                     fvm_diag *d)
{
    fvm_status s = fvm_safetensors_load(path, out, d);
    if (s)
        return s;
    fvm_loc loc = {.file = path};
    const char *k = fvm_safetensors_meta(*out, XDEV_KIND), *id = fvm_safetensors_meta(*out, XDEV_PLAN);
    if (!k || strcmp(k, kind))
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc, "%s%s%s, not a%s %s (the file %s writes)",
                         k ? (*k == 'u' ? "this is an " : "this is a ")
                           : "not a file of a cross-device plan (no fedvm.kind in its metadata)",
                         k ? k : "", k ? " file of a cross-device plan" : "", *kind == 'u' ? "n" : "", kind,
                         writer_of(kind));
    else if (plan && (!id || strcmp(id, plan->id)))
        s = fvm_diag_add(d, FVM_ERR_USAGE, &loc,
                         "this %s belongs to another plan (fedvm.plan %.16s...), not to %s (%.16s...)", kind,
                         id ? id : "not recorded", plan->path, plan->id);
    if (s) {
        fvm_safetensors_free(*out);
        *out = NULL;
    }
    return s;
}

static bool parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

fvm_status xdev_meta_int(const fvm_safetensors *f, const char *path, const char *key, int64_t lo, int64_t hi,
                         int64_t *out, fvm_diag *d)
{
    const char *v = fvm_safetensors_meta(f, key);
    if (v && parse_int(v, lo, hi, out))
        return FVM_OK;
    fvm_loc loc = {.file = path};
    return fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s: expected an integer from %lld to %lld, found %s%s%s", key,
                        (long long)lo, (long long)hi, v ? "'" : "", v ? v : "nothing", v ? "'" : "");
}

fvm_status xdev_meta_ints(const fvm_safetensors *f, const char *path, const char *key, int64_t lo, int64_t hi,
                          int64_t **out, int64_t *n, fvm_diag *d)
{
    *out = NULL;
    *n = 0;
    const char *v = fvm_safetensors_meta(f, key);
    fvm_loc loc = {.file = path};
    if (!v)
        return fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s is missing", key);
    size_t cap = 1;
    for (const char *c = v; *c; c++)
        cap += *c == ',';
    char *copy = strdup(v);
    int64_t *vals = malloc(cap * sizeof *vals);
    if (!copy || !vals) {
        free(copy);
        free(vals);
        return nomem(d);
    }
    char *save = NULL;
    for (char *tok = *copy ? strtok_r(copy, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save))
        if (!parse_int(tok, lo, hi, &vals[(*n)++])) {
            free(copy);
            free(vals);
            *n = 0;
            return fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "metadata %s: '%s' is not an integer from %lld to %lld",
                                key, tok, (long long)lo, (long long)hi);
        }
    free(copy);
    *out = vals;
    return FVM_OK;
}

int64_t xdev_position(const int64_t *sel, int64_t n, int64_t c)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (sel[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sel[lo] == c ? lo : -1;
}

char *xdev_ints_text(const int64_t *v, int64_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%s%lld", i ? "," : "", (long long)v[i]);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

fvm_status xdev_vm(const fvm_program *p, fvm_vm **out, fvm_diag *d)
{
    fvm_vm_config cfg = {.nclients = -1};
    return fvm_vm_new(p, &cfg, out, d);
}
