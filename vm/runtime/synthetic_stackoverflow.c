/* synthetic_stackoverflow.c - a stand-in for FedJAX's federated Stack Overflow (sentences of users), a table of words, and FedJAX's tokenizer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/prng.h"
#include "../core/rand.h"
#include "synthetic.h"

enum { WORDS = 30000, NPUNCT = 8, TAGS = 60, MAX_CLIENTS = 1000000, MIN_SENTENCES = 100, MAX_SENTENCES = 5000 };
enum { STREAM_LEXICON = 0, STREAM_USERS = 1 };
/* 2008-08-01 (Stack Overflow's start), 2018-01-01 (train | test) and the stand-in's end, 2018-12-31, UTC */
static const double T_START = 1217548800.0, T_SPLIT = 1514764800.0, T_END = 1546300799.0, YEAR = 31556952.0;

const char *const fvm_stackoverflow_columns[FVM_STACKOVERFLOW_TEXT_COLUMNS] = {"creation_date", "title", "tags",
                                                                               "tokens", "type"};

/* punctuation tokens, at ranks 1, 3, 5, ... of the Zipf law (as TFF's tokens separate punctuation) */
static const char *const punct[NPUNCT] = {".", ",", "?", "(", ")", ":", "'", "-"};

struct fvm_stackoverflow {
    fvm_stackoverflow_config c;
    uint32_t key_users[2];
    char words[WORDS][12]; /* by rank */
    int successor[WORDS];
    double cdf[WORDS];
    int64_t ids[]; /* user ids, increasing */
};

void fvm_stackoverflow_defaults(fvm_stackoverflow_config *c)
{
    memset(c, 0, sizeof *c);
    c->clients = 300;
}

void fvm_stackoverflow_free(fvm_stackoverflow *s)
{
    free(s);
}

/* Word number v (0-based) spelled as syllables (consonant, vowel) of v + 1
 * in base 100: distinct numbers, distinct words. */
static void spell(int v, char *out)
{
    static const char cons[] = "bcdfghjklmnprstvwxyz", vow[] = "aeiou";
    int n = 0;
    for (int x = v + 1; x > 0; x /= 100) {
        out[n++] = cons[(x % 100) / 5];
        out[n++] = vow[(x % 100) % 5];
    }
    out[n] = 0;
}

fvm_status fvm_stackoverflow_new(const fvm_stackoverflow_config *c, fvm_stackoverflow **out, fvm_diag *d)
{
    *out = NULL;
    if (c->clients < 1 || c->clients > MAX_CLIENTS)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL,
                            "synthetic Stack Overflow: the number of clients must be in [1, %d]", MAX_CLIENTS);
    fvm_stackoverflow *s = calloc(1, sizeof *s + (size_t)c->clients * sizeof(int64_t));
    int64_t *perm = malloc(WORDS * sizeof *perm);
    if (!s || !perm) {
        free(s);
        free(perm);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    s->c = *c;
    uint32_t key[2];
    fvm_prng_key(c->seed, key);
    fvm_prng_fold_in(key, STREAM_USERS, s->key_users);
    fvm_rand r;
    fvm_rand_init_fold(&r, key, STREAM_LEXICON);
    /* the spellings in a random order of rank; punctuation at the odd ranks up to 15 */
    fvm_rand_permutation(&r, WORDS, perm);
    for (int w = 0, p = 0; w < WORDS; w++) {
        if (w % 2 == 1 && w / 2 < NPUNCT)
            snprintf(s->words[w], sizeof s->words[w], "%s", punct[w / 2]);
        else
            spell((int)perm[p++], s->words[w]);
        s->cdf[w] = (w ? s->cdf[w - 1] : 0) + pow(w + 1, -1.1);
    }
    for (int w = 0; w < WORDS; w++)
        s->successor[w] = fvm_rand_cdf(&r, s->cdf, WORDS);
    /* user ids 10 k + u, u uniform in 0..9: about one in ten is held out */
    for (int64_t k = 0; k < c->clients; k++)
        s->ids[k] = 10 * k + (int64_t)fvm_rand_below(&r, 10);
    free(perm);
    *out = s;
    return FVM_OK;
}

void fvm_stackoverflow_client_id(const fvm_stackoverflow *s, int64_t k, char id[16])
{
    snprintf(id, 16, "%08lld", (long long)s->ids[k]);
}

typedef struct buf {
    uint8_t *p;
    int64_t n, cap;
} buf;

static bool put(buf *b, const char *s, int64_t n)
{
    if (b->n + n > b->cap) {
        int64_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, (size_t)cap);
        if (!p)
            return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return true;
}

/* words drawn by Zipf's law, each followed by its successor 35% of the time; count of them, separated by ' ' */
static bool words(const fvm_stackoverflow *s, fvm_rand *r, int count, int end, buf *b)
{
    int w = -1;
    for (int i = 0; i < count; i++) {
        w = i == count - 1 && end >= 0             ? end
            : w >= 0 && fvm_rand_uniform(r) < 0.35 ? s->successor[w]
                                                   : fvm_rand_cdf(r, s->cdf, WORDS);
        if ((i && !put(b, " ", 1)) || !put(b, s->words[w], (int64_t)strlen(s->words[w])))
            return false;
    }
    return true;
}

void fvm_stackoverflow_examples_free(fvm_stackoverflow_examples *e)
{
    for (int c = 0; c < FVM_STACKOVERFLOW_TEXT_COLUMNS; c++) {
        free(e->bytes[c]);
        free(e->offsets[c]);
    }
    free(e->score);
    memset(e, 0, sizeof *e);
}

/* A post's fields other than its sentences, one string per text column but tokens. */
typedef struct post {
    char date[40], title[200], tags[100];
    const char *type;
    int64_t score;
} post;

static void make_post(const fvm_stackoverflow *s, fvm_rand *r, double t, post *p)
{
    time_t secs = (time_t)t;
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(p->date, sizeof p->date, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(p->date + n, sizeof p->date - n, ".%02d UTC", (int)((t - floor(t)) * 100)); /* in order, as t */
    buf b = {0};
    int len = 3 + (int)fvm_rand_below(r, 8);
    (void)words(s, r, len, 5 /* '?' */, &b); /* short: fits the title */
    n = b.n < (int64_t)sizeof p->title - 1 ? (size_t)b.n : sizeof p->title - 1;
    if (b.p) /* NULL only when out of memory: an empty title */
        memcpy(p->title, b.p, n);
    p->title[n] = 0;
    free(b.p);
    int ntags = 1 + (int)fvm_rand_below(r, 4), at = 0;
    for (int i = 0; i < ntags; i++) /* tags: the words of ranks 100 to 159 */
        at += snprintf(p->tags + at, sizeof p->tags - (size_t)at, "%s%s", i ? "|" : "",
                       s->words[100 + fvm_rand_below(r, TAGS)]);
    p->type = fvm_rand_uniform(r) < 0.6 ? "answer" : "question";
    p->score = (int64_t)floor(exp(0.2 + 1.2 * fvm_rand_normal(r))) - (fvm_rand_uniform(r) < 0.15 ? 2 : 0);
}

static bool add_example(fvm_stackoverflow_examples *e, buf bufs[][FVM_STACKOVERFLOW_TEXT_COLUMNS], int split,
                        const post *p, const buf *sentence)
{
    fvm_stackoverflow_examples *x = &e[split];
    buf *b = bufs[split];
    const char *text[FVM_STACKOVERFLOW_TEXT_COLUMNS] = {p->date, p->title, p->tags, NULL, p->type};
    for (int c = 0; c < FVM_STACKOVERFLOW_TEXT_COLUMNS; c++) {
        bool ok = c == FVM_STACKOVERFLOW_TOKENS ? put(&b[c], (const char *)sentence->p, sentence->n)
                                                : put(&b[c], text[c], (int64_t)strlen(text[c]));
        if (!ok)
            return false;
        x->offsets[c][x->n + 1] = b[c].n;
    }
    x->score[x->n++] = p->score;
    return true;
}

fvm_status fvm_stackoverflow_client(const fvm_stackoverflow *s, int64_t k, fvm_stackoverflow_examples out[3],
                                    fvm_diag *d)
{
    memset(out, 0, 3 * sizeof *out);
    if (k < 0 || k >= s->c.clients)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "client %lld out of range [0, %lld)", (long long)k,
                            (long long)s->c.clients);
    fvm_rand r;
    fvm_rand_init_fold(&r, s->key_users, (uint32_t)k);
    /* sentences: 100 + floor(lognormal(5.2, 1.1)), at most 5000 */
    double want = MIN_SENTENCES + floor(exp(5.2 + 1.1 * fvm_rand_normal(&r)));
    int64_t total = want > MAX_SENTENCES ? MAX_SENTENCES : (int64_t)want;
    /* active from a to b: 60% of the users past 2018-01-01 (into test), the others ending before it */
    double b = fvm_rand_uniform(&r) < 0.6 ? T_SPLIT + fvm_rand_uniform(&r) * (T_END - T_SPLIT)
                                          : T_SPLIT - 1 - fvm_rand_uniform(&r) * 2 * YEAR;
    double a = b - (1 + 5 * fvm_rand_uniform(&r)) * YEAR;
    a = a < T_START ? T_START : a;
    bool held_out = s->ids[k] % 10 == 0;
    buf bufs[3][FVM_STACKOVERFLOW_TEXT_COLUMNS];
    memset(bufs, 0, sizeof bufs);
    buf sentence = {0};
    fvm_status st = FVM_ERR_NOMEM;
    for (int sp = 0; sp < 3; sp++) {
        for (int c = 0; c < FVM_STACKOVERFLOW_TEXT_COLUMNS; c++)
            if (!(out[sp].offsets[c] = calloc((size_t)total + 1, sizeof(int64_t))))
                goto fail;
        if (!(out[sp].score = calloc((size_t)total + 1, sizeof(int64_t))))
            goto fail;
    }
    /* posts of 1 + floor(lognormal(0.6, 0.8)) sentences, evenly spread over [a, b] with jitter */
    int64_t done = 0;
    double mean_post = 1 + exp(0.6 + 0.32) - 0.5, step = (b - a) / ((double)total / mean_post);
    double t = a;
    while (done < total) {
        int64_t len = 1 + (int64_t)floor(exp(0.6 + 0.8 * fvm_rand_normal(&r)));
        len = len > total - done ? total - done : len;
        t += step * (0.5 + fvm_rand_uniform(&r));
        t = t > b ? b : t;
        post p;
        make_post(s, &r, t, &p);
        int split = held_out      ? FVM_STACKOVERFLOW_HELD_OUT
                    : t < T_SPLIT ? FVM_STACKOVERFLOW_TRAIN
                                  : FVM_STACKOVERFLOW_TEST;
        for (int64_t i = 0; i < len; i++) {
            double n = 1 + floor(exp(2.4 + 0.55 * fvm_rand_normal(&r)));
            int count = n > 60 ? 60 : (int)n;
            sentence.n = 0;
            /* most sentences end with '.' (rank 1) or '?' (rank 5) */
            double u = fvm_rand_uniform(&r);
            if (!words(s, &r, count,
                       u < 0.7   ? 1
                       : u < 0.8 ? 5
                                 : -1,
                       &sentence) ||
                !add_example(out, bufs, split, &p, &sentence))
                goto fail;
        }
        done += len;
    }
    for (int sp = 0; sp < 3; sp++)
        for (int c = 0; c < FVM_STACKOVERFLOW_TEXT_COLUMNS; c++) {
            out[sp].bytes[c] = bufs[sp][c].p ? bufs[sp][c].p : malloc(1);
            if (!out[sp].bytes[c]) {
                bufs[sp][c].p = NULL;
                goto fail;
            }
            bufs[sp][c].p = NULL;
        }
    free(sentence.p);
    return FVM_OK;
fail:
    for (int sp = 0; sp < 3; sp++) {
        for (int c = 0; c < FVM_STACKOVERFLOW_TEXT_COLUMNS; c++)
            free(bufs[sp][c].p);
        fvm_stackoverflow_examples_free(&out[sp]);
    }
    free(sentence.p);
    return fvm_diag_add(d, st, NULL, "out of memory");
}

/* ---- a table of words ----------------------------------------------------------- */

typedef struct entry {
    int64_t off, len, count;
} entry;

struct fvm_wordtab {
    buf text;
    entry *e;
    int64_t n, cap;
    int64_t *slot; /* open addressing: index + 1, 0 empty */
    int64_t nslots;
};

static uint64_t hash(const uint8_t *w, int64_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int64_t i = 0; i < len; i++)
        h = (h ^ w[i]) * 1099511628211ull;
    return h;
}

fvm_status fvm_wordtab_new(fvm_wordtab **out, fvm_diag *d)
{
    fvm_wordtab *t = calloc(1, sizeof *t);
    if (t && (t->slot = calloc(1024, sizeof *t->slot)))
        t->nslots = 1024;
    if (!t || !t->slot) {
        free(t);
        *out = NULL;
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    *out = t;
    return FVM_OK;
}

void fvm_wordtab_free(fvm_wordtab *t)
{
    if (!t)
        return;
    free(t->text.p);
    free(t->e);
    free(t->slot);
    free(t);
}

int64_t fvm_wordtab_size(const fvm_wordtab *t)
{
    return t->n;
}

/* The slot of w: holding it, or the empty one where it would go. */
static int64_t find_slot(const fvm_wordtab *t, const uint8_t *w, int64_t len)
{
    uint64_t mask = (uint64_t)t->nslots - 1, i = hash(w, len) & mask;
    for (;; i = (i + 1) & mask) {
        int64_t v = t->slot[i];
        if (!v)
            return (int64_t)i;
        const entry *e = &t->e[v - 1];
        if (e->len == len && !memcmp(t->text.p + e->off, w, (size_t)len))
            return (int64_t)i;
    }
}

int64_t fvm_wordtab_find(const fvm_wordtab *t, const uint8_t *w, int64_t len)
{
    return t->slot[find_slot(t, w, len)] - 1;
}

fvm_status fvm_wordtab_add(fvm_wordtab *t, const uint8_t *w, int64_t len, int64_t count, bool *added, fvm_diag *d)
{
    int64_t i = find_slot(t, w, len);
    if (added)
        *added = !t->slot[i];
    if (t->slot[i]) {
        t->e[t->slot[i] - 1].count += count;
        return FVM_OK;
    }
    if (t->n == t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 256;
        entry *e = realloc(t->e, (size_t)cap * sizeof *e);
        if (!e)
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        t->e = e;
        t->cap = cap;
    }
    int64_t off = t->text.n;
    if (!put(&t->text, (const char *)w, len))
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    t->e[t->n] = (entry){off, len, count};
    t->slot[i] = ++t->n;
    if (2 * t->n > t->nslots) { /* keep the load under one half */
        int64_t ns = 2 * t->nslots, *slot = calloc((size_t)ns, sizeof *slot);
        if (!slot)
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        free(t->slot);
        t->slot = slot;
        t->nslots = ns;
        for (int64_t k = 0; k < t->n; k++)
            t->slot[find_slot(t, t->text.p + t->e[k].off, t->e[k].len)] = k + 1;
    }
    return FVM_OK;
}

fvm_status fvm_wordtab_count(fvm_wordtab *t, const uint8_t *tokens, int64_t len, fvm_diag *d)
{
    int64_t start = 0;
    if (!tokens) /* an empty string's data may be NULL */
        tokens = (const uint8_t *)"";
    for (int64_t i = 0; i <= len; i++)
        if (i == len || tokens[i] == ' ') {
            fvm_status s = fvm_wordtab_add(t, tokens + start, i - start, 1, NULL, d);
            if (s)
                return s;
            start = i + 1;
        }
    return FVM_OK;
}

const uint8_t *fvm_wordtab_word(const fvm_wordtab *t, int64_t i, int64_t *len, int64_t *count)
{
    *len = t->e[i].len;
    if (count)
        *count = t->e[i].count;
    return t->text.p + t->e[i].off;
}

/* A word for sorting: its bytes (borrowed from the table), length and count. */
typedef struct ranked {
    const uint8_t *w;
    int64_t len, count;
} ranked;

static int by_count(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    int64_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->w, b->w, (size_t)n) : 0;
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

fvm_status fvm_wordtab_top(const fvm_wordtab *t, int64_t k, fvm_wordtab **out, fvm_diag *d)
{
    *out = NULL;
    ranked *order = malloc(((size_t)t->n + 1) * sizeof *order);
    if (!order)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    for (int64_t i = 0; i < t->n; i++)
        order[i] = (ranked){t->text.p + t->e[i].off, t->e[i].len, t->e[i].count};
    qsort(order, (size_t)t->n, sizeof *order, by_count);
    fvm_wordtab *top;
    fvm_status s = fvm_wordtab_new(&top, d);
    for (int64_t i = 0; s == FVM_OK && i < t->n && i < k; i++)
        s = fvm_wordtab_add(top, order[i].w, order[i].len, order[i].count, NULL, d);
    free(order);
    if (s) {
        fvm_wordtab_free(top);
        return s;
    }
    *out = top;
    return FVM_OK;
}

fvm_status fvm_stackoverflow_preprocess(const fvm_wordtab *vocab, int64_t n, const uint8_t *const *tokens,
                                        const int64_t *lens, int64_t max_length, fvm_tensor *x, fvm_tensor *y,
                                        fvm_diag *d)
{
    memset(x, 0, sizeof *x);
    memset(y, 0, sizeof *y);
    if (max_length < 1 || max_length > 1000000)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "the maximum length must be in [1, 1000000], not %lld",
                            (long long)max_length);
    fvm_dims sh = {.rank = 2, .d = {n, max_length}};
    fvm_status st = fvm_tensor_alloc(x, FVM_DTYPE_I32, &sh, d);
    if (st == FVM_OK && (st = fvm_tensor_alloc(y, FVM_DTYPE_I32, &sh, d)))
        fvm_tensor_release(x);
    if (st)
        return st;
    int32_t *xp = fvm_tensor_data(x), *yp = fvm_tensor_data(y);
    memset(xp, 0, (size_t)(n * max_length) * sizeof *xp); /* PAD */
    memset(yp, 0, (size_t)(n * max_length) * sizeof *yp);
    int32_t oov = 3 + (int32_t)fvm_wordtab_size(vocab);
    for (int64_t i = 0; i < n; i++) {
        int32_t *xr = xp + i * max_length, *yr = yp + i * max_length;
        const uint8_t *tok = tokens[i] ? tokens[i] : (const uint8_t *)""; /* an empty string's data may be NULL */
        /* the ids BOS, words..., EOS at positions 0, 1, ...: x holds [0, max_length), y [1, max_length] */
        int64_t at = 0, start = 0;
        xr[at++] = FVM_STACKOVERFLOW_BOS;
        for (int64_t j = 0; j <= lens[i] && at <= max_length; j++)
            if (j == lens[i] || tok[j] == ' ') {
                int64_t v = fvm_wordtab_find(vocab, tok + start, j - start);
                int32_t id = v >= 0 ? 3 + (int32_t)v : oov;
                if (at < max_length)
                    xr[at] = id;
                yr[at - 1] = id;
                at++;
                start = j + 1;
            }
        if (at <= max_length) /* EOS, the last id, is in y only */
            yr[at - 1] = FVM_STACKOVERFLOW_EOS;
    }
    return FVM_OK;
}
