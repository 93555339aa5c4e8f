/* json_read.c - JSON text to a document tree: jansson parses and validates; a
 * lockstep scan of the (then known-valid) text recovers each node's position. */
#include <jansson.h>
#include <string.h>

#include "../vm/core/doc.h"
#include "doc_io.h"

typedef struct scan {
    const char *p, *end;
    int line, col;
    fvm_arena *a;
    fvm_status err; /* why convert() returned NULL */
    int err_line, err_col;
} scan;

static void advance(scan *s)
{
    unsigned char c = (unsigned char)*s->p++;
    if (c == '\n') {
        s->line++;
        s->col = 1;
    } else if ((c & 0xC0) != 0x80) {
        s->col++; /* count code points, not continuation bytes */
    }
}

static void skip_ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        advance(s);
}

static void skip_string(scan *s)
{
    advance(s); /* opening quote */
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\')
            advance(s);
        advance(s);
    }
    if (s->p < s->end)
        advance(s);
}

static void skip_scalar(scan *s)
{
    while (s->p < s->end && !strchr(",]} \t\r\n", *s->p))
        advance(s);
}

static fvm_doc *convert(scan *s, json_t *v, int depth);

/* Skips a string token at the cursor and records its source form in node:
 * quoted, and the raw text when escapes make it differ from the value. */
static bool string_source(scan *s, fvm_doc *node)
{
    const char *start = s->p + 1;
    skip_string(s);
    node->u.str.quote = '"';
    size_t rawlen = (size_t)(s->p - start) - 1;
    if (memchr(start, '\\', rawlen)) {
        node->u.str.raw = fvm_arena_strndup(s->a, start, rawlen);
        return node->u.str.raw != NULL;
    }
    return true;
}

static fvm_doc *convert_string(scan *s, json_t *v, fvm_doc *node)
{
    size_t len = json_string_length(v);
    node->kind = FVM_DOC_STRING;
    node->u.str.len = len;
    node->u.str.s = fvm_arena_strndup(s->a, json_string_value(v), len);
    if (!node->u.str.s || !string_source(s, node))
        return NULL;
    return node;
}

static fvm_doc *convert(scan *s, json_t *v, int depth)
{
    skip_ws(s);
    fvm_doc *node = fvm_doc_new(s->a, FVM_DOC_NULL);
    if (!node)
        return NULL;
    node->line = s->line;
    node->col = s->col;
    /* jansson allows 2048 levels; a fedvm document allows FVM_MAX_DEPTH collections. */
    if ((json_is_object(v) || json_is_array(v)) && depth >= FVM_MAX_DEPTH) {
        s->err = FVM_ERR_LIMIT;
        s->err_line = node->line;
        s->err_col = node->col;
        return NULL;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        node->kind = FVM_DOC_OBJECT;
        size_t n = json_object_size(v);
        node->u.coll.items = fvm_arena_array(s->a, fvm_doc_capacity(n), sizeof(fvm_doc *));
        node->u.coll.keys = fvm_arena_array(s->a, fvm_doc_capacity(n), sizeof(fvm_doc *));
        if (!node->u.coll.items || !node->u.coll.keys)
            return NULL;
        advance(s); /* { */
        /* jansson keeps insertion order and duplicates were rejected, so the
         * iteration order is the text order. */
        for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
            skip_ws(s);
            fvm_doc *key = fvm_doc_new(s->a, FVM_DOC_STRING);
            if (!key)
                return NULL;
            key->line = s->line;
            key->col = s->col;
            const char *k = json_object_iter_key(it);
            key->u.str.len = strlen(k);
            key->u.str.s = fvm_arena_strndup(s->a, k, key->u.str.len);
            if (!key->u.str.s || !string_source(s, key))
                return NULL;
            skip_ws(s);
            advance(s); /* : */
            fvm_doc *val = convert(s, json_object_iter_value(it), depth + 1);
            if (!val)
                return NULL;
            node->u.coll.keys[node->u.coll.n] = key;
            node->u.coll.items[node->u.coll.n++] = val;
            skip_ws(s);
            advance(s); /* , or } */
        }
        if (n == 0) {
            skip_ws(s);
            advance(s); /* } */
        }
        return node;
    }
    case JSON_ARRAY: {
        node->kind = FVM_DOC_ARRAY;
        size_t n = json_array_size(v);
        node->u.coll.items = fvm_arena_array(s->a, fvm_doc_capacity(n), sizeof(fvm_doc *));
        if (!node->u.coll.items)
            return NULL;
        advance(s); /* [ */
        for (size_t i = 0; i < n; i++) {
            fvm_doc *item = convert(s, json_array_get(v, i), depth + 1);
            if (!item)
                return NULL;
            node->u.coll.items[node->u.coll.n++] = item;
            skip_ws(s);
            advance(s); /* , or ] */
        }
        if (n == 0) {
            skip_ws(s);
            advance(s); /* ] */
        }
        return node;
    }
    case JSON_STRING:
        return convert_string(s, v, node);
    case JSON_INTEGER:
        node->kind = FVM_DOC_INT;
        node->u.i = (int64_t)json_integer_value(v);
        skip_scalar(s);
        return node;
    case JSON_REAL:
        node->kind = FVM_DOC_REAL;
        node->u.r = json_real_value(v);
        skip_scalar(s);
        return node;
    case JSON_TRUE:
    case JSON_FALSE:
        node->kind = FVM_DOC_BOOL;
        node->u.b = json_is_true(v);
        skip_scalar(s);
        return node;
    case JSON_NULL:
        skip_scalar(s);
        return node;
    }
    return NULL;
}

/* Line and column (code points, 1-based) of a byte offset. */
static void offset_loc(const char *text, size_t len, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            ++*line;
            *col = 1;
        } else if ((text[i] & 0xC0) != 0x80) {
            ++*col;
        }
    }
}

/* Where a jansson error is: its position is just past the offending lexeme,
 * which the message quotes as "near 'LEXEME'". Point at the lexeme's start;
 * at the byte itself for undecodable bytes; past the end for a truncated text. */
static size_t error_offset(const fvm_doc_src *src, const json_error_t *err)
{
    size_t pos = err->position > 0 ? (size_t)err->position : 0;
    if (pos > src->len)
        pos = src->len;
    if (strstr(err->text, "near end of file"))
        return src->len;
    if (strstr(err->text, "unable to decode byte"))
        return pos;
    if (strstr(err->text, "escape")) { /* at the backslash that starts it */
        size_t i = pos;
        while (i > 0 && src->text[i - 1] != '\\')
            i--;
        if (i > 0)
            return i - 1;
    }
    const char *near = strstr(err->text, "near '");
    if (near) {
        const char *tok = near + 6;
        size_t n = strlen(tok);
        if (n && tok[n - 1] == '\'')
            n--;
        if (n <= pos && memcmp(src->text + pos - n, tok, n) == 0)
            return pos - n;
    }
    return pos ? pos - 1 : 0;
}

fvm_status fvm_json_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d)
{
    json_error_t err;
    json_t *root = json_loadb(src->text, src->len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    if (!root) {
        fvm_loc loc = {.file = src->file};
        offset_loc(src->text, src->len, error_offset(src, &err), &loc.line, &loc.col);
        return fvm_diag_add(d, FVM_ERR_SYNTAX, &loc, "invalid JSON: %s", err.text);
    }
    scan s = {.p = src->text, .end = src->text + src->len, .line = 1, .col = 1, .a = a, .err = FVM_ERR_NOMEM};
    /* A UTF-8 byte order mark is not JSON; jansson already refused it. */
    *out = convert(&s, root, 0);
    json_decref(root);
    if (!*out && s.err == FVM_ERR_LIMIT) {
        fvm_loc loc = {.file = src->file, .line = s.err_line, .col = s.err_col};
        return fvm_diag_add(d, FVM_ERR_LIMIT, &loc, "nesting deeper than %d", FVM_MAX_DEPTH);
    }
    if (!*out) {
        fvm_loc loc = {.file = src->file};
        return fvm_diag_add(d, FVM_ERR_NOMEM, &loc, "out of memory while reading the document");
    }
    return FVM_OK;
}
