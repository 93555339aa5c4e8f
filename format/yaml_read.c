/* yaml_read.c - YAML text to a document tree: libyaml's event parser, core-schema scalars, anchors shared as a DAG under size and depth limits. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <yaml.h>

#include "../vm/core/doc.h"
#include "doc_io.h"
#include "yaml_core.h"

#define CORE_TAG "tag:yaml.org,2002:"

/* ---- core schema ---------------------------------------------------------- */

static bool is_word(const char *s, size_t n, const char *w)
{
    return strlen(w) == n && memcmp(s, w, n) == 0;
}

static bool core_null(const char *s, size_t n)
{
    return n == 0 || is_word(s, n, "~") || is_word(s, n, "null") || is_word(s, n, "Null") || is_word(s, n, "NULL");
}

/* 1 for true, 0 for false, -1 for neither. */
static int core_bool(const char *s, size_t n)
{
    if (is_word(s, n, "true") || is_word(s, n, "True") || is_word(s, n, "TRUE"))
        return 1;
    if (is_word(s, n, "false") || is_word(s, n, "False") || is_word(s, n, "FALSE"))
        return 0;
    return -1;
}

static int digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Integer forms [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+. Returns false when s has
 * none of them; otherwise *fits tells whether the value fits int64 (then in *v). */
static bool core_int(const char *s, size_t n, int64_t *v, bool *fits)
{
    size_t i = 0;
    int base = 10;
    bool neg = false;
    if (n > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'x')) {
        base = s[1] == 'o' ? 8 : 16;
        i = 2;
    } else if (n > 0 && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == n)
        return false;
    uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t mag = 0;
    bool over = false;
    for (; i < n; i++) {
        int dv = digit_value(s[i]);
        if (dv < 0 || dv >= base)
            return false;
        if (over || mag > (lim - (uint64_t)dv) / (uint64_t)base)
            over = true;
        else
            mag = mag * (uint64_t)base + (uint64_t)dv;
    }
    *fits = !over;
    if (!over)
        *v = !neg ? (int64_t)mag : mag > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)mag;
    return true;
}

static size_t count_digits(const char *s, size_t n, size_t i)
{
    size_t k = 0;
    while (i + k < n && s[i + k] >= '0' && s[i + k] <= '9')
        k++;
    return k;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool core_decimal_form(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    size_t whole = count_digits(s, n, i), frac = 0;
    i += whole;
    if (i < n && s[i] == '.') {
        i++;
        frac = count_digits(s, n, i);
        i += frac;
    }
    if (whole == 0 && frac == 0)
        return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        size_t e = count_digits(s, n, i);
        if (e == 0)
            return false;
        i += e;
    }
    return i == n;
}

/* .inf/.nan forms: 1 with *v set, 0 when s is not one. */
static int core_special_float(const char *s, size_t n, double *v)
{
    if (is_word(s, n, ".nan") || is_word(s, n, ".NaN") || is_word(s, n, ".NAN")) {
        *v = NAN;
        return 1;
    }
    double sign = 1;
    if (n > 0 && (s[0] == '-' || s[0] == '+')) {
        sign = s[0] == '-' ? -1 : 1;
        s++;
        n--;
    }
    if (is_word(s, n, ".inf") || is_word(s, n, ".Inf") || is_word(s, n, ".INF")) {
        *v = sign * INFINITY;
        return 1;
    }
    return 0;
}

fvm_doc_kind fvm_yaml_plain_kind(const char *s, size_t len)
{
    int64_t iv;
    bool fits;
    double rv;
    if (core_null(s, len))
        return FVM_DOC_NULL;
    if (core_bool(s, len) >= 0)
        return FVM_DOC_BOOL;
    if (core_int(s, len, &iv, &fits))
        return FVM_DOC_INT;
    if (core_decimal_form(s, len) || core_special_float(s, len, &rv))
        return FVM_DOC_REAL;
    return FVM_DOC_STRING;
}

/* ---- reader state --------------------------------------------------------- */

/* A named anchor. Records live in the arena; the table points at the newest
 * record of each name (YAML lets a later anchor reuse a name). */
typedef struct anchor {
    fvm_doc *node; /* NULL while the anchored collection is still open */
    uint64_t size; /* nodes once every alias inside is expanded */
    int height; /* collections on the longest path down; 0 for a scalar */
    uint64_t hash;
    size_t len;
    char name[];
} anchor;

/* A finished child of an open collection, with the position it was found at
 * (for an alias, the alias's own position, not its target's). */
typedef struct child {
    fvm_doc *node;
    int line, col;
} child;

/* An open collection. */
typedef struct frame {
    fvm_doc *node;
    size_t base; /* its first child in rd.kids */
    uint64_t start; /* rd.count before this node was counted */
    int height; /* tallest child */
    anchor *anch; /* completed when the collection closes, or NULL */
} frame;

/* A mapping key being checked for duplicates. */
typedef struct keyref {
    const char *s;
    size_t len, idx;
} keyref;

typedef struct rd {
    fvm_arena *a;
    const fvm_doc_src *src;
    fvm_diag *d;
    fvm_doc *root;
    int docs;
    uint64_t count; /* nodes so far, aliases expanded; <= FVM_MAX_DOC_NODES */
    frame *frames; /* FVM_MAX_DEPTH of them */
    int depth;
    child *kids; /* children of all open collections, innermost last (never NULL) */
    size_t nkids, capkids;
    anchor **slots; /* open-addressing table, capacity a power of two */
    size_t nslots, nanchors;
    uint64_t seed[2];
    keyref *keys; /* scratch for duplicate detection */
    size_t capkeys;
} rd;

static fvm_loc mark_loc(const rd *r, yaml_mark_t m)
{
    fvm_loc loc = {.file = r->src->file};
    loc.line = m.line < INT_MAX ? (int)m.line + 1 : INT_MAX;
    loc.col = m.column < INT_MAX ? (int)m.column + 1 : INT_MAX;
    return loc;
}

static fvm_status fail_at(rd *r, fvm_status code, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static fvm_status fail_at(rd *r, fvm_status code, int line, int col, const char *fmt, ...)
{
    fvm_loc loc = {.file = r->src->file, .line = line, .col = col};
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(r->d, code, &loc, fmt, ap);
    va_end(ap);
    return code;
}

static fvm_status fail_mark(rd *r, fvm_status code, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static fvm_status fail_mark(rd *r, fvm_status code, yaml_mark_t m, const char *fmt, ...)
{
    fvm_loc loc = mark_loc(r, m);
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(r->d, code, &loc, fmt, ap);
    va_end(ap);
    return code;
}

static fvm_status nomem(rd *r)
{
    fvm_loc loc = {.file = r->src->file};
    return fvm_diag_add(r->d, FVM_ERR_NOMEM, &loc, "out of memory while reading the document");
}

/* "!!int" for core tags, the tag itself otherwise. */
static const char *short_tag(const char *tag, char buf[64])
{
    size_t n = strlen(CORE_TAG);
    if (strncmp(tag, CORE_TAG, n) == 0 && strlen(tag + n) < 60) {
        buf[0] = buf[1] = '!';
        strcpy(buf + 2, tag + n);
        return buf;
    }
    return tag;
}

static const char *kind_name(fvm_doc_kind k)
{
    switch (k) {
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
        return "a sequence";
    case FVM_DOC_OBJECT:
        return "a mapping";
    }
    return "?";
}

/* ---- anchors: a table keyed by SipHash-1-3 with a per-parse random key, so
 * crafted names cannot make lookups quadratic ------------------------------- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = ROTL(v[1], 13);
    v[1] ^= v[0];
    v[0] = ROTL(v[0], 32);
    v[2] += v[3];
    v[3] = ROTL(v[3], 16);
    v[3] ^= v[2];
    v[0] += v[3];
    v[3] = ROTL(v[3], 21);
    v[3] ^= v[0];
    v[2] += v[1];
    v[1] = ROTL(v[1], 17);
    v[1] ^= v[2];
    v[2] = ROTL(v[2], 32);
}

static uint64_t sip_hash(const uint64_t k[2], const unsigned char *p, size_t n)
{
    uint64_t v[4] = {k[0] ^ 0x736f6d6570736575ull, k[1] ^ 0x646f72616e646f6dull, k[0] ^ 0x6c7967656e657261ull,
                     k[1] ^ 0x7465646279746573ull};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t m = 0;
        for (int j = 0; j < 8; j++)
            m |= (uint64_t)p[i + (size_t)j] << (8 * j);
        v[3] ^= m;
        sip_round(v);
        v[0] ^= m;
    }
    uint64_t b = (uint64_t)n << 56;
    for (int j = 0; i + (size_t)j < n; j++)
        b |= (uint64_t)p[i + (size_t)j] << (8 * j);
    v[3] ^= b;
    sip_round(v);
    v[0] ^= b;
    v[2] ^= 0xff;
    sip_round(v);
    sip_round(v);
    sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

static void seed_hash(rd *r)
{
    if (getrandom(r->seed, sizeof r->seed, GRND_NONBLOCK) == (ssize_t)sizeof r->seed)
        return;
    /* No entropy yet (early boot): addresses and the clock still vary per run. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r->seed[0] = (uint64_t)(uintptr_t)r ^ (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull;
    r->seed[1] = (uint64_t)(uintptr_t)&ts ^ (uint64_t)ts.tv_sec;
}

static anchor **anchor_slot(rd *r, const char *name, size_t len, uint64_t h)
{
    size_t mask = r->nslots - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        anchor *an = r->slots[i];
        if (!an || (an->hash == h && an->len == len && memcmp(an->name, name, len) == 0))
            return &r->slots[i];
    }
}

static anchor *anchor_find(rd *r, const char *name)
{
    if (!r->nslots)
        return NULL;
    size_t len = strlen(name);
    return *anchor_slot(r, name, len, sip_hash(r->seed, (const unsigned char *)name, len));
}

/* A new record for name, replacing any older one of that name. NULL when out of memory. */
static anchor *anchor_define(rd *r, const char *name)
{
    if ((r->nanchors + 1) * 2 > r->nslots) {
        size_t cap = r->nslots ? r->nslots * 2 : 16;
        anchor **slots = calloc(cap, sizeof *slots);
        if (!slots)
            return NULL;
        anchor **old = r->slots;
        size_t oldn = r->nslots;
        r->slots = slots;
        r->nslots = cap;
        for (size_t i = 0; i < oldn; i++)
            if (old[i])
                *anchor_slot(r, old[i]->name, old[i]->len, old[i]->hash) = old[i];
        free(old);
    }
    size_t len = strlen(name);
    anchor *an = fvm_arena_alloc(r->a, sizeof *an + len + 1);
    if (!an)
        return NULL;
    memcpy(an->name, name, len + 1);
    an->len = len;
    an->hash = sip_hash(r->seed, (const unsigned char *)name, len);
    anchor **slot = anchor_slot(r, name, len, an->hash);
    if (!*slot)
        r->nanchors++;
    *slot = an;
    return an;
}

/* ---- building ------------------------------------------------------------- */

/* Adds n nodes to the expanded count, refusing to pass FVM_MAX_DOC_NODES. */
static fvm_status count_nodes(rd *r, uint64_t n, yaml_mark_t m)
{
    if (n > (uint64_t)FVM_MAX_DOC_NODES - r->count)
        return fail_mark(r, FVM_ERR_LIMIT, m, "document too large: more than %d nodes once aliases are expanded",
                         FVM_MAX_DOC_NODES);
    r->count += n;
    return FVM_OK;
}

/* True when the next finished node will be a key of the innermost open mapping. */
static bool expecting_key(const rd *r)
{
    if (r->depth == 0)
        return false;
    const frame *f = &r->frames[r->depth - 1];
    return f->node->kind == FVM_DOC_OBJECT && (r->nkids - f->base) % 2 == 0;
}

/* Hands a finished node to the open collection (or makes it the root). */
static fvm_status attach(rd *r, fvm_doc *node, int height, int line, int col)
{
    if (r->depth == 0) {
        r->root = node;
        return FVM_OK;
    }
    if (expecting_key(r) && node->kind != FVM_DOC_STRING)
        return fail_at(r, FVM_ERR_FORMAT, line, col, "mapping key must be a string, found %s", kind_name(node->kind));
    frame *f = &r->frames[r->depth - 1];
    if (height > f->height)
        f->height = height;
    if (r->nkids == r->capkids) {
        size_t cap = r->capkids * 2;
        child *k = realloc(r->kids, cap * sizeof *k);
        if (!k)
            return nomem(r);
        r->kids = k;
        r->capkids = cap;
    }
    r->kids[r->nkids++] = (child){node, line, col};
    return FVM_OK;
}

static int keyref_cmp(const void *pa, const void *pb)
{
    const keyref *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, n);
    if (c)
        return c;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Refuses a mapping whose keys repeat, at the first repeat in source order
 * (checked when the mapping closes, so an error inside it comes first).
 * Sorting keeps this O(n log n) whatever the keys are. */
static fvm_status check_duplicates(rd *r, const child *kids, size_t n)
{
    if (n < 2)
        return FVM_OK;
    if (n > r->capkeys) {
        keyref *k = realloc(r->keys, n * sizeof *k);
        if (!k)
            return nomem(r);
        r->keys = k;
        r->capkeys = n;
    }
    for (size_t i = 0; i < n; i++) {
        const fvm_doc *key = kids[2 * i].node;
        r->keys[i] = (keyref){key->u.str.s, key->u.str.len, i};
    }
    qsort(r->keys, n, sizeof *r->keys, keyref_cmp);
    size_t first = SIZE_MAX;
    for (size_t i = 1; i < n; i++) {
        const keyref *p = &r->keys[i - 1], *q = &r->keys[i];
        if (p->len == q->len && memcmp(p->s, q->s, p->len) == 0 && q->idx < first)
            first = q->idx;
    }
    if (first == SIZE_MAX)
        return FVM_OK;
    const child *k = &kids[2 * first];
    return fail_at(r, FVM_ERR_FORMAT, k->line, k->col, "duplicate key \"%.*s\"",
                   k->node->u.str.len > 200 ? 200 : (int)k->node->u.str.len, k->node->u.str.s);
}

/* Checks a collection's tag: none, the non-specific "!", or the core tag of its kind. */
static fvm_status check_collection_tag(rd *r, const char *tag, bool is_map, yaml_mark_t m)
{
    if (!tag || strcmp(tag, "!") == 0 || strcmp(tag, is_map ? CORE_TAG "map" : CORE_TAG "seq") == 0)
        return FVM_OK;
    char buf[64];
    if (strcmp(tag, is_map ? CORE_TAG "seq" : CORE_TAG "map") == 0)
        return fail_mark(r, FVM_ERR_FORMAT, m, "tag %s cannot be used on a %s", short_tag(tag, buf),
                         is_map ? "mapping" : "sequence");
    return fail_mark(r, FVM_ERR_FORMAT, m, "unsupported YAML tag %s", short_tag(tag, buf));
}

static fvm_status open_collection(rd *r, const yaml_event_t *ev)
{
    bool is_map = ev->type == YAML_MAPPING_START_EVENT;
    const char *tag = (const char *)(is_map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag);
    const char *name = (const char *)(is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor);
    if (r->depth >= FVM_MAX_DEPTH)
        return fail_mark(r, FVM_ERR_LIMIT, ev->start_mark, "nesting deeper than %d", FVM_MAX_DEPTH);
    if (expecting_key(r))
        return fail_mark(r, FVM_ERR_FORMAT, ev->start_mark, "mapping key must be a string, found %s",
                         is_map ? "a mapping" : "a sequence");
    fvm_status st = check_collection_tag(r, tag, is_map, ev->start_mark);
    if (st == FVM_OK)
        st = count_nodes(r, 1, ev->start_mark);
    if (st != FVM_OK)
        return st;
    fvm_doc *node = fvm_doc_new(r->a, is_map ? FVM_DOC_OBJECT : FVM_DOC_ARRAY);
    if (!node)
        return nomem(r);
    fvm_loc loc = mark_loc(r, ev->start_mark);
    node->line = loc.line;
    node->col = loc.col;
    node->flow = is_map ? ev->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE
                        : ev->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE;
    anchor *an = NULL;
    if (name && !(an = anchor_define(r, name)))
        return nomem(r);
    r->frames[r->depth++] = (frame){node, r->nkids, r->count - 1, 0, an};
    return FVM_OK;
}

static fvm_status close_collection(rd *r)
{
    frame f = r->frames[--r->depth];
    fvm_doc *node = f.node;
    size_t n = r->nkids - f.base;
    const child *kids = r->kids + f.base;
    if (node->kind == FVM_DOC_OBJECT) {
        n /= 2;
        fvm_status st = check_duplicates(r, kids, n);
        if (st != FVM_OK)
            return st;
        node->u.coll.keys = fvm_arena_array(r->a, fvm_doc_capacity(n), sizeof(fvm_doc *));
        node->u.coll.items = fvm_arena_array(r->a, fvm_doc_capacity(n), sizeof(fvm_doc *));
        if (!node->u.coll.keys || !node->u.coll.items)
            return nomem(r);
        for (size_t i = 0; i < n; i++) {
            node->u.coll.keys[i] = kids[2 * i].node;
            node->u.coll.items[i] = kids[2 * i + 1].node;
        }
    } else {
        node->u.coll.items = fvm_arena_array(r->a, fvm_doc_capacity(n), sizeof(fvm_doc *));
        if (!node->u.coll.items)
            return nomem(r);
        for (size_t i = 0; i < n; i++)
            node->u.coll.items[i] = kids[i].node;
    }
    node->u.coll.n = n;
    r->nkids = f.base;
    if (f.anch) {
        f.anch->node = node;
        f.anch->size = r->count - f.start;
        f.anch->height = f.height + 1;
    }
    return attach(r, node, f.height + 1, node->line, node->col);
}

static fvm_status bad_scalar(rd *r, yaml_mark_t m, const char *s, size_t n, const char *what)
{
    return fail_mark(r, FVM_ERR_FORMAT, m, "\"%.*s\" is not %s", n > 80 ? 80 : (int)n, s, what);
}

/* The kind a scalar's tag asks for; tags other than the core scalar ones are refused. */
static fvm_status scalar_kind(rd *r, const yaml_event_t *ev, fvm_doc_kind *kind)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    static const struct {
        const char *tag;
        fvm_doc_kind kind;
    } core[] = {
        {CORE_TAG "str", FVM_DOC_STRING}, {CORE_TAG "null", FVM_DOC_NULL},  {CORE_TAG "bool", FVM_DOC_BOOL},
        {CORE_TAG "int", FVM_DOC_INT},    {CORE_TAG "float", FVM_DOC_REAL},
    };
    if (!tag) {
        *kind = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? fvm_yaml_plain_kind(s, n) : FVM_DOC_STRING;
        return FVM_OK;
    }
    if (strcmp(tag, "!") == 0) { /* the non-specific tag: a string */
        *kind = FVM_DOC_STRING;
        return FVM_OK;
    }
    for (size_t i = 0; i < sizeof core / sizeof core[0]; i++)
        if (strcmp(tag, core[i].tag) == 0) {
            *kind = core[i].kind;
            return FVM_OK;
        }
    char buf[64];
    if (strcmp(tag, CORE_TAG "map") == 0 || strcmp(tag, CORE_TAG "seq") == 0)
        return fail_mark(r, FVM_ERR_FORMAT, ev->start_mark, "tag %s cannot be used on a scalar", short_tag(tag, buf));
    return fail_mark(r, FVM_ERR_FORMAT, ev->start_mark, "unsupported YAML tag %s", short_tag(tag, buf));
}

static size_t count_cps(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* Advances over n code points. */
static const char *skip_cps(const char *p, const char *end, size_t n)
{
    for (size_t c = 0; c < n && p < end; c++) {
        p++;
        while (p < end && ((unsigned char)*p & 0xC0) == 0x80)
            p++;
    }
    return p;
}

/* Records how a string scalar was written (see fvm_doc_string_col): its quote,
 * and its source text when escapes or '' make it differ from the value.
 * libyaml's mark index counts characters, so find the bytes by counting. */
static fvm_status string_source(rd *r, const yaml_event_t *ev, fvm_doc *node)
{
    yaml_scalar_style_t style = ev->data.scalar.style;
    node->u.str.quote = style == YAML_SINGLE_QUOTED_SCALAR_STYLE   ? '\''
                        : style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ? '"'
                                                                   : 0;
    if (style == YAML_LITERAL_SCALAR_STYLE || style == YAML_FOLDED_SCALAR_STYLE ||
        ev->start_mark.line != ev->end_mark.line) {
        node->u.str.raw = ""; /* spans lines: not mapped */
        return FVM_OK;
    }
    if (!node->u.str.quote)
        return FVM_OK;
    size_t first = ev->start_mark.index + 1, span = ev->end_mark.index - ev->start_mark.index - 2;
    if (ev->end_mark.index < ev->start_mark.index + 2 || span == count_cps(node->u.str.s, node->u.str.len))
        return FVM_OK;
    const char *end = r->src->text + r->src->len;
    const char *p = skip_cps(r->src->text, end, first), *q = skip_cps(p, end, span);
    node->u.str.raw = fvm_arena_strndup(r->a, p, (size_t)(q - p));
    return node->u.str.raw ? FVM_OK : FVM_ERR_NOMEM;
}

static fvm_status scalar(rd *r, const yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    yaml_mark_t m = ev->start_mark;
    if (memchr(s, 0, n))
        return fail_mark(r, FVM_ERR_FORMAT, m, "string contains a NUL character");
    fvm_doc_kind kind = FVM_DOC_STRING;
    fvm_status st = scalar_kind(r, ev, &kind);
    if (st == FVM_OK)
        st = count_nodes(r, 1, m);
    if (st != FVM_OK)
        return st;
    fvm_doc *node = fvm_doc_new(r->a, kind);
    if (!node)
        return nomem(r);
    fvm_loc loc = mark_loc(r, m);
    node->line = loc.line;
    node->col = loc.col;
    switch (kind) {
    case FVM_DOC_NULL:
        if (!core_null(s, n))
            return bad_scalar(r, m, s, n, "a null (tag !!null)");
        break;
    case FVM_DOC_BOOL: {
        int b = core_bool(s, n);
        if (b < 0)
            return bad_scalar(r, m, s, n, "a boolean (tag !!bool)");
        node->u.b = b;
        break;
    }
    case FVM_DOC_INT: {
        bool fits;
        if (!core_int(s, n, &node->u.i, &fits))
            return bad_scalar(r, m, s, n, "an integer (tag !!int)");
        if (!fits)
            return bad_scalar(r, m, s, n, "a 64-bit integer: out of range");
        break;
    }
    case FVM_DOC_REAL:
        if (core_special_float(s, n, &node->u.r))
            break;
        if (!core_decimal_form(s, n))
            return bad_scalar(r, m, s, n, "a number (tag !!float)");
        errno = 0;
        node->u.r = strtod(s, NULL); /* libyaml NUL-terminates values */
        if (errno == ERANGE && isinf(node->u.r))
            return bad_scalar(r, m, s, n, "a 64-bit float: out of range");
        break;
    case FVM_DOC_STRING:
        node->u.str.len = n;
        node->u.str.s = fvm_arena_strndup(r->a, s, n);
        if (!node->u.str.s || string_source(r, ev, node))
            return nomem(r);
        break;
    case FVM_DOC_ARRAY:
    case FVM_DOC_OBJECT:
        break;
    }
    const char *name = (const char *)ev->data.scalar.anchor;
    if (name) {
        anchor *an = anchor_define(r, name);
        if (!an)
            return nomem(r);
        an->node = node;
        an->size = 1;
        an->height = 0;
    }
    return attach(r, node, 0, loc.line, loc.col);
}

static fvm_status alias(rd *r, const yaml_event_t *ev)
{
    const char *name = (const char *)ev->data.alias.anchor;
    yaml_mark_t m = ev->start_mark;
    anchor *an = anchor_find(r, name);
    if (!an)
        return fail_mark(r, FVM_ERR_SYNTAX, m, "invalid YAML: undefined alias *%s", name);
    if (!an->node)
        return fail_mark(r, FVM_ERR_CYCLE, m, "alias *%s refers to a collection that contains it", name);
    if (r->depth + an->height > FVM_MAX_DEPTH)
        return fail_mark(r, FVM_ERR_LIMIT, m, "nesting deeper than %d once alias *%s is expanded", FVM_MAX_DEPTH, name);
    fvm_status st = count_nodes(r, an->size, m);
    if (st != FVM_OK)
        return st;
    fvm_loc loc = mark_loc(r, m);
    return attach(r, an->node, an->height, loc.line, loc.col);
}

/* Line and column of a byte offset (libyaml reports decoding errors as offsets). */
static fvm_loc offset_loc(const rd *r, size_t off)
{
    const unsigned char *t = (const unsigned char *)r->src->text;
    size_t len = r->src->len < off ? r->src->len : off, i = 0;
    fvm_loc loc = {.file = r->src->file, .line = 1, .col = 1};
    if (len >= 3 && t[0] == 0xEF && t[1] == 0xBB && t[2] == 0xBF)
        i = 3; /* a byte order mark takes no column */
    for (; i < len; i++) {
        if (t[i] == '\n' || (t[i] == '\r' && (i + 1 >= r->src->len || t[i + 1] != '\n'))) {
            loc.line++;
            loc.col = 1;
        } else if ((t[i] & 0xC0) != 0x80 && t[i] != '\r') {
            loc.col++;
        }
    }
    return loc;
}

/* A decoding error at a bad trailing byte is reported where its sequence starts. */
static size_t sequence_start(const rd *r, size_t off)
{
    const unsigned char *t = (const unsigned char *)r->src->text;
    if (off >= r->src->len)
        return off;
    for (size_t k = 1; k <= 3 && k <= off; k++) {
        unsigned char c = t[off - k];
        if (c >= 0xC0) {
            size_t seq = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            return seq > k ? off - k : off;
        }
        if ((c & 0xC0) != 0x80)
            return off;
    }
    return off;
}

/* Does the line of mark look like an unquoted fedvm type, the usual cause of
 * YAML errors about aliases and flow collections in fedvm files ("x:
 * {f32[]*}@CLIENTS", "w: *f32" ...)? A value after ': ' that starts with
 * '{', '[', '*', '&' or '!' and holds '@', '[' or a dtype-like word. */
static bool unquoted_type(const rd *r, yaml_mark_t mark)
{
    const char *t = r->src->text, *end = t + r->src->len;
    size_t off = mark.index < r->src->len ? mark.index : r->src->len;
    const char *line = t + off;
    while (line > t && line[-1] != '\n')
        line--;
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol)
        eol = end;
    for (const char *c = line; c + 2 < eol; c++) {
        if ((c[0] == ':' && c[1] == ' ') || (c[0] == '-' && c[1] == ' ')) {
            const char *v = c + 2;
            while (v < eol && *v == ' ')
                v++;
            if (v < eol && strchr("{[*&!", *v)) {
                size_t n = (size_t)(eol - v);
                return memchr(v, '@', n) || memchr(v, ']', n);
            }
        }
    }
    return false;
}

static fvm_status parser_error(rd *r, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR || !p->problem)
        return nomem(r);
    fvm_loc loc = p->error == YAML_READER_ERROR ? offset_loc(r, sequence_start(r, p->problem_offset))
                                                : mark_loc(r, p->problem_mark);
    char extra[32] = "";
    if (p->error == YAML_READER_ERROR && p->problem_value >= 0)
        snprintf(extra, sizeof extra, " (byte 0x%02X)", (unsigned)p->problem_value & 0xFFu);
    return fvm_diag_add(r->d, FVM_ERR_SYNTAX, &loc, "invalid YAML: %s%s%s%s%s", p->problem, extra,
                        p->context ? " " : "", p->context ? p->context : "",
                        p->error != YAML_READER_ERROR && unquoted_type(r, p->problem_mark)
                            ? "; type strings such as {f32[]*}@CLIENTS begin with characters YAML reserves "
                              "({ [ * & !): quote them, e.g. x: '{f32[]*}@CLIENTS'"
                            : "");
}

static fvm_status event(rd *r, const yaml_event_t *ev, bool *done)
{
    switch (ev->type) {
    case YAML_NO_EVENT:
    case YAML_STREAM_START_EVENT:
    case YAML_DOCUMENT_END_EVENT:
        return FVM_OK;
    case YAML_DOCUMENT_START_EVENT:
        if (r->docs++ > 0)
            return fail_mark(r, FVM_ERR_FORMAT, ev->start_mark, "expected a single YAML document, found a second one");
        return FVM_OK;
    case YAML_STREAM_END_EVENT:
        *done = true;
        if (r->docs == 0)
            return fail_mark(r, FVM_ERR_FORMAT, ev->start_mark, "empty YAML stream: expected one document");
        return FVM_OK;
    case YAML_ALIAS_EVENT:
        return alias(r, ev);
    case YAML_SCALAR_EVENT:
        return scalar(r, ev);
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        return open_collection(r, ev);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return close_collection(r);
    }
    return FVM_OK;
}

fvm_status fvm_yaml_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d)
{
    rd r = {.a = a, .src = src, .d = d};
    *out = NULL;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return nomem(&r);
    r.frames = malloc(FVM_MAX_DEPTH * sizeof *r.frames);
    r.capkids = 64;
    r.kids = malloc(r.capkids * sizeof *r.kids);
    if (!r.frames || !r.kids) {
        free(r.frames);
        free(r.kids);
        yaml_parser_delete(&p);
        return nomem(&r);
    }
    seed_hash(&r);
    const unsigned char *text = (const unsigned char *)(src->text ? src->text : "");
    size_t len = src->text ? src->len : 0;
    yaml_parser_set_input_string(&p, text, len);
    /* fedvm documents are UTF-8: a UTF-16 byte order mark is an error, not a switch. */
    if (len >= 2 && ((text[0] == 0xFF && text[1] == 0xFE) || (text[0] == 0xFE && text[1] == 0xFF)))
        yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
    fvm_status st = FVM_OK;
    for (bool done = false; !done && st == FVM_OK;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            st = parser_error(&r, &p);
            break;
        }
        st = event(&r, &ev, &done);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    free(r.frames);
    free(r.kids);
    free(r.slots);
    free(r.keys);
    if (st == FVM_OK)
        *out = r.root;
    return st;
}
