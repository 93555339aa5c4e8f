/* prng.c - Threefry-2x32 keys, bits, uniforms and normals in JAX's classic layout. */
#include "prng.h"

#include <math.h>
#include <string.h>

/* No fused multiply-add: every product and sum below is rounded on its own, so
 * results do not depend on the target's FMA. (GCC: -std=c11 already implies
 * -ffp-contract=off.) */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- the hash ------------------------------------------------------------ */

static uint32_t rotl32(uint32_t x, unsigned r)
{
    return (x << r) | (x >> (32 - r));
}

void fvm_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2])
{
    static const unsigned rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
    const uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
    uint32_t x0 = ctr[0] + ks[0];
    uint32_t x1 = ctr[1] + ks[1];

    for (unsigned r = 0; r < 20; r++) {
        x0 += x1;
        x1 = rotl32(x1, rot[r % 8]);
        x1 ^= x0;
        if (r % 4 == 3) { /* key injection s after every four rounds */
            unsigned s = r / 4 + 1;
            x0 += ks[s % 3];
            x1 += ks[(s + 1) % 3] + (uint32_t)s;
        }
    }
    out[0] = x0;
    out[1] = x1;
}

/* Hash call i of threefry_2x32 over counters 0..m-1 with h = ceil(m/2):
 * counter pair (i, h+i), the second read as 0 when h+i == m (odd m). */
static void block(const uint32_t key[2], size_t m, size_t h, size_t i, uint32_t w[2])
{
    const uint32_t ctr[2] = {(uint32_t)i, h + i < m ? (uint32_t)(h + i) : 0u};
    fvm_threefry2x32(key, ctr, w);
}

/* ---- keys and bits ------------------------------------------------------- */

void fvm_prng_key(uint64_t seed, uint32_t out[2])
{
    out[0] = (uint32_t)(seed >> 32);
    out[1] = (uint32_t)(seed & 0xffffffffu);
}

void fvm_prng_bits(const uint32_t key[2], size_t m, uint32_t *out)
{
    const uint32_t k[2] = {key[0], key[1]}; /* out may overlap key */
    size_t h = m / 2 + m % 2;

    for (size_t i = 0; i < h; i++) {
        uint32_t w[2];
        block(k, m, h, i, w);
        out[i] = w[0];
        if (h + i < m)
            out[h + i] = w[1];
    }
}

void fvm_prng_split(const uint32_t key[2], size_t n, uint32_t *out)
{
    fvm_prng_bits(key, 2 * n, out);
}

void fvm_prng_fold_in(const uint32_t key[2], uint32_t data, uint32_t out[2])
{
    const uint32_t ctr[2] = {0, data};
    fvm_threefry2x32(key, ctr, out);
}

/* ---- uniforms ------------------------------------------------------------ */

/* 23 random mantissa bits under the exponent of 1.0, minus 1: [0, 1 - 2^-23]. */
static float unit_f32(uint32_t w)
{
    uint32_t b = (w >> 9) | 0x3f800000u;
    float f;
    memcpy(&f, &b, sizeof f);
    return f - 1.0f;
}

/* 52 random mantissa bits under the exponent of 1.0, minus 1: [0, 1 - 2^-52]. */
static double unit_f64(uint32_t hi, uint32_t lo)
{
    uint64_t u = (uint64_t)hi << 32 | lo;
    uint64_t b = (u >> 12) | UINT64_C(0x3ff0000000000000);
    double d;
    memcpy(&d, &b, sizeof d);
    return d - 1.0;
}

/* The two words of f64 value i of n: hash call i of threefry_2x32 over 2n
 * counters, i.e. counter pair (i, n+i). */
static void block_f64(const uint32_t key[2], size_t n, size_t i, uint32_t w[2])
{
    const uint32_t ctr[2] = {(uint32_t)i, (uint32_t)(n + i)};
    fvm_threefry2x32(key, ctr, w);
}

void fvm_prng_uniform_f32(const uint32_t key[2], size_t n, float *out)
{
    const uint32_t k[2] = {key[0], key[1]};
    size_t h = n / 2 + n % 2;
    for (size_t i = 0; i < h; i++) {
        uint32_t w[2];
        block(k, n, h, i, w);
        out[i] = unit_f32(w[0]);
        if (h + i < n)
            out[h + i] = unit_f32(w[1]);
    }
}

void fvm_prng_uniform_f64(const uint32_t key[2], size_t n, double *out)
{
    const uint32_t k[2] = {key[0], key[1]};
    for (size_t i = 0; i < n; i++) {
        uint32_t w[2];
        block_f64(k, n, i, w);
        out[i] = unit_f64(w[0], w[1]);
    }
}

/* ---- erfinv (M. Giles, 2010) --------------------------------------------- */

float fvm_prng_erfinv_f32(float x)
{
    if (fabsf(x) == 1.0f)
        return copysignf(INFINITY, x);
    float w = -logf((1.0f - x) * (1.0f + x));
    float p;
    if (w < 5.0f) {
        w = w - 2.5f;
        p = 2.81022636e-08f;
        p = 3.43273939e-07f + p * w;
        p = -3.5233877e-06f + p * w;
        p = -4.39150654e-06f + p * w;
        p = 0.00021858087f + p * w;
        p = -0.00125372503f + p * w;
        p = -0.00417768164f + p * w;
        p = 0.246640727f + p * w;
        p = 1.50140941f + p * w;
    } else {
        w = sqrtf(w) - 3.0f;
        p = -0.000200214257f;
        p = 0.000100950558f + p * w;
        p = 0.00134934322f + p * w;
        p = -0.00367342844f + p * w;
        p = 0.00573950773f + p * w;
        p = -0.0076224613f + p * w;
        p = 0.00943887047f + p * w;
        p = 1.00167406f + p * w;
        p = 2.83297682f + p * w;
    }
    return p * x;
}

double fvm_prng_erfinv_f64(double x)
{
    if (fabs(x) == 1.0)
        return copysign(INFINITY, x);
    double w = -log((1.0 - x) * (1.0 + x));
    double p;
    if (w < 6.25) {
        w = w - 3.125;
        p = -3.6444120640178196996e-21;
        p = -1.685059138182016589e-19 + p * w;
        p = 1.2858480715256400167e-18 + p * w;
        p = 1.115787767802518096e-17 + p * w;
        p = -1.333171662854620906e-16 + p * w;
        p = 2.0972767875968561637e-17 + p * w;
        p = 6.6376381343583238325e-15 + p * w;
        p = -4.0545662729752068639e-14 + p * w;
        p = -8.1519341976054721522e-14 + p * w;
        p = 2.6335093153082322977e-12 + p * w;
        p = -1.2975133253453532498e-11 + p * w;
        p = -5.4154120542946279317e-11 + p * w;
        p = 1.051212273321532285e-09 + p * w;
        p = -4.1126339803469836976e-09 + p * w;
        p = -2.9070369957882005086e-08 + p * w;
        p = 4.2347877827932403518e-07 + p * w;
        p = -1.3654692000834678645e-06 + p * w;
        p = -1.3882523362786468719e-05 + p * w;
        p = 0.0001867342080340571352 + p * w;
        p = -0.00074070253416626697512 + p * w;
        p = -0.0060336708714301490533 + p * w;
        p = 0.24015818242558961693 + p * w;
        p = 1.6536545626831027356 + p * w;
    } else if (w < 16.0) {
        w = sqrt(w) - 3.25;
        p = 2.2137376921775787049e-09;
        p = 9.0756561938885390979e-08 + p * w;
        p = -2.7517406297064545428e-07 + p * w;
        p = 1.8239629214389227755e-08 + p * w;
        p = 1.5027403968909827627e-06 + p * w;
        p = -4.013867526981545969e-06 + p * w;
        p = 2.9234449089955446044e-06 + p * w;
        p = 1.2475304481671778723e-05 + p * w;
        p = -4.7318229009055733981e-05 + p * w;
        p = 6.8284851459573175448e-05 + p * w;
        p = 2.4031110387097893999e-05 + p * w;
        p = -0.0003550375203628474796 + p * w;
        p = 0.00095328937973738049703 + p * w;
        p = -0.0016882755560235047313 + p * w;
        p = 0.0024914420961078508066 + p * w;
        p = -0.0037512085075692412107 + p * w;
        p = 0.005370914553590063617 + p * w;
        p = 1.0052589676941592334 + p * w;
        p = 3.0838856104922207635 + p * w;
    } else {
        w = sqrt(w) - 5.0;
        p = -2.7109920616438573243e-11;
        p = -2.5556418169965252055e-10 + p * w;
        p = 1.5076572693500548083e-09 + p * w;
        p = -3.7894654401267369937e-09 + p * w;
        p = 7.6157012080783393804e-09 + p * w;
        p = -1.4960026627149240478e-08 + p * w;
        p = 2.9147953450901080826e-08 + p * w;
        p = -6.7711997758452339498e-08 + p * w;
        p = 2.2900482228026654717e-07 + p * w;
        p = -9.9298272942317002539e-07 + p * w;
        p = 4.5260625972231537039e-06 + p * w;
        p = -1.9681778105531670567e-05 + p * w;
        p = 7.5995277030017761139e-05 + p * w;
        p = -0.00021503011930044477347 + p * w;
        p = -0.00013871931833623122026 + p * w;
        p = 1.0103004648645343977 + p * w;
        p = 4.8499064014085844221 + p * w;
    }
    return p * x;
}

/* ---- normals ------------------------------------------------------------- */

/* nextafter(-1, 0) in each precision; JAX's uniform(lo, 1) is u * (1 - lo) + lo
 * and 1 - lo rounds to exactly 2, so v = 2u + lo with a single rounding. */
#define LO_F32 (-0x1.fffffep-1f)
#define LO_F64 (-0x1.fffffffffffffp-1)
#define SQRT2_F32 1.41421356237309504880f
#define SQRT2_F64 1.41421356237309504880

static float normal_f32(uint32_t w)
{
    float v = 2.0f * unit_f32(w) + LO_F32;
    return SQRT2_F32 * fvm_prng_erfinv_f32(v);
}

void fvm_prng_normal_f32(const uint32_t key[2], size_t n, float *out)
{
    const uint32_t k[2] = {key[0], key[1]};
    size_t h = n / 2 + n % 2;
    for (size_t i = 0; i < h; i++) {
        uint32_t w[2];
        block(k, n, h, i, w);
        out[i] = normal_f32(w[0]);
        if (h + i < n)
            out[h + i] = normal_f32(w[1]);
    }
}

void fvm_prng_normal_f64(const uint32_t key[2], size_t n, double *out)
{
    const uint32_t k[2] = {key[0], key[1]};
    for (size_t i = 0; i < n; i++) {
        uint32_t w[2];
        block_f64(k, n, i, w);
        double v = 2.0 * unit_f64(w[0], w[1]) + LO_F64;
        out[i] = SQRT2_F64 * fvm_prng_erfinv_f64(v);
    }
}
