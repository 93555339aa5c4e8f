/* synthetic.c - FedProx's Synthetic(alpha, beta) and LEAF's synthetic generator, one client at a time. */
#include "synthetic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/prng.h"
#include "../core/rand.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Stream numbers folded into the seed's key. */
enum { STREAM_SHARED = 0, STREAM_SIZES = 1, STREAM_CLIENTS = 2 };

struct fvm_synth {
    fvm_synth_config c;
    uint32_t key_sizes[2], key_clients[2];
    double *sd; /* dim: standard deviations sqrt(j^-1.2) */
    double *w, *b; /* FedProx iid: W (dim x classes), b (classes) */
    double *q; /* LEAF: Q, (dim+1) x classes x clusters */
    double *means; /* LEAF: clusters x clusters */
};

void fvm_synth_defaults(fvm_synth_kind kind, fvm_synth_config *c)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->clients = 30;
    c->dim = 60;
    c->classes = 10;
    c->alpha = 1.0;
    c->beta = 1.0;
    c->clusters = 1;
    c->min_examples = kind == FVM_SYNTH_LEAF ? 5 : 50;
    c->max_examples = kind == FVM_SYNTH_LEAF ? 1000 : 0;
}

void fvm_synth_free(fvm_synth *s)
{
    if (!s)
        return;
    free(s->sd);
    free(s->w);
    free(s->b);
    free(s->q);
    free(s->means);
    free(s);
}

static double *normals(fvm_rand *r, size_t n, double mean, double sd)
{
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (v)
        for (size_t i = 0; i < n; i++)
            v[i] = mean + sd * fvm_rand_normal(r);
    return v;
}

fvm_status fvm_synth_new(const fvm_synth_config *c, fvm_synth **out, fvm_diag *d)
{
    *out = NULL;
    const char *bad = NULL;
    if (c->clients < 1 || c->clients > FVM_MAX_CLIENTS)
        bad = "the number of clients must be in [1, 100000000]";
    else if (c->dim < 1 || c->dim > 1000000)
        bad = "the dimension must be in [1, 1000000]";
    else if (c->classes < 2 || c->classes > 1000000)
        bad = "the number of classes must be in [2, 1000000]";
    else if (c->clusters < 1 || c->clusters > 1000)
        bad = "the number of clusters must be in [1, 1000]";
    else if (!(c->alpha >= 0) || !(c->beta >= 0) || !isfinite(c->alpha) || !isfinite(c->beta))
        bad = "alpha and beta must be finite and >= 0";
    else if (c->min_examples < 1)
        bad = "the minimum number of examples must be >= 1";
    else if (c->max_examples != 0 && c->max_examples < c->min_examples)
        bad = "the maximum number of examples must be 0 (none) or at least the minimum";
    if (bad)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "synthetic data: %s", bad);
    fvm_synth *s = calloc(1, sizeof *s);
    if (!s)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    s->c = *c;
    uint32_t key[2];
    fvm_prng_key(c->seed, key);
    fvm_prng_fold_in(key, STREAM_SIZES, s->key_sizes);
    fvm_prng_fold_in(key, STREAM_CLIENTS, s->key_clients);
    size_t dim = (size_t)c->dim, classes = (size_t)c->classes, k = (size_t)c->clusters;
    s->sd = malloc(dim * sizeof *s->sd);
    if (!s->sd)
        goto nomem;
    for (size_t j = 0; j < dim; j++)
        s->sd[j] = sqrt(pow((double)(j + 1), -1.2));
    fvm_rand r;
    fvm_rand_init_fold(&r, key, STREAM_SHARED);
    if (c->kind == FVM_SYNTH_FEDPROX && c->iid) {
        if (!(s->w = normals(&r, dim * classes, 0.0, 1.0)) || !(s->b = normals(&r, classes, 0.0, 1.0)))
            goto nomem;
    } else if (c->kind == FVM_SYNTH_LEAF) {
        if (!(s->q = normals(&r, (dim + 1) * classes * k, 0.0, 1.0)) || !(s->means = malloc(k * k * sizeof *s->means)))
            goto nomem;
        for (size_t m = 0; m < k; m++) {
            double loc = fvm_rand_normal(&r);
            for (size_t i = 0; i < k; i++)
                s->means[m * k + i] = loc + fvm_rand_normal(&r);
        }
    }
    *out = s;
    return FVM_OK;
nomem:
    fvm_synth_free(s);
    return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
}

int64_t fvm_synth_size(const fvm_synth *s, int64_t k)
{
    fvm_rand r;
    fvm_rand_init_fold(&r, s->key_sizes, (uint32_t)k);
    double mu = s->c.kind == FVM_SYNTH_LEAF ? 3.0 : 4.0;
    double v = floor(exp(mu + 2.0 * fvm_rand_normal(&r)));
    int64_t n = (v > 1e15 ? (int64_t)1e15 : (int64_t)v) + s->c.min_examples;
    if (s->c.max_examples && n > s->c.max_examples)
        n = s->c.max_examples;
    return n;
}

/* x[i] = mean[j] + sd[j] * z rounded to f32, for n rows. */
static void features(fvm_rand *r, const fvm_synth *s, const double *mean, int64_t n, float *x)
{
    int64_t dim = s->c.dim;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < dim; j++)
            x[i * dim + j] = (float)((mean ? mean[j] : 0.0) + s->sd[j] * fvm_rand_normal(r));
}

/* y = argmax_c (x W + b)_c (first maximum); W is dim x classes. */
static void linear_labels(const fvm_synth *s, const double *w, const double *b, const float *x, int64_t n, int32_t *y,
                          double *z)
{
    int64_t dim = s->c.dim, classes = s->c.classes;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t c = 0; c < classes; c++)
            z[c] = b[c];
        for (int64_t j = 0; j < dim; j++) {
            double xj = x[i * dim + j];
            for (int64_t c = 0; c < classes; c++)
                z[c] += xj * w[j * classes + c];
        }
        int32_t best = 0;
        for (int64_t c = 1; c < classes; c++)
            if (z[c] > z[best])
                best = (int32_t)c;
        y[i] = best;
    }
}

static fvm_status fedprox_client(const fvm_synth *s, fvm_rand *r, int64_t n, float *x, int32_t *y, fvm_diag *d)
{
    size_t dim = (size_t)s->c.dim, classes = (size_t)s->c.classes;
    double *z = malloc(classes * sizeof *z);
    double *v = NULL, *w = NULL, *b = NULL;
    fvm_status st = FVM_OK;
    if (!z)
        goto nomem;
    if (s->c.iid) {
        features(r, s, NULL, n, x);
        linear_labels(s, s->w, s->b, x, n, y, z);
    } else {
        double u = s->c.alpha * fvm_rand_normal(r);
        double bk = s->c.beta * fvm_rand_normal(r);
        if (!(v = normals(r, dim, bk, 1.0)) || !(w = normals(r, dim * classes, u, 1.0)) ||
            !(b = normals(r, classes, u, 1.0)))
            goto nomem;
        features(r, s, v, n, x);
        linear_labels(s, w, b, x, n, y, z);
    }
    goto done;
nomem:
    st = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
done:
    free(z);
    free(v);
    free(w);
    free(b);
    return st;
}

static fvm_status leaf_client(const fvm_synth *s, fvm_rand *r, int64_t n, float *x, int32_t *y, fvm_diag *d)
{
    size_t dim = (size_t)s->c.dim, classes = (size_t)s->c.classes, k = (size_t)s->c.clusters;
    size_t cluster = (size_t)fvm_rand_below(r, k);
    double bias = fvm_rand_normal(r);
    double *loc = normals(r, dim, bias, 1.0);
    double *info = malloc(k * sizeof *info), *w = calloc((dim + 1) * classes, sizeof *w);
    double *z = malloc((size_t)(n ? n : 1) * classes * sizeof *z), *lse = malloc(classes * sizeof *lse);
    fvm_status st = FVM_OK;
    if (!loc || !info || !w || !z || !lse) {
        st = fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
        goto done;
    }
    features(r, s, loc, n, x);
    for (size_t i = 0; i < k; i++)
        info[i] = s->means[cluster * k + i] + 0.1 * fvm_rand_normal(r);
    for (size_t j = 0; j <= dim; j++)
        for (size_t c = 0; c < classes; c++)
            for (size_t i = 0; i < k; i++)
                w[j * classes + c] += s->q[(j * classes + c) * k + i] * info[i];
    /* Logits of [1, x] w plus noise. */
    for (int64_t i = 0; i < n; i++) {
        double *zi = z + (size_t)i * classes;
        for (size_t c = 0; c < classes; c++)
            zi[c] = w[c];
        for (size_t j = 0; j < dim; j++) {
            double xj = x[(size_t)i * dim + j];
            for (size_t c = 0; c < classes; c++)
                zi[c] += xj * w[(j + 1) * classes + c];
        }
        for (size_t c = 0; c < classes; c++)
            zi[c] += 0.1 * fvm_rand_normal(r);
    }
    /* Per class, log of the sum over examples of exp(z) (LEAF's normalisation). */
    for (size_t c = 0; c < classes; c++) {
        double top = -INFINITY, sum = 0.0;
        for (int64_t i = 0; i < n; i++)
            top = fmax(top, z[(size_t)i * classes + c]);
        for (int64_t i = 0; i < n; i++)
            sum += exp(z[(size_t)i * classes + c] - top);
        lse[c] = top + log(sum);
    }
    for (int64_t i = 0; i < n; i++) {
        const double *zi = z + (size_t)i * classes;
        int32_t best = 0;
        for (size_t c = 1; c < classes; c++)
            if (zi[c] - lse[c] > zi[best] - lse[best])
                best = (int32_t)c;
        y[i] = best;
    }
done:
    free(loc);
    free(info);
    free(w);
    free(z);
    free(lse);
    return st;
}

int64_t fvm_synth_domain(const fvm_synth *s, int64_t k)
{
    if (s->c.kind != FVM_SYNTH_LEAF || s->c.clusters < 2)
        return -1;
    fvm_rand r; /* leaf_client's first draw */
    fvm_rand_init_fold(&r, s->key_clients, (uint32_t)k);
    return (int64_t)fvm_rand_below(&r, (uint64_t)s->c.clusters);
}

fvm_status fvm_synth_client(const fvm_synth *s, int64_t k, fvm_tensor *x, fvm_tensor *y, fvm_diag *d)
{
    memset(x, 0, sizeof *x);
    memset(y, 0, sizeof *y);
    if (k < 0 || k >= s->c.clients)
        return fvm_diag_add(d, FVM_ERR_USAGE, NULL, "client %lld out of range [0, %lld)", (long long)k,
                            (long long)s->c.clients);
    int64_t n = fvm_synth_size(s, k);
    fvm_dims xs = {.rank = 2, .d = {n, s->c.dim}}, ys = {.rank = 1, .d = {n}};
    fvm_status st = fvm_tensor_alloc(x, FVM_DTYPE_F32, &xs, d);
    if (st == FVM_OK)
        st = fvm_tensor_alloc(y, FVM_DTYPE_I32, &ys, d);
    if (st) {
        fvm_tensor_release(x);
        return st;
    }
    fvm_rand r;
    fvm_rand_init_fold(&r, s->key_clients, (uint32_t)k);
    float *xp = fvm_tensor_data(x);
    int32_t *yp = fvm_tensor_data(y);
    st = s->c.kind == FVM_SYNTH_LEAF ? leaf_client(s, &r, n, xp, yp, d) : fedprox_client(s, &r, n, xp, yp, d);
    if (st) {
        fvm_tensor_release(x);
        fvm_tensor_release(y);
    }
    return st;
}
