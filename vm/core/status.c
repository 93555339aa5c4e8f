/* status.c - status names and the diagnostics list. */
#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[FVM_STATUS_COUNT] = {
    [FVM_OK] = "ok",
    [FVM_ERR_IO] = "io",
    [FVM_ERR_SYNTAX] = "syntax",
    [FVM_ERR_FORMAT] = "format",
    [FVM_ERR_NAME] = "name",
    [FVM_ERR_TYPE] = "type",
    [FVM_ERR_PLACEMENT] = "placement",
    [FVM_ERR_CYCLE] = "cycle",
    [FVM_ERR_LIMIT] = "limit",
    [FVM_ERR_NOMEM] = "nomem",
    [FVM_ERR_RUNTIME] = "runtime",
    [FVM_ERR_USAGE] = "usage",
};

const char *fvm_status_name(fvm_status s)
{
    if ((unsigned)s >= FVM_STATUS_COUNT || !status_names[s])
        return "unknown";
    return status_names[s];
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

fvm_status fvm_diag_vadd(fvm_diag *d, fvm_status code, const fvm_loc *loc, const char *fmt, va_list ap)
{
    if (!d)
        return code;
    int max = d->max_errors > 0 ? d->max_errors : 1000;
    if (d->n >= max) {
        d->dropped++;
        return code;
    }
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 8;
        fvm_error *e = realloc(d->errs, (size_t)cap * sizeof *e);
        if (!e) {
            d->dropped++;
            return code;
        }
        d->errs = e;
        d->cap = cap;
    }
    fvm_error *e = &d->errs[d->n];
    memset(e, 0, sizeof *e);
    e->code = code;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    e->msg = strdup(buf);
    if (loc) {
        e->loc.line = loc->line;
        e->loc.col = loc->col;
        e->loc.file = dup_or_null(loc->file);
        e->loc.ptr = dup_or_null(loc->ptr);
    }
    if (!e->msg) {
        free((char *)e->loc.file);
        free((char *)e->loc.ptr);
        d->dropped++;
        return code;
    }
    d->n++;
    return code;
}

fvm_status fvm_diag_add(fvm_diag *d, fvm_status code, const fvm_loc *loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fvm_diag_vadd(d, code, loc, fmt, ap);
    va_end(ap);
    return code;
}

/* An error's place for fvm_diag_sort: its file's rank, line and column (an
 * error without a line takes the place of the one before it), then where it
 * stood, for stability. */
typedef struct place {
    int file, line, col, index;
} place;

static int by_place(const void *x, const void *y)
{
    const place *a = x, *b = y;
    if (a->file != b->file)
        return a->file < b->file ? -1 : 1;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    if (a->col != b->col)
        return a->col < b->col ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

void fvm_diag_sort(fvm_diag *d, int from)
{
    int n = d->n - from;
    if (n < 2)
        return;
    place *pl = malloc((size_t)n * sizeof *pl);
    fvm_error *sorted = malloc((size_t)n * sizeof *sorted);
    if (!pl || !sorted) {
        free(pl);
        free(sorted);
        return; /* unsorted: still every error */
    }
    int nfiles = 0;
    place last = {0, 0, 0, 0};
    for (int i = 0; i < n; i++) {
        const fvm_loc *l = &d->errs[from + i].loc;
        if (l->file && l->line > 0) {
            int f = 0;
            while (f < i && !(d->errs[from + f].loc.file && !strcmp(d->errs[from + f].loc.file, l->file)))
                f++;
            last.file = f < i ? pl[f].file : nfiles++;
            last.line = l->line;
            last.col = l->col;
        }
        pl[i] = last;
        pl[i].index = i;
    }
    qsort(pl, (size_t)n, sizeof *pl, by_place);
    for (int i = 0; i < n; i++)
        sorted[i] = d->errs[from + pl[i].index];
    memcpy(d->errs + from, sorted, (size_t)n * sizeof *sorted);
    free(pl);
    free(sorted);
}

void fvm_diag_append(fvm_diag *dst, const fvm_diag *src)
{
    for (int i = 0; src && i < src->n; i++)
        fvm_diag_add(dst, src->errs[i].code, &src->errs[i].loc, "%s", src->errs[i].msg);
    if (dst && src)
        dst->dropped += src->dropped;
}

void fvm_diag_locate_last(fvm_diag *d, const fvm_loc *loc)
{
    if (!d || d->n == 0 || !loc)
        return;
    fvm_error *e = &d->errs[d->n - 1];
    if (e->loc.file || e->loc.ptr || e->loc.line)
        return;
    e->loc.line = loc->line;
    e->loc.col = loc->col;
    e->loc.file = dup_or_null(loc->file);
    e->loc.ptr = dup_or_null(loc->ptr);
}

static bool label_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* The length of a leading "label: " by which a kernel or a shape rule names
 * itself ("gather: index 5 ..."), 0 when the message has none. */
static size_t label_len(const char *m)
{
    size_t n = 0;
    if (!(m[0] >= 'a' && m[0] <= 'z'))
        return 0;
    while (label_char(m[n]))
        n++;
    return m[n] == ':' && m[n + 1] == ' ' ? n : 0;
}

void fvm_diag_place_last(fvm_diag *d, const fvm_loc *loc, const char *what, fvm_status code)
{
    if (!d || d->n == 0)
        return;
    fvm_error *e = &d->errs[d->n - 1];
    if (e->loc.file || e->loc.ptr || e->loc.line)
        return;
    size_t wn = what ? strlen(what) : 0;
    if (what && !(strncmp(e->msg, what, wn) == 0 && !label_char(e->msg[wn]))) {
        /* "what: message", dropping the label of whoever reported it (the
         * kernel of an op may have another name: softmax_xent, pool, gather) */
        size_t ln = label_len(e->msg);
        const char *rest = e->msg + (ln ? ln + 2 : 0);
        size_t n = strlen(rest) + wn + 3;
        char *m = malloc(n);
        if (m) {
            snprintf(m, n, "%s: %s", what, rest);
            free(e->msg);
            e->msg = m;
        }
    }
    if (code != FVM_OK)
        e->code = code;
    fvm_diag_locate_last(d, loc);
}

void fvm_diag_clear(fvm_diag *d)
{
    for (int i = 0; i < d->n; i++) {
        free(d->errs[i].msg);
        free((char *)d->errs[i].loc.file);
        free((char *)d->errs[i].loc.ptr);
    }
    free(d->errs);
    int max = d->max_errors;
    memset(d, 0, sizeof *d);
    d->max_errors = max;
}

char *fvm_error_format(const fvm_error *e)
{
    char where[512] = "";
    size_t n = 0;
    if (e->loc.file) {
        if (e->loc.line > 0)
            n = (size_t)snprintf(where, sizeof where, "%s:%d:%d: ", e->loc.file, e->loc.line, e->loc.col);
        else
            n = (size_t)snprintf(where, sizeof where, "%s: ", e->loc.file);
    }
    if (e->loc.ptr && n < sizeof where)
        snprintf(where + n, sizeof where - n, "%s: ", e->loc.ptr[0] ? e->loc.ptr : "/");
    size_t len = strlen(where) + strlen(e->msg) + 1;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "%s%s", where, e->msg);
    return s;
}

const char *fvm_version(void)
{
    return FVM_VERSION;
}
