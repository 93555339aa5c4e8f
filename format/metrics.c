/* metrics.c - metrics files (JSON lines, one round each): a round's line written, a file cut back, files read into one series per scalar (see metrics.h). */
#include "metrics.h"
#include "doc_io.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../vm/core/doc.h"
#include "atomic.h"
#include "file.h"
#include "value_doc.h"

/* ---- writing ------------------------------------------------------------------ */

/* Seconds rounded to the microsecond. */
static fvm_doc *seconds_doc(fvm_arena *a, double s)
{
    return fvm_doc_real(a, round(s * 1e6) / 1e6);
}

/* The line's document (in a), or NULL when out of memory. */
static fvm_doc *line_doc(fvm_arena *a, const fvm_metrics_round *r)
{
    fvm_doc *doc = fvm_doc_new(a, FVM_DOC_OBJECT);
    if (!doc || fvm_doc_set(a, doc, "round", fvm_doc_int(a, r->round)) ||
        fvm_doc_set(a, doc, "train", fvm_value_to_doc(a, r->train, r->train_type)))
        return NULL;
    if (r->eval && fvm_doc_set(a, doc, "eval", fvm_value_to_doc(a, r->eval, r->eval_type)))
        return NULL;
    if ((r->fields & FVM_METRICS_PRIVACY) && (fvm_doc_set(a, doc, "epsilon", fvm_doc_real(a, r->epsilon)) ||
                                              fvm_doc_set(a, doc, "delta", fvm_doc_real(a, r->delta))))
        return NULL;
    if ((r->fields & FVM_METRICS_TIMES) &&
        (fvm_doc_set(a, doc, "seconds", seconds_doc(a, r->seconds)) ||
         (r->eval && fvm_doc_set(a, doc, "eval_seconds", seconds_doc(a, r->eval_seconds))) ||
         fvm_doc_set(a, doc, "cpu_seconds", seconds_doc(a, r->cpu_seconds))))
        return NULL;
    if ((r->fields & FVM_METRICS_CLIENTS) && fvm_doc_set(a, doc, "clients", fvm_doc_int(a, r->nclients)))
        return NULL;
    if (r->fields & FVM_METRICS_SAMPLED) {
        fvm_doc *ids = fvm_doc_new(a, FVM_DOC_ARRAY);
        if (!ids || fvm_doc_set(a, doc, "sampled", ids))
            return NULL;
        ids->flow = true;
        for (int64_t j = 0; j < r->nclients; j++)
            if (fvm_doc_push(a, ids, fvm_doc_int(a, r->clients[j])))
                return NULL;
    }
    doc->flow = true;
    return doc;
}

fvm_status fvm_metrics_line(const fvm_metrics_round *r, char **out, size_t *len, fvm_diag *d)
{
    fvm_arena a = {0};
    fvm_diag local = {0};
    *out = NULL;
    *len = 0;
    fvm_doc *doc = line_doc(&a, r);
    /* numbers and field names only: the writer can fail for want of memory alone */
    fvm_status s = doc && fvm_json_write(doc, out, len, &local) == FVM_OK
                       ? FVM_OK
                       : fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    fvm_diag_clear(&local);
    fvm_arena_free(&a);
    return s;
}

fvm_status fvm_metrics_header(const char *program, uint64_t seed, const fvm_doc *hparams, char **out, size_t *len,
                              fvm_diag *d)
{
    fvm_arena a = {0};
    fvm_diag local = {0};
    *out = NULL;
    *len = 0;
    fvm_doc *doc = fvm_doc_new(&a, FVM_DOC_OBJECT), *run = fvm_doc_new(&a, FVM_DOC_OBJECT);
    fvm_status s = FVM_ERR_NOMEM;
    if (doc && run && !fvm_doc_set(&a, doc, "run", run) &&
        !fvm_doc_set(&a, run, "program", fvm_doc_string(&a, program)) &&
        !fvm_doc_set(&a, run, "seed", fvm_doc_int(&a, (int64_t)seed)) &&
        !fvm_doc_set(&a, run, "hparams", hparams ? (fvm_doc *)hparams : fvm_doc_new(&a, FVM_DOC_OBJECT))) {
        doc->flow = true;
        s = fvm_json_write(doc, out, len, &local);
    }
    if (s == FVM_ERR_NOMEM)
        fvm_diag_add(d, s, NULL, "out of memory");
    else if (s) /* a program name that is not UTF-8 */
        fvm_diag_append(d, &local);
    fvm_diag_clear(&local);
    fvm_arena_free(&a);
    return s;
}

/* The "round" of a line that is a JSON object with an integer "round". */
static bool line_round(const char *text, size_t len, int64_t *round)
{
    fvm_arena a = {0};
    fvm_diag local = {0};
    fvm_doc *doc = NULL;
    fvm_doc_src src = {.file = "", .text = text, .len = len};
    const fvm_doc *r = NULL;
    if (fvm_json_parse(&a, &src, &doc, &local) == FVM_OK && doc->kind == FVM_DOC_OBJECT)
        r = fvm_doc_get(doc, "round");
    bool ok = r && r->kind == FVM_DOC_INT;
    if (ok)
        *round = r->u.i;
    fvm_diag_clear(&local);
    fvm_arena_free(&a);
    return ok;
}

fvm_status fvm_metrics_cut(const char *path, int64_t last, fvm_diag *d)
{
    char *text = NULL;
    size_t len = 0;
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return FVM_OK;
    /* a regular file (it is rewritten), read without blocking: a FIFO is refused */
    fvm_status s = fvm_file_read(path, "the metrics file of a resumed run", UINT64_C(1) << 30, &text, &len, d);
    if (s)
        return s;
    size_t keep = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        if (!nl) /* an incomplete last line: the run was stopped while writing it */
            break;
        size_t end = (size_t)(nl - text) + 1;
        int64_t r;
        if (line_round(text + at, end - at, &r) && r > last)
            break;
        keep = end;
        at = end;
    }
    if (keep < len)
        s = fvm_atomic_write(path, text, keep, d);
    free(text);
    return s;
}

/* ---- reading ------------------------------------------------------------------ */

/* A line kept: its round and its points, points[first .. first+n). */
typedef struct row {
    int64_t round;
    size_t first, n;
    size_t order; /* position in the file, to keep the later of two lines of a round */
} row;

typedef struct point {
    size_t series;
    double v;
} point;

/* What the reader collects before the rows are put in round order. */
typedef struct reader {
    fvm_metrics *m;
    const char *file;
    row *rows;
    size_t nrows, caprows;
    point *pts;
    size_t npts, cappts;
    const char **names; /* series names, in the result's arena */
    size_t nnames, capnames;
    size_t *slots; /* the names' index (see fvm_metrics), handed to the result */
    size_t nslots;
    char path[512]; /* the dotted path being walked */
    fvm_diag *d;
} reader;

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * size);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

static fvm_status nomem(reader *r)
{
    fvm_loc loc = {.file = r->file};
    return fvm_diag_add(r->d, FVM_ERR_NOMEM, &loc, "out of memory");
}

/* FNV-1a. */
static uint64_t hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

/* The slot of name in an index (nslots a power of two, at most half full;
 * a slot holds 0, or k + 1 for the name at names + k * stride): the slot
 * holding it, or the empty one where it goes. */
static size_t slot_of(const size_t *slots, size_t nslots, const void *names, size_t stride, const char *name)
{
    size_t mask = nslots - 1, i = (size_t)hash(name) & mask;
    while (slots[i] && strcmp(*(const char *const *)((const char *)names + (slots[i] - 1) * stride), name))
        i = (i + 1) & mask;
    return i;
}

/* The index of the series called r->path, added when new; SIZE_MAX when out of memory. */
static size_t series_index(reader *r)
{
    if (2 * (r->nnames + 1) > r->nslots) {
        size_t n = r->nslots ? 2 * r->nslots : 64;
        size_t *slots = calloc(n, sizeof *slots);
        if (!slots)
            return SIZE_MAX;
        for (size_t k = 0; k < r->nnames; k++)
            slots[slot_of(slots, n, r->names, sizeof *r->names, r->names[k])] = k + 1;
        free(r->slots);
        r->slots = slots;
        r->nslots = n;
    }
    size_t i = slot_of(r->slots, r->nslots, r->names, sizeof *r->names, r->path);
    if (r->slots[i])
        return r->slots[i] - 1;
    if (!grow((void **)&r->names, &r->capnames, r->nnames + 1, sizeof *r->names))
        return SIZE_MAX;
    const char *name = fvm_arena_strdup(&r->m->arena, r->path);
    if (!name)
        return SIZE_MAX;
    r->names[r->nnames] = name;
    r->slots[i] = r->nnames + 1;
    return r->nnames++;
}

/* The number a leaf stands for: ints, reals and the writer's non-finite strings. */
static bool leaf_number(const fvm_doc *v, double *out)
{
    switch (v->kind) {
    case FVM_DOC_INT:
        *out = (double)v->u.i;
        return true;
    case FVM_DOC_REAL:
        *out = v->u.r;
        return true;
    case FVM_DOC_STRING:
        if (!strcmp(v->u.str.s, "nan"))
            *out = NAN;
        else if (!strcmp(v->u.str.s, "inf"))
            *out = INFINITY;
        else if (!strcmp(v->u.str.s, "-inf"))
            *out = -INFINITY;
        else
            return false;
        return true;
    default:
        return false;
    }
}

/* Adds the numbers under v, named r->path (of length len) and its extensions. */
static fvm_status walk(reader *r, const fvm_doc *v, size_t len, int depth)
{
    double x;
    if (leaf_number(v, &x)) {
        size_t s = series_index(r);
        if (s == SIZE_MAX || !grow((void **)&r->pts, &r->cappts, r->npts + 1, sizeof *r->pts))
            return nomem(r);
        r->pts[r->npts++] = (point){s, x};
        return FVM_OK;
    }
    if (v->kind != FVM_DOC_OBJECT || depth >= 16)
        return FVM_OK;
    for (size_t i = 0; i < v->u.coll.n; i++) {
        const char *key = v->u.coll.keys[i]->u.str.s;
        if (depth == 0 && !strcmp(key, "round"))
            continue;
        size_t klen = strlen(key), n = len + (len ? 1 : 0) + klen;
        if (n >= sizeof r->path)
            continue; /* a name nobody would plot */
        if (len)
            r->path[len] = '.';
        memcpy(r->path + n - klen, key, klen + 1);
        fvm_status s = walk(r, v->u.coll.items[i], n, depth + 1);
        r->path[len] = 0;
        if (s)
            return s;
    }
    return FVM_OK;
}

/* One non-blank line, numbered lineno. The file's last line, when it has no
 * newline and is not JSON, is a line cut short: *skipped is set instead of an error. */
static fvm_status read_line(reader *r, const char *text, size_t len, int lineno, bool last_unterminated, bool *skipped)
{
    fvm_arena a = {0};
    fvm_doc *doc = NULL;
    fvm_doc_src src = {.file = r->file, .text = text, .len = len};
    fvm_diag local = {0};
    fvm_status s = fvm_json_parse(&a, &src, &doc, &local);
    *skipped = false;
    if (s == FVM_ERR_SYNTAX && last_unterminated) {
        *skipped = true;
        s = FVM_OK;
        goto done;
    }
    if (s) {
        /* The parser numbers lines from the start of this one, and its end is the line's. */
        for (int i = 0; i < local.n; i++) {
            fvm_loc loc = local.errs[i].loc;
            loc.line = loc.line ? loc.line + lineno - 1 : lineno;
            const char *msg = local.errs[i].msg, *eof = strstr(msg, "end of file");
            if (eof)
                fvm_diag_add(r->d, local.errs[i].code, &loc, "%.*send of line%s", (int)(eof - msg), msg,
                             eof + strlen("end of file"));
            else
                fvm_diag_add(r->d, local.errs[i].code, &loc, "%s", msg);
        }
        goto done;
    }
    fvm_loc loc = {.file = r->file, .line = lineno, .col = doc->col};
    if (doc->kind != FVM_DOC_OBJECT) {
        s = fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "a metrics line must be a JSON object with a \"round\"");
        goto done;
    }
    const fvm_doc *round = fvm_doc_get(doc, "round");
    if (!round && fvm_doc_get(doc, "run")) { /* a run's header (fvm_metrics_header): not a point */
        if (!r->m->header && !(r->m->header = fvm_arena_strndup(&r->m->arena, text, len)))
            s = nomem(r);
        goto done;
    }
    if (!round) {
        s = fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "no \"round\" in this line");
        goto done;
    }
    if (round->kind != FVM_DOC_INT || round->u.i < 0) {
        loc.col = round->col;
        s = fvm_diag_add(r->d, FVM_ERR_FORMAT, &loc, "\"round\" must be an integer >= 0");
        goto done;
    }
    if (!grow((void **)&r->rows, &r->caprows, r->nrows + 1, sizeof *r->rows)) {
        s = nomem(r);
        goto done;
    }
    size_t first = r->npts;
    r->path[0] = 0;
    s = walk(r, doc, 0, 0);
    if (s)
        goto done;
    if (r->nrows && r->rows[r->nrows - 1].round >= round->u.i && !r->m->restart_line)
        r->m->restart_line = lineno;
    r->rows[r->nrows] = (row){round->u.i, first, r->npts - first, r->nrows};
    r->nrows++;
done:
    fvm_diag_clear(&local);
    fvm_arena_free(&a);
    return s;
}

static int by_round(const void *pa, const void *pb)
{
    const row *a = pa, *b = pb;
    if (a->round != b->round)
        return a->round < b->round ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* Sorts the rows by round, keeps the last line of each round and lays the
 * points out as series. */
static fvm_status build(reader *r)
{
    fvm_metrics *m = r->m;
    qsort(r->rows, r->nrows, sizeof *r->rows, by_round);
    size_t kept = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        if (kept && r->rows[kept - 1].round == r->rows[i].round)
            kept--; /* the later line of the same round wins */
        r->rows[kept++] = r->rows[i];
    }
    m->replaced = r->nrows - kept;
    m->rounds = kept;
    m->nseries = r->nnames;
    m->slots = r->slots; /* the series are in the order of r->names */
    m->nslots = r->nslots;
    r->slots = NULL;
    m->series = fvm_arena_array(&m->arena, r->nnames ? r->nnames : 1, sizeof *m->series);
    size_t *count = calloc(r->nnames ? r->nnames : 1, sizeof *count);
    if (!m->series || !count) {
        free(count);
        return nomem(r);
    }
    for (size_t i = 0; i < kept; i++)
        for (size_t j = 0; j < r->rows[i].n; j++)
            count[r->pts[r->rows[i].first + j].series]++;
    for (size_t k = 0; k < r->nnames; k++) {
        fvm_series *s = &m->series[k];
        s->name = r->names[k];
        s->rounds = fvm_arena_array(&m->arena, count[k] ? count[k] : 1, sizeof *s->rounds);
        s->values = fvm_arena_array(&m->arena, count[k] ? count[k] : 1, sizeof *s->values);
        if (!s->rounds || !s->values) {
            free(count);
            return nomem(r);
        }
    }
    free(count);
    for (size_t i = 0; i < kept; i++) {
        for (size_t j = 0; j < r->rows[i].n; j++) {
            const point *p = &r->pts[r->rows[i].first + j];
            fvm_series *s = &m->series[p->series];
            /* A key repeated inside one line (which the JSON reader refuses)
             * cannot put two points at one round. */
            if (s->n && s->rounds[s->n - 1] == r->rows[i].round)
                continue;
            ((int64_t *)s->rounds)[s->n] = r->rows[i].round;
            ((double *)s->values)[s->n] = p->v;
            s->n++;
        }
    }
    return FVM_OK;
}

fvm_status fvm_metrics_parse(const char *file, const char *text, size_t len, fvm_metrics **out, fvm_diag *d)
{
    *out = NULL;
    reader r = {.file = file, .d = d};
    fvm_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    r.m = m;
    fvm_status s = FVM_OK;
    m->file = fvm_arena_strdup(&m->arena, file);
    if (!m->file) {
        s = nomem(&r);
        goto fail;
    }
    int lineno = 1;
    for (size_t off = 0; off < len; lineno++) {
        const char *nl = memchr(text + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - text) : len;
        const char *line = text + off;
        size_t n = end - off;
        off = nl ? end + 1 : len;
        size_t k = 0;
        while (k < n && strchr(" \t\r", line[k]))
            k++;
        if (k == n)
            continue; /* blank */
        bool skipped;
        s = read_line(&r, line, n, lineno, !nl, &skipped);
        if (s)
            goto fail;
        if (skipped)
            m->partial_line = lineno;
    }
    fvm_loc loc = {.file = file};
    if (r.nrows == 0) {
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "no rounds: %s",
                         m->partial_line ? "its only line is incomplete" : "the file is empty");
        goto fail;
    }
    if (r.nnames == 0) {
        s = fvm_diag_add(d, FVM_ERR_FORMAT, &loc, "no metrics: its %zu line%s hold%s a round but no numbers", r.nrows,
                         r.nrows == 1 ? "" : "s", r.nrows == 1 ? "s" : "");
        goto fail;
    }
    s = build(&r);
    if (s)
        goto fail;
    free(r.rows);
    free(r.pts);
    free(r.names);
    *out = m;
    return FVM_OK;
fail:
    free(r.rows);
    free(r.pts);
    free(r.names);
    free(r.slots);
    fvm_metrics_free(m);
    return s;
}

fvm_status fvm_metrics_read(const char *path, fvm_metrics **out, fvm_diag *d)
{
    char *text;
    size_t len;
    *out = NULL;
    fvm_status s = fvm_read_file(path, &text, &len, d);
    if (s)
        return s;
    s = fvm_metrics_parse(path, text, len, out, d);
    free(text);
    return s;
}

const fvm_series *fvm_metrics_get(const fvm_metrics *m, const char *name)
{
    if (!m->nslots)
        return NULL;
    size_t i = slot_of(m->slots, m->nslots, &m->series[0].name, sizeof *m->series, name);
    return m->slots[i] ? &m->series[m->slots[i] - 1] : NULL;
}

void fvm_metrics_free(fvm_metrics *m)
{
    if (!m)
        return;
    free(m->slots);
    fvm_arena_free(&m->arena);
    free(m);
}
