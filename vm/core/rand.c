/* rand.c - random variates over a Threefry word stream: uniforms, normals, gamma, Dirichlet, permutations. */
#include "rand.h"

#include <math.h>

#include "prng.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

void fvm_rand_init(fvm_rand *r, const uint32_t key[2])
{
    r->key[0] = key[0];
    r->key[1] = key[1];
    r->block = 0;
    r->left = 0;
}

void fvm_rand_init_fold(fvm_rand *r, const uint32_t key[2], uint32_t data)
{
    uint32_t k[2];
    fvm_prng_fold_in(key, data, k);
    fvm_rand_init(r, k);
}

uint32_t fvm_rand_u32(fvm_rand *r)
{
    if (r->left == 0) {
        const uint32_t ctr[2] = {(uint32_t)r->block, (uint32_t)(r->block >> 32)};
        fvm_threefry2x32(r->key, ctr, r->w);
        r->block++;
        r->left = 2;
    }
    return r->w[2 - r->left--];
}

static uint64_t u64(fvm_rand *r)
{
    uint64_t hi = fvm_rand_u32(r);
    return hi << 32 | fvm_rand_u32(r);
}

double fvm_rand_uniform(fvm_rand *r)
{
    return (double)(u64(r) >> 11) * 0x1p-53;
}

int fvm_rand_cdf(fvm_rand *r, const double *cdf, int n)
{
    double u = fvm_rand_uniform(r) * cdf[n - 1];
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cdf[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

uint64_t fvm_rand_below(fvm_rand *r, uint64_t n)
{
    /* Accept x below the largest multiple of n that fits in 2^64. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = u64(r);
    while (x >= limit);
    return x % n;
}

double fvm_rand_normal(fvm_rand *r)
{
    const double lo = -(1.0 - 0x1p-53);
    double v = 2.0 * fvm_rand_uniform(r) + lo;
    return 1.4142135623730951 * fvm_prng_erfinv_f64(v);
}

double fvm_rand_log_gamma(fvm_rand *r, double shape)
{
    if (shape < 1.0) {
        /* Gamma(a) = Gamma(a + 1) * U^(1/a); U in (0, 1]. */
        double u = 1.0 - fvm_rand_uniform(r);
        return fvm_rand_log_gamma(r, shape + 1.0) + log(u) / shape;
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = fvm_rand_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = 1.0 - fvm_rand_uniform(r); /* (0, 1] */
        if (u < 1.0 - 0.0331 * (x * x) * (x * x))
            return log(d) + log(v);
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return log(d) + log(v);
    }
}

void fvm_rand_dirichlet(fvm_rand *r, double alpha, size_t n, double *out)
{
    double top = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        out[i] = fvm_rand_log_gamma(r, alpha);
        if (out[i] > top)
            top = out[i];
    }
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        out[i] = exp(out[i] - top);
        sum += out[i];
    }
    for (size_t i = 0; i < n; i++)
        out[i] /= sum;
}

void fvm_rand_permutation(fvm_rand *r, int64_t n, int64_t *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)fvm_rand_below(r, (uint64_t)i + 1);
        int64_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}
