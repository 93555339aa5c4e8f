/* synthetic_emnist.c - a stand-in for FedJAX's federated EMNIST: handwriting-like glyphs of 62 classes by 3400 writers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/prng.h"
#include "../core/rand.h"
#include "synthetic.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

enum { SIDE = 28, CLASSES = 62, DIGITS = 10, STROKES = 3, SAMPLES = 24, WRITERS = 4100, MAX_CLIENTS = WRITERS * 100 };
enum { STREAM_GLYPHS = 0, STREAM_WRITERS = 1, STREAM_EXAMPLES = 2 };

/* The lowercase letters whose glyph is the uppercase one, smaller (EMNIST's
 * confusable pairs). */
static const char same_shape[] = "ckopsuvwxyz";

typedef struct stroke {
    double p[3][2]; /* a quadratic Bezier's control points, in pixels */
} stroke;

struct fvm_emnist {
    fvm_emnist_config c;
    uint32_t key_writers[2], key_examples[2];
    int strokes[CLASSES];
    stroke glyph[CLASSES][STROKES];
};

void fvm_emnist_defaults(fvm_emnist_config *c)
{
    memset(c, 0, sizeof *c);
    c->clients = 3400;
}

void fvm_emnist_free(fvm_emnist *e)
{
    free(e);
}

fvm_status fvm_emnist_new(const fvm_emnist_config *c, fvm_emnist **out, fvm_diag *d)
{
    *out = NULL;
    if (c->clients < 1 || c->clients > MAX_CLIENTS)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "synthetic EMNIST: the number of clients must be in [1, %d]",
                            MAX_CLIENTS);
    fvm_emnist *e = calloc(1, sizeof *e);
    if (!e)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    e->c = *c;
    uint32_t key[2];
    fvm_prng_key(c->seed, key);
    fvm_prng_fold_in(key, STREAM_WRITERS, e->key_writers);
    fvm_prng_fold_in(key, STREAM_EXAMPLES, e->key_examples);
    fvm_rand r;
    fvm_rand_init_fold(&r, key, STREAM_GLYPHS);
    for (int k = 0; k < CLASSES; k++) {
        e->strokes[k] = 1 + (int)fvm_rand_below(&r, STROKES);
        for (int s = 0; s < STROKES; s++)
            for (int p = 0; p < 3; p++)
                for (int a = 0; a < 2; a++)
                    e->glyph[k][s].p[p][a] = 6.0 + 16.0 * fvm_rand_uniform(&r);
    }
    for (const char *l = same_shape; *l; l++) { /* lowercase = uppercase at 0.7, centred lower */
        int up = DIGITS + (*l - 'a'), low = DIGITS + 26 + (*l - 'a');
        e->strokes[low] = e->strokes[up];
        for (int s = 0; s < STROKES; s++)
            for (int p = 0; p < 3; p++) {
                e->glyph[low][s].p[p][0] = 14.0 + 0.7 * (e->glyph[up][s].p[p][0] - 14.0);
                e->glyph[low][s].p[p][1] = 16.5 + 0.7 * (e->glyph[up][s].p[p][1] - 14.0);
            }
    }
    *out = e;
    return FVM_OK;
}

/* The writer of client k: NIST's form number f (0..4099, a bijection of k
 * modulo 4100) and the copy s = k / 4100. */
static void writer_of(int64_t k, int *f, int *s)
{
    *f = (int)((k % WRITERS) * 1237 % WRITERS);
    *s = (int)(k / WRITERS);
}

void fvm_emnist_client_id(const fvm_emnist *e, int64_t k, char id[32])
{
    int f, s;
    writer_of(k, &f, &s);
    uint32_t h[2];
    fvm_prng_fold_in(e->key_writers, (uint32_t)k, h);
    snprintf(id, 32, "%08x%08x:f%04d_%02d", h[0], h[1], f, s);
}

int fvm_emnist_domain(int64_t k)
{
    int f, s;
    writer_of(k, &f, &s);
    return f >= 2100 && f <= 2599 ? 0 : 1;
}

/* A writer's examples: train about N(198, 77) clipped to [10, 500] (FedJAX's
 * EMNIST-62: 671,585 examples over 3400 writers), test 11.5% of that. */
int64_t fvm_emnist_size(const fvm_emnist *e, int64_t k, bool test)
{
    fvm_rand r;
    fvm_rand_init_fold(&r, e->key_writers, (uint32_t)k);
    double n = floor(198.0 + 77.0 * fvm_rand_normal(&r));
    n = n < 10 ? 10 : n > 500 ? 500 : n;
    return test ? (int64_t)floor(0.115 * n + fvm_rand_uniform(&r)) : (int64_t)n;
}

/* A writer's style: stroke width, slant, size, darkness. */
typedef struct style {
    double width, slant, scale, ink;
} style;

static int draw_label(fvm_rand *r, bool only_digits)
{
    if (only_digits)
        return (int)fvm_rand_below(r, DIGITS);
    double u = fvm_rand_uniform(r); /* digits 49%, uppercase 26%, lowercase 25% */
    if (u < 0.49)
        return (int)fvm_rand_below(r, DIGITS);
    return u < 0.75 ? DIGITS + (int)fvm_rand_below(r, 26) : DIGITS + 26 + (int)fvm_rand_below(r, 26);
}

/* One glyph into px (SIDE x SIDE, background 1, ink towards 0). */
static void render(const fvm_emnist *e, fvm_rand *r, const style *st, int label, float *px)
{
    double ink[SIDE * SIDE] = {0};
    double dx = 1.3 * fvm_rand_normal(r), dy = 1.3 * fvm_rand_normal(r);
    for (int s = 0; s < e->strokes[label]; s++) {
        double p[3][2];
        for (int q = 0; q < 3; q++) {
            double x = e->glyph[label][s].p[q][0] + 1.1 * fvm_rand_normal(r) - 14.0;
            double y = e->glyph[label][s].p[q][1] + 1.1 * fvm_rand_normal(r) - 14.0;
            p[q][0] = 14.0 + dx + st->scale * (x + st->slant * y);
            p[q][1] = 14.0 + dy + st->scale * y;
        }
        for (int t = 0; t <= SAMPLES; t++) {
            double u = (double)t / SAMPLES, a = (1 - u) * (1 - u), b = 2 * u * (1 - u), c = u * u;
            double cx = a * p[0][0] + b * p[1][0] + c * p[2][0], cy = a * p[0][1] + b * p[1][1] + c * p[2][1];
            int x0 = (int)floor(cx) - 3, y0 = (int)floor(cy) - 3;
            for (int y = y0; y <= y0 + 7; y++)
                for (int x = x0; x <= x0 + 7; x++) {
                    if (x < 0 || y < 0 || x >= SIDE || y >= SIDE)
                        continue;
                    double d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
                    double v = st->ink * exp(-d2 / (2 * st->width * st->width));
                    if (v > ink[y * SIDE + x])
                        ink[y * SIDE + x] = v;
                }
        }
    }
    for (int i = 0; i < SIDE * SIDE; i++)
        px[i] = (float)(1.0 - ink[i]);
}

fvm_status fvm_emnist_client(const fvm_emnist *e, int64_t k, bool test, fvm_tensor *pixels, fvm_tensor *labels,
                             fvm_diag *d)
{
    memset(pixels, 0, sizeof *pixels);
    memset(labels, 0, sizeof *labels);
    if (k < 0 || k >= e->c.clients)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "client %lld out of range [0, %lld)", (long long)k,
                            (long long)e->c.clients);
    int64_t n = fvm_emnist_size(e, k, test);
    fvm_dims ps = {.rank = 3, .d = {n, SIDE, SIDE}}, ls = {.rank = 1, .d = {n}};
    fvm_status st = fvm_tensor_alloc(pixels, FVM_DTYPE_F32, &ps, d);
    if (st == FVM_OK && (st = fvm_tensor_alloc(labels, FVM_DTYPE_I32, &ls, d)))
        fvm_tensor_release(pixels);
    if (st)
        return st;
    uint32_t wkey[2];
    fvm_prng_fold_in(e->key_examples, (uint32_t)k, wkey);
    fvm_rand r;
    fvm_rand_init_fold(&r, wkey, 0); /* the writer's style, the same in both splits */
    style sty = {.width = 0.7 + 0.6 * fvm_rand_uniform(&r),
                 .slant = 0.2 * fvm_rand_normal(&r),
                 .scale = 0.85 + 0.25 * fvm_rand_uniform(&r),
                 .ink = 0.75 + 0.25 * fvm_rand_uniform(&r)};
    fvm_rand_init_fold(&r, wkey, test ? 2 : 1);
    float *px = fvm_tensor_data(pixels);
    int32_t *lp = fvm_tensor_data(labels);
    for (int64_t i = 0; i < n; i++) {
        lp[i] = draw_label(&r, e->c.only_digits);
        render(e, &r, &sty, lp[i], px + i * SIDE * SIDE);
    }
    return FVM_OK;
}
