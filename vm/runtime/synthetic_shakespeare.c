/* synthetic_shakespeare.c - a stand-in for FedJAX's federated Shakespeare (lines of speaking roles), and FedJAX's preprocessing of its snippets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/prng.h"
#include "../core/rand.h"
#include "synthetic.h"

enum { WORDS = 1200, OWN_WORDS = 60, MAX_WORD = 12, LETTERS = 26, MAX_SNIPPET = 4000, MAX_CLIENTS = 1000000 };
enum { STREAM_LEXICON = 0, STREAM_ROLES = 1, STREAM_TEXT = 2, STREAM_SIZES = 3 };

struct fvm_shakespeare {
    fvm_shakespeare_config c;
    uint32_t key_roles[2], key_text[2], key_sizes[2];
    char words[WORDS][MAX_WORD + 1];
    int len[WORDS];
    double cdf[WORDS]; /* Zipf over the lexicon's ranks */
};

/* FedJAX's character table (fedjax.datasets.shakespeare, the vocabulary of
 * TFF's text generation tutorial): byte vocab[i] is label 3 + i. */
static const char vocab[] = "dhlptx@DHLPTX $(,048cgkoswCGKOSW[_#'/37;?bfjnrvzBFJNRVZ\"&*.26:\naeimquyAEIMQUY]!%)-159\r";

int32_t fvm_shakespeare_label(uint8_t byte)
{
    const char *p = memchr(vocab, byte, sizeof vocab - 1);
    return p ? 3 + (int32_t)(p - vocab) : FVM_SHAKESPEARE_OOV;
}

void fvm_shakespeare_defaults(fvm_shakespeare_config *c)
{
    memset(c, 0, sizeof *c);
    c->clients = 715;
}

void fvm_shakespeare_free(fvm_shakespeare *s)
{
    free(s);
}

fvm_status fvm_shakespeare_new(const fvm_shakespeare_config *c, fvm_shakespeare **out, fvm_diag *d)
{
    *out = NULL;
    if (c->clients < 1 || c->clients > MAX_CLIENTS)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "synthetic Shakespeare: the number of clients must be in [1, %d]",
                            MAX_CLIENTS);
    fvm_shakespeare *s = calloc(1, sizeof *s);
    if (!s)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    s->c = *c;
    uint32_t key[2];
    fvm_prng_key(c->seed, key);
    fvm_prng_fold_in(key, STREAM_ROLES, s->key_roles);
    fvm_prng_fold_in(key, STREAM_TEXT, s->key_text);
    fvm_prng_fold_in(key, STREAM_SIZES, s->key_sizes);
    fvm_rand r;
    fvm_rand_init_fold(&r, key, STREAM_LEXICON);
    /* a first-order chain over the letters and the word's end: each letter
     * has a few likely successors (Dirichlet(0.15)), so words have structure */
    double next[LETTERS + 1][LETTERS + 1];
    for (int a = 0; a <= LETTERS; a++) {
        fvm_rand_dirichlet(&r, 0.15, LETTERS + 1, next[a]);
        for (int b = 1; b <= LETTERS; b++)
            next[a][b] += next[a][b - 1];
    }
    for (int w = 0; w < WORDS; w++) {
        int prev = LETTERS, n = 0; /* LETTERS: the start (and, as a successor, the end) */
        while (n < MAX_WORD) {
            int l = fvm_rand_cdf(&r, next[prev], LETTERS + 1);
            if (l == LETTERS) {
                if (n > 0)
                    break;
                continue;
            }
            s->words[w][n++] = (char)('a' + l);
            prev = l;
        }
        s->len[w] = n;
    }
    for (int w = 0; w < WORDS; w++)
        s->cdf[w] = (w ? s->cdf[w - 1] : 0) + pow(w + 1, -1.07);
    *out = s;
    return FVM_OK;
}

/* Role k: its play (one of 36) and a name of one or two lexicon words. */
void fvm_shakespeare_client_id(const fvm_shakespeare *s, int64_t k, char id[64])
{
    fvm_rand r;
    fvm_rand_init_fold(&r, s->key_roles, (uint32_t)k);
    int play = (int)fvm_rand_below(&r, 36);
    const char *name = s->words[fvm_rand_below(&r, WORDS)];
    int n = snprintf(id, 64, "PLAY_%02d_", play);
    for (const char *p = name; *p && n < 40; p++)
        id[n++] = (char)(*p - 'a' + 'A');
    snprintf(id + n, (size_t)(64 - n), "_%lld", (long long)k);
}

/* Snippets (speaking turns) per role: train 1 + floor(lognormal(2.3,
 * 1.25)), capped at 2000 (mean about 22.3: TFF's 16,068 over 715 roles);
 * test 1 + floor(0.1 n + u) (mean about 3.3: 2,356 over 715), so every role
 * has at least one snippet in each split, as in TFF's split. */
int64_t fvm_shakespeare_size(const fvm_shakespeare *s, int64_t k, bool test)
{
    fvm_rand r;
    fvm_rand_init_fold(&r, s->key_sizes, (uint32_t)k);
    double n = 1 + floor(exp(2.3 + 1.25 * fvm_rand_normal(&r)));
    n = n > 2000 ? 2000 : n;
    return test ? 1 + (int64_t)floor(0.1 * n + fvm_rand_uniform(&r)) : (int64_t)n;
}

typedef struct buf {
    uint8_t *p;
    int64_t n, cap;
} buf;

static bool put(buf *b, const char *s, int64_t n)
{
    if (b->n + n > b->cap) {
        int64_t cap = b->cap ? b->cap : 4096;
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

/* A role's voice: its own words (drawn from it 30% of the time) and its line width. */
typedef struct voice {
    int own[OWN_WORDS];
    int width;
} voice;

/* One snippet: sentences of words (capitalised after a full stop), commas,
 * lines broken at the role's width, about lognormal(4.6, 1) characters. */
static bool snippet(const fvm_shakespeare *s, fvm_rand *r, const voice *v, buf *b)
{
    double want = floor(exp(4.6 + fvm_rand_normal(r))) + 8;
    int64_t target = want > MAX_SNIPPET ? MAX_SNIPPET : (int64_t)want, start = b->n, line = 0;
    bool cap = true;
    while (b->n - start < target) {
        int w = fvm_rand_uniform(r) < 0.3 ? v->own[fvm_rand_below(r, OWN_WORDS)] : fvm_rand_cdf(r, s->cdf, WORDS);
        char word[MAX_WORD + 3];
        int n = s->len[w];
        memcpy(word, s->words[w], (size_t)n);
        if (cap)
            word[0] = (char)(word[0] - 'a' + 'A');
        double u = fvm_rand_uniform(r);
        cap = u < 0.12;
        if (cap)
            word[n++] = u < 0.084 ? '.' : u < 0.102 ? '?' : '!';
        else if (u < 0.2)
            word[n++] = ',';
        bool last = b->n - start + n >= target;
        if (!last) {
            char sep = line + n + 1 >= v->width ? '\n' : ' ';
            word[n++] = sep;
        }
        line = word[n - 1] == '\n' ? 0 : line + n;
        if (!put(b, word, n))
            return false;
    }
    return true;
}

fvm_status fvm_shakespeare_client(const fvm_shakespeare *s, int64_t k, bool test, uint8_t **bytes, int64_t **offsets,
                                  int64_t *n, fvm_diag *d)
{
    *bytes = NULL;
    *offsets = NULL;
    *n = 0;
    if (k < 0 || k >= s->c.clients)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "client %lld out of range [0, %lld)", (long long)k,
                            (long long)s->c.clients);
    int64_t count = fvm_shakespeare_size(s, k, test);
    int64_t *off = malloc((size_t)(count + 1) * sizeof *off);
    buf b = {0};
    if (!off)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    uint32_t rkey[2];
    fvm_prng_fold_in(s->key_text, (uint32_t)k, rkey);
    fvm_rand r;
    fvm_rand_init_fold(&r, rkey, 0); /* the role's voice, the same in both splits */
    voice v;
    for (int i = 0; i < OWN_WORDS; i++)
        v.own[i] = (int)fvm_rand_below(&r, WORDS);
    v.width = 35 + (int)fvm_rand_below(&r, 26);
    fvm_rand_init_fold(&r, rkey, test ? 2 : 1);
    off[0] = 0;
    for (int64_t i = 0; i < count; i++) {
        if (!snippet(s, &r, &v, &b)) {
            free(off);
            free(b.p);
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        }
        off[i + 1] = b.n;
    }
    *bytes = b.p;
    *offsets = off;
    *n = count;
    return FVM_OK;
}

fvm_status fvm_shakespeare_preprocess(int64_t n, const uint8_t *const *snippets, const int64_t *lens,
                                      int64_t sequence_length, fvm_tensor *x, fvm_tensor *y, fvm_diag *d)
{
    memset(x, 0, sizeof *x);
    memset(y, 0, sizeof *y);
    if (sequence_length < 1 || sequence_length > 1000000)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "the sequence length must be in [1, 1000000], not %lld",
                            (long long)sequence_length);
    int64_t joined = 0; /* each snippet with BOS before and EOS after */
    for (int64_t i = 0; i < n; i++) {
        if (lens[i] < 0 || lens[i] > INT32_MAX)
            return fvm_diag_add(d, FVM_ERR_LIMIT, NULL, "snippet %lld is longer than 2^31-1 bytes", (long long)i);
        joined += lens[i] + 2;
        if (joined > INT32_MAX)
            return fvm_diag_add(d, FVM_ERR_LIMIT, NULL, "a client's snippets join to more than 2^31-1 labels");
    }
    /* inputs are the joined labels but the last, outputs but the first, each
     * padded to a multiple of the sequence length */
    int64_t len = joined - 1 > 0 ? joined - 1 : 0;
    int64_t rows = (len + sequence_length - 1) / sequence_length;
    fvm_dims sh = {.rank = 2, .d = {rows, sequence_length}};
    fvm_status st = fvm_tensor_alloc(x, FVM_DTYPE_I32, &sh, d);
    if (st == FVM_OK && (st = fvm_tensor_alloc(y, FVM_DTYPE_I32, &sh, d)))
        fvm_tensor_release(x);
    if (st)
        return st;
    int32_t *xp = fvm_tensor_data(x), *yp = fvm_tensor_data(y);
    memset(xp, 0, (size_t)(rows * sequence_length) * sizeof *xp); /* PAD */
    memset(yp, 0, (size_t)(rows * sequence_length) * sizeof *yp);
    int64_t at = 0; /* position in the joined sequence */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = -1; j <= lens[i]; j++, at++) {
            int32_t label = j < 0          ? FVM_SHAKESPEARE_BOS
                            : j == lens[i] ? FVM_SHAKESPEARE_EOS
                                           : fvm_shakespeare_label(snippets[i][j]);
            if (at < len)
                xp[at] = label;
            if (at > 0)
                yp[at - 1] = label;
        }
    return FVM_OK;
}
