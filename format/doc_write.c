/* doc_write.c - document tree to text: JSON (strings escaped by jansson) and YAML (libyaml's emitter). */
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "../vm/core/doc.h"
#include "doc_io.h"
#include "yaml_core.h"

/* ---- shared --------------------------------------------------------------- */

/* A growing output buffer; 'oom' sticks once an allocation fails. */
typedef struct obuf {
    char *p;
    size_t n, cap;
    bool oom;
} obuf;

static void put(obuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (n >= b->cap - b->n || !b->p) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n <= n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void put_str(obuf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* State of one write: the buffer, where to report, and the limits. */
typedef struct wr {
    obuf b;
    fvm_diag *d;
    uint64_t count; /* nodes written, aliases expanded */
} wr;

static fvm_status fail_node(wr *w, fvm_status code, const fvm_doc *node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records an error at the node's source position, if it has one. */
static fvm_status fail_node(wr *w, fvm_status code, const fvm_doc *node, const char *fmt, ...)
{
    fvm_loc loc = {.line = node ? node->line : 0, .col = node ? node->col : 0};
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(w->d, code, &loc, fmt, ap);
    va_end(ap);
    return code;
}

/* Valid UTF-8 (shortest forms, no surrogates, at most U+10FFFF) without NUL. */
static bool utf8_ok(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k;
        unsigned cp, min;
        if (c == 0)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 1, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k + 1;
    }
    return true;
}

/* Checks a whole tree before anything is written, so that a failure costs no
 * output: no NULL node, keys are strings, strings are valid UTF-8 without NUL,
 * nesting within FVM_MAX_DEPTH collections and, counting a shared node once
 * per reference (as it will be written), within FVM_MAX_DOC_NODES nodes.
 * The recursion is bounded by the depth check. */
static fvm_status check_tree(wr *w, const fvm_doc *node, int depth)
{
    if (!node)
        return fail_node(w, FVM_ERR_USAGE, NULL, "cannot write a NULL node");
    if (++w->count > FVM_MAX_DOC_NODES)
        return fail_node(w, FVM_ERR_LIMIT, node,
                         "document too large to write: more than %d nodes "
                         "once shared nodes are expanded",
                         FVM_MAX_DOC_NODES);
    switch (node->kind) {
    case FVM_DOC_NULL:
    case FVM_DOC_BOOL:
    case FVM_DOC_INT:
    case FVM_DOC_REAL:
        return FVM_OK;
    case FVM_DOC_STRING:
        if (!node->u.str.s || !utf8_ok(node->u.str.s, node->u.str.len))
            return fail_node(w, FVM_ERR_USAGE, node, "string is not valid UTF-8 or contains a NUL character");
        if (node->u.str.len > INT_MAX)
            return fail_node(w, FVM_ERR_LIMIT, node, "string longer than 2 GiB");
        return FVM_OK;
    case FVM_DOC_ARRAY:
    case FVM_DOC_OBJECT:
        break;
    default:
        return fail_node(w, FVM_ERR_USAGE, node, "unknown node kind");
    }
    if (depth >= FVM_MAX_DEPTH)
        return fail_node(w, FVM_ERR_LIMIT, node, "document nested deeper than %d to write", FVM_MAX_DEPTH);
    bool obj = node->kind == FVM_DOC_OBJECT;
    for (size_t i = 0; i < node->u.coll.n; i++) {
        fvm_status st;
        if (obj) {
            const fvm_doc *k = node->u.coll.keys[i];
            if (!k || k->kind != FVM_DOC_STRING)
                return fail_node(w, FVM_ERR_USAGE, node, "object key is not a string node");
            if ((st = check_tree(w, k, depth + 1)) != FVM_OK)
                return st;
        }
        if ((st = check_tree(w, node->u.coll.items[i], depth + 1)) != FVM_OK)
            return st;
    }
    return FVM_OK;
}

static fvm_status finish(wr *w, fvm_status st, char **out, size_t *out_len)
{
    if (st == FVM_OK && w->b.oom)
        st = fvm_diag_add(w->d, FVM_ERR_NOMEM, NULL, "out of memory while writing the document");
    if (st != FVM_OK) {
        free(w->b.p);
        *out = NULL;
        if (out_len)
            *out_len = 0;
        return st;
    }
    *out = w->b.p;
    if (out_len)
        *out_len = w->b.n;
    return FVM_OK;
}

/* ---- JSON ----------------------------------------------------------------- */

static void json_indent(obuf *b, int level)
{
    put(b, "\n", 1);
    for (int i = 0; i < level; i++)
        put(b, "  ", 2);
}

/* Copies jansson's output, escaping NEL, LS and PS (U+0085, U+2028, U+2029):
 * valid in JSON, but line breaks to YAML 1.1 readers such as libyaml (LS and PS
 * also to JavaScript before ES2019). */
static void put_json_text(obuf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        const char *esc = NULL;
        size_t len = 0;
        if (s[i] == 0xC2 && i + 1 < n && s[i + 1] == 0x85)
            esc = "\\u0085", len = 2;
        else if (s[i] == 0xE2 && i + 2 < n && s[i + 1] == 0x80 && (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
            esc = s[i + 2] == 0xA8 ? "\\u2028" : "\\u2029", len = 3;
        if (esc) {
            put(b, str + from, i - from);
            put_str(b, esc);
            from = i + len;
            i += len - 1;
        }
    }
    put(b, str + from, n - from);
}

/* True when jansson would copy the text unchanged between the quotes and
 * put_json_text has nothing to escape: no '"', '\\', control character, NEL,
 * LS or PS. */
static bool json_verbatim(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] == '"' || s[i] == '\\' || s[i] == 0xC2 || s[i] == 0xE2)
            return false;
    return true;
}

/* A JSON string literal, escaped by jansson (the text is known valid UTF-8). */
static fvm_status json_string_out(wr *w, const fvm_doc *node)
{
    if (json_verbatim(node->u.str.s, node->u.str.len)) { /* the common case, without allocations */
        put(&w->b, "\"", 1);
        put(&w->b, node->u.str.s, node->u.str.len);
        put(&w->b, "\"", 1);
        return FVM_OK;
    }
    json_t *j = json_stringn_nocheck(node->u.str.s, node->u.str.len);
    char small[256];
    size_t n = j ? json_dumpb(j, small, sizeof small, JSON_ENCODE_ANY) : 0;
    if (n > 0 && n <= sizeof small) {
        put_json_text(&w->b, small, n);
    } else if (n > sizeof small) {
        char *big = malloc(n);
        if (big && json_dumpb(j, big, n, JSON_ENCODE_ANY) == n)
            put_json_text(&w->b, big, n);
        else
            w->b.oom = true;
        free(big);
    } else {
        w->b.oom = true;
    }
    json_decref(j);
    return FVM_OK;
}

/* Writes a checked node; level is the indentation of its line. */
static fvm_status json_node(wr *w, const fvm_doc *node, int level, bool flow)
{
    fvm_status st;
    char num[32];
    switch (node->kind) {
    case FVM_DOC_NULL:
        put_str(&w->b, "null");
        return FVM_OK;
    case FVM_DOC_BOOL:
        put_str(&w->b, node->u.b ? "true" : "false");
        return FVM_OK;
    case FVM_DOC_INT:
        snprintf(num, sizeof num, "%" PRId64, node->u.i);
        put_str(&w->b, num);
        return FVM_OK;
    case FVM_DOC_REAL:
        fvm_format_real(num, node->u.r, false);
        if (isfinite(node->u.r)) {
            put_str(&w->b, num);
        } else { /* JSON has no non-finite numbers: "nan", "inf", "-inf" */
            put_str(&w->b, "\"");
            put_str(&w->b, num);
            put_str(&w->b, "\"");
        }
        return FVM_OK;
    case FVM_DOC_STRING:
        return json_string_out(w, node);
    case FVM_DOC_ARRAY:
    case FVM_DOC_OBJECT:
        break;
    }
    bool obj = node->kind == FVM_DOC_OBJECT;
    size_t n = node->u.coll.n;
    if (n == 0) {
        put_str(&w->b, obj ? "{}" : "[]");
        return FVM_OK;
    }
    flow = flow || node->flow;
    put_str(&w->b, obj ? "{" : "[");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            put_str(&w->b, flow ? ", " : ",");
        if (!flow)
            json_indent(&w->b, level + 1);
        if (obj) {
            if ((st = json_node(w, node->u.coll.keys[i], level + 1, true)) != FVM_OK)
                return st;
            put_str(&w->b, ": ");
        }
        if ((st = json_node(w, node->u.coll.items[i], level + 1, flow)) != FVM_OK)
            return st;
    }
    if (!flow)
        json_indent(&w->b, level);
    put_str(&w->b, obj ? "}" : "]");
    return FVM_OK;
}

fvm_status fvm_json_write(const fvm_doc *doc, char **out, size_t *out_len, fvm_diag *d)
{
    wr w = {.d = d};
    fvm_status st = check_tree(&w, doc, 0);
    if (st == FVM_OK)
        st = json_node(&w, doc, 0, false);
    put_str(&w.b, "\n");
    return finish(&w, st, out, out_len);
}

/* ---- YAML ----------------------------------------------------------------- */

/* YAML 1.1 booleans: a 1.1 reader would not read these plain words back as strings. */
static bool yaml11_word(const char *s, size_t n)
{
    static const char *const words[] = {"y",  "Y",  "yes", "Yes", "YES", "n",   "N",   "no", "No",
                                        "NO", "on", "On",  "ON",  "off", "Off", "OFF", "<<"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strlen(words[i]) == n && memcmp(words[i], s, n) == 0)
            return true;
    return false;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Line breaks: \n, \r, and NEL, LS, PS, which YAML 1.1 readers (libyaml) count
 * as breaks and 1.2 readers do not; escaped in double quotes, they read back
 * the same everywhere (the emitter would fold them into single quotes). */
static bool has_break(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n' || s[i] == '\r' || (s[i] == 0xC2 && i + 1 < n && s[i + 1] == 0x85) ||
            (s[i] == 0xE2 && i + 2 < n && s[i + 1] == 0x80 && (s[i + 2] == 0xA8 || s[i + 2] == 0xA9)))
            return true;
    }
    return false;
}

/* Strings to double-quote so that they read back as the same string: those a
 * plain scalar would resolve to something else (also under YAML 1.1's yes/no/
 * on/off), those starting with a YAML indicator, those with leading or
 * trailing white space, and those with line breaks. Others are left to the
 * emitter, which quotes what its own analysis requires. */
static bool yaml_needs_quotes(const char *s, size_t n)
{
    if (n == 0 || fvm_yaml_plain_kind(s, n) != FVM_DOC_STRING || yaml11_word(s, n))
        return true;
    if (strchr("{}[]*&!|>'\"%@`#-?:,", s[0]))
        return true;
    return is_space(s[0]) || is_space(s[n - 1]) || has_break(s, n);
}

static int yaml_out(void *data, unsigned char *buffer, size_t size)
{
    obuf *b = data;
    put(b, (const char *)buffer, size);
    return !b->oom;
}

/* Emits an initialised event; reports the emitter's problem on failure. */
static fvm_status emit(wr *w, yaml_emitter_t *em, yaml_event_t *ev, int ok)
{
    if (!ok) /* initialising copies strings: only memory can fail (text was checked) */
        return fvm_diag_add(w->d, FVM_ERR_NOMEM, NULL, "out of memory while writing the document");
    if (yaml_emitter_emit(em, ev)) /* the emitter owns and frees the event either way */
        return FVM_OK;
    if (em->error == YAML_MEMORY_ERROR || em->error == YAML_WRITER_ERROR || !em->problem)
        return fvm_diag_add(w->d, FVM_ERR_NOMEM, NULL, "out of memory while writing the document");
    return fvm_diag_add(w->d, FVM_ERR_FORMAT, NULL, "cannot write YAML: %s", em->problem);
}

static fvm_status plain(wr *w, yaml_emitter_t *em, const char *text)
{
    yaml_event_t ev;
    int ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text), 1, 0,
                                          YAML_PLAIN_SCALAR_STYLE);
    return emit(w, em, &ev, ok);
}

/* Emits a checked node; flow is set inside a flow collection. */
static fvm_status yaml_node(wr *w, yaml_emitter_t *em, const fvm_doc *node, bool flow)
{
    fvm_status st;
    yaml_event_t ev;
    char num[40];
    switch (node->kind) {
    case FVM_DOC_NULL:
        return plain(w, em, "null");
    case FVM_DOC_BOOL:
        return plain(w, em, node->u.b ? "true" : "false");
    case FVM_DOC_INT:
        snprintf(num, sizeof num, "%" PRId64, node->u.i);
        return plain(w, em, num);
    case FVM_DOC_REAL:
        if (isnan(node->u.r))
            return plain(w, em, ".nan");
        if (isinf(node->u.r))
            return plain(w, em, node->u.r < 0 ? "-.inf" : ".inf");
        fvm_format_real(num, node->u.r, false);
        return plain(w, em, num);
    case FVM_DOC_STRING: {
        const char *s = node->u.str.s;
        size_t n = node->u.str.len;
        bool quote = yaml_needs_quotes(s, n);
        int ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)n, !quote, 1,
                                              quote ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
        return emit(w, em, &ev, ok);
    }
    case FVM_DOC_ARRAY:
    case FVM_DOC_OBJECT:
        break;
    }
    bool obj = node->kind == FVM_DOC_OBJECT;
    flow = flow || node->flow;
    int ok = obj ? yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                       flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE)
                 : yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                        flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
    if ((st = emit(w, em, &ev, ok)) != FVM_OK)
        return st;
    for (size_t i = 0; i < node->u.coll.n; i++) {
        if (obj && (st = yaml_node(w, em, node->u.coll.keys[i], flow)) != FVM_OK)
            return st;
        if ((st = yaml_node(w, em, node->u.coll.items[i], flow)) != FVM_OK)
            return st;
    }
    ok = obj ? yaml_mapping_end_event_initialize(&ev) : yaml_sequence_end_event_initialize(&ev);
    return emit(w, em, &ev, ok);
}

fvm_status fvm_yaml_write(const fvm_doc *doc, char **out, size_t *out_len, fvm_diag *d)
{
    wr w = {.d = d};
    fvm_status st = check_tree(&w, doc, 0);
    if (st != FVM_OK)
        return finish(&w, st, out, out_len);
    yaml_emitter_t em;
    if (!yaml_emitter_initialize(&em))
        return finish(&w, fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory while writing the document"), out,
                      out_len);
    yaml_emitter_set_output(&em, yaml_out, &w.b);
    yaml_emitter_set_encoding(&em, YAML_UTF8_ENCODING);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_indent(&em, 2);
    yaml_emitter_set_width(&em, -1); /* never fold: flow collections stay on one line */
    yaml_emitter_set_break(&em, YAML_LN_BREAK);
    yaml_event_t ev;
    st = emit(&w, &em, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
    if (st == FVM_OK)
        st = emit(&w, &em, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
    if (st == FVM_OK)
        st = yaml_node(&w, &em, doc, false);
    if (st == FVM_OK)
        st = emit(&w, &em, &ev, yaml_document_end_event_initialize(&ev, 1));
    if (st == FVM_OK)
        st = emit(&w, &em, &ev, yaml_stream_end_event_initialize(&ev));
    yaml_emitter_delete(&em);
    return finish(&w, st, out, out_len);
}
