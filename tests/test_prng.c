/* test_prng.c - Threefry known answers, JAX golden values, layout, statistics and erfinv accuracy. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/core/prng.h"

enum { NSTAT = 100000 };

static float stat_f32[NSTAT];
static double stat_f64[NSTAT];

/* |got - want| <= atol + rtol * |want| (numpy's allclose rule), else fail. */
static void check_close(double got, double want, double atol, double rtol, const char *what, size_t i)
{
    if (!(fabs(got - want) <= atol + rtol * fabs(want)))
        fail_msg("%s[%zu]: got %.17g, want %.17g", what, i, got, want);
}

static void check_words(const uint32_t *got, const uint32_t *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s[%zu]: got 0x%08x, want 0x%08x", what, i, (unsigned)got[i], (unsigned)want[i]);
}

/* The header's f32 uniform formula, written out independently. */
static float ref_unit_f32(uint32_t w)
{
    uint32_t b = (w >> 9) | 0x3f800000u;
    float f;
    memcpy(&f, &b, sizeof f);
    return f - 1.0f;
}

/* The header's f64 uniform formula from a 64-bit word. */
static double ref_unit_f64(uint64_t u)
{
    uint64_t b = (u >> 12) | UINT64_C(0x3ff0000000000000);
    double d;
    memcpy(&d, &b, sizeof d);
    return d - 1.0;
}

/* ---- the hash: Random123 known-answer vectors ---------------------------- */

/* Random123's kat_vectors lines read "threefry2x32 20 ctr0 ctr1 key0 key1 out0 out1". */
static void test_threefry_kat(void **state)
{
    static const uint32_t kat[3][6] = {
        /* ctr0       ctr1        key0        key1        out0        out1 */
        {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x6b200159, 0x99ba4efe},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xc4923a9c, 0x483df7a0},
    };
    for (size_t i = 0; i < 3; i++) {
        uint32_t ctr[2] = {kat[i][0], kat[i][1]};
        uint32_t key[2] = {kat[i][2], kat[i][3]};
        uint32_t out[2];
        fvm_threefry2x32(key, ctr, out);
        check_words(out, &kat[i][4], 2, "threefry2x32 kat");
        /* out may alias the counter or the key */
        fvm_threefry2x32(key, ctr, ctr);
        check_words(ctr, &kat[i][4], 2, "threefry2x32 out=ctr");
        uint32_t ctr2[2] = {kat[i][0], kat[i][1]};
        fvm_threefry2x32(key, ctr2, key);
        check_words(key, &kat[i][4], 2, "threefry2x32 out=key");
    }
}

/* ---- JAX golden values ----------------------------------------------------
 * From JAX's own regression tests, tests/random_test.py (classic threefry,
 * jax_threefry_partitionable off): testPRNGValues, testRngRandomBits,
 * test_prng_seeds_and_keys and the threefry2x32 rows of _RANDOM_VALUES_CASES
 * (testRandomDistributionValues), whose seed is the Adler-32 checksum of
 * name + "threefry2x32": "bits" 942802475, "uniform" 1338574713,
 * "normal" 1193674498. Float rows are printed there to 6 decimals and
 * compared with float32 allclose (atol = rtol = 1e-6). */

static void test_jax_key_from_seed(void **state)
{
    uint32_t k[2];
    fvm_prng_key(0, k);
    check_words(k, (const uint32_t[]){0, 0}, 2, "PRNGKey(0)");
    fvm_prng_key(1701, k);
    check_words(k, (const uint32_t[]){0, 1701}, 2, "PRNGKey(1701)");
    fvm_prng_key(2147483747u, k); /* int32 max + 100 */
    check_words(k, (const uint32_t[]){0, 2147483747u}, 2, "PRNGKey(2^31+99)");
    fvm_prng_key((uint64_t)(int64_t)-3, k); /* x64 mode */
    check_words(k, (const uint32_t[]){4294967295u, 4294967293u}, 2, "PRNGKey(-3) x64");
    fvm_prng_key((uint64_t)(int64_t)-1, k);
    check_words(k, (const uint32_t[]){4294967295u, 4294967295u}, 2, "PRNGKey(-1) x64");
    fvm_prng_key((uint32_t)-2, k); /* default 32-bit mode, np.int32(-2) */
    check_words(k, (const uint32_t[]){0, 4294967294u}, 2, "PRNGKey(int32 -2)");
    fvm_prng_key(UINT64_C(0x0123456789abcdef), k);
    check_words(k, (const uint32_t[]){0x01234567u, 0x89abcdefu}, 2, "key high/low");
}

static void test_jax_split_fold_in(void **state)
{
    static const uint32_t want_split[8] = {
        2285895361u, 1501764800u, 1518642379u, 4090693311u, 433833334u, 4221794875u, 839183663u, 3740430601u,
    };
    uint32_t k[2], out[8];
    fvm_prng_key(0, k);
    fvm_prng_split(k, 4, out);
    check_words(out, want_split, 8, "split(PRNGKey(0), 4)");

    uint32_t f[2];
    fvm_prng_fold_in(k, 4, f);
    check_words(f, (const uint32_t[]){2285895361u, 433833334u}, 2, "fold_in(PRNGKey(0), 4)");
}

static void test_jax_random_bits(void **state)
{
    uint32_t k[2], w[10];

    /* testRngRandomBits: PRNGKey(1701), 32 and 64 bits, shape (3,) */
    fvm_prng_key(1701, k);
    fvm_prng_bits(k, 3, w);
    check_words(w, (const uint32_t[]){56197195u, 4200222568u, 961309823u}, 3, "bits32(PRNGKey(1701), 3)");
    static const uint64_t want64_1701[3] = {
        UINT64_C(3982329540505020460),
        UINT64_C(16822122385914693683),
        UINT64_C(7882654074788531506),
    };
    fvm_prng_bits(k, 6, w);
    for (size_t i = 0; i < 3; i++) {
        uint64_t u = (uint64_t)w[i] << 32 | w[3 + i]; /* halves, not neighbours */
        if (u != want64_1701[i])
            fail_msg("bits64(PRNGKey(1701))[%zu]: got %llu", i, (unsigned long long)u);
    }

    /* _RANDOM_VALUES_CASES "bits", uint32 and uint64, shape (5,) */
    fvm_prng_key(942802475, k);
    fvm_prng_bits(k, 5, w);
    check_words(w, (const uint32_t[]){1978747883u, 4134381225u, 3628107870u, 689687174u, 2788938207u}, 5,
                "bits32(seed 942802475, 5)");
    static const uint64_t want64[5] = {
        UINT64_C(17649965731882839947), UINT64_C(1415307058040849897), UINT64_C(8282622628079774249),
        UINT64_C(14024425113645909402), UINT64_C(2012979996110532418),
    };
    fvm_prng_bits(k, 10, w);
    for (size_t i = 0; i < 5; i++) {
        uint64_t u = (uint64_t)w[i] << 32 | w[5 + i];
        if (u != want64[i])
            fail_msg("bits64(seed 942802475)[%zu]: got %llu", i, (unsigned long long)u);
    }
}

/* The f64 uniforms are JAX's 64-bit words through the mantissa construction. */
static void test_jax_uniform_f64(void **state)
{
    static const uint64_t want64[5] = {
        UINT64_C(17649965731882839947), UINT64_C(1415307058040849897), UINT64_C(8282622628079774249),
        UINT64_C(14024425113645909402), UINT64_C(2012979996110532418),
    };
    uint32_t k[2];
    double u[5];
    fvm_prng_key(942802475, k);
    fvm_prng_uniform_f64(k, 5, u);
    for (size_t i = 0; i < 5; i++)
        if (u[i] != ref_unit_f64(want64[i]))
            fail_msg("uniform_f64(seed 942802475)[%zu]: got %.17g, want %.17g", i, u[i], ref_unit_f64(want64[i]));
}

static void test_jax_uniform_f32(void **state)
{
    static const float want[5] = {0.298671f, 0.073213f, 0.873356f, 0.260549f, 0.412797f};
    uint32_t k[2];
    float u[5];
    fvm_prng_key(1338574713, k);
    fvm_prng_uniform_f32(k, 5, u);
    for (size_t i = 0; i < 5; i++)
        check_close(u[i], want[i], 1e-6, 1e-6, "uniform_f32(seed 1338574713)", i);
}

static void test_jax_normal_f32(void **state)
{
    static const float want[5] = {-1.173234f, -1.511662f, 0.070593f, -0.099764f, 1.052845f};
    uint32_t k[2];
    float z[5];
    fvm_prng_key(1193674498, k);
    fvm_prng_normal_f32(k, 5, z);
    for (size_t i = 0; i < 5; i++)
        check_close(z[i], want[i], 1e-6, 1e-6, "normal_f32(seed 1193674498)", i);
}

/* ---- layout as the header defines it ------------------------------------- */

enum { MAXM = 13, GUARD = 4 };
static const uint32_t SENTINEL = 0xdeadbeefu;

/* bits(key, m) against the definition, for every m up to MAXM, with guard words. */
static void test_bits_layout(void **state)
{
    const uint32_t k[2] = {0x13198a2eu, 0x03707344u};
    fvm_prng_bits(k, 0, NULL); /* writes nothing */

    for (size_t m = 0; m <= MAXM; m++) {
        uint32_t out[MAXM + GUARD], want[MAXM];
        for (size_t i = 0; i < MAXM + GUARD; i++)
            out[i] = SENTINEL;
        size_t h = (m + 1) / 2;
        for (size_t i = 0; i < h; i++) {
            uint32_t ctr[2] = {(uint32_t)i, h + i < m ? (uint32_t)(h + i) : 0u}, w[2];
            fvm_threefry2x32(k, ctr, w);
            want[i] = w[0];
            if (h + i < m)
                want[h + i] = w[1];
        }
        fvm_prng_bits(k, m, out);
        check_words(out, want, m, "bits layout");
        for (size_t i = m; i < MAXM + GUARD; i++)
            assert_int_equal(out[i], SENTINEL);
    }

    /* odd m: the pair of the last call is (h-1, 0); its second word is dropped */
    uint32_t w5[5], w6[6], ctr[2] = {2, 0}, last[2];
    fvm_prng_bits(k, 5, w5);
    fvm_prng_bits(k, 6, w6);
    fvm_threefry2x32(k, ctr, last);
    assert_int_equal(w5[2], last[0]);
    assert_int_not_equal(w5[2], w6[2]); /* call 2 is (2, 5) for m = 6 */
    assert_int_equal(w5[0], w6[0]); /* calls 0, 1 coincide: (0,3), (1,4) */
    assert_int_equal(w5[1], w6[1]);
    assert_int_equal(w5[3], w6[3]);
    assert_int_equal(w5[4], w6[4]);
}

static void test_split_fold_in_definition(void **state)
{
    const uint32_t k[2] = {7, 42};
    uint32_t s[2 * 7], b[2 * 7];
    fvm_prng_split(k, 7, s);
    fvm_prng_bits(k, 14, b);
    check_words(s, b, 14, "split = bits(2n)");

    for (uint32_t d = 0; d < 5; d++) {
        uint32_t f[2], w[2], ctr[2] = {0, d};
        fvm_prng_fold_in(k, d, f);
        fvm_threefry2x32(k, ctr, w);
        check_words(f, w, 2, "fold_in = hash(0, d)");
    }

    /* out may be the key itself */
    uint32_t kk[2] = {7, 42};
    fvm_prng_split(kk, 1, kk);
    uint32_t one[2];
    fvm_prng_split(k, 1, one);
    check_words(kk, one, 2, "split(key, 1, key)");
    /* ... or the start of a longer output */
    uint32_t buf[4] = {7, 42, 0, 0}, two[4];
    fvm_prng_split(k, 2, two);
    fvm_prng_split(buf, 2, buf);
    check_words(buf, two, 4, "split(key, 2, key...)");
    uint32_t kf[2] = {7, 42}, f3[2];
    fvm_prng_fold_in(k, 3, f3);
    fvm_prng_fold_in(kf, 3, kf);
    check_words(kf, f3, 2, "fold_in(key, d, key)");
    fvm_prng_split(k, 0, NULL);
}

/* Every element of uniform/normal of any n is the header's formula applied to
 * the matching word(s) of bits. */
static void test_float_layout(void **state)
{
    const uint32_t k[2] = {0xcafef00du, 0x0badc0deu};
    for (size_t n = 0; n <= MAXM; n++) {
        uint32_t w[2 * MAXM];
        float u32[MAXM + GUARD], z32[MAXM + GUARD];
        double u64[MAXM + GUARD], z64[MAXM + GUARD];
        for (size_t i = 0; i < MAXM + GUARD; i++)
            u32[i] = z32[i] = -7.0f, u64[i] = z64[i] = -7.0;

        fvm_prng_uniform_f32(k, n, u32);
        fvm_prng_normal_f32(k, n, z32);
        fvm_prng_bits(k, n, w);
        for (size_t i = 0; i < n; i++) {
            float u = ref_unit_f32(w[i]);
            float v = 2.0f * u + nextafterf(-1.0f, 0.0f);
            float z = 1.41421356237309504880f * fvm_prng_erfinv_f32(v);
            if (u32[i] != u || z32[i] != z)
                fail_msg("f32 n=%zu i=%zu: uniform %.9g vs %.9g, normal %.9g vs %.9g", n, i, u32[i], u, z32[i], z);
        }

        fvm_prng_uniform_f64(k, n, u64);
        fvm_prng_normal_f64(k, n, z64);
        fvm_prng_bits(k, 2 * n, w);
        for (size_t i = 0; i < n; i++) {
            double u = ref_unit_f64((uint64_t)w[i] << 32 | w[n + i]);
            double v = 2.0 * u + nextafter(-1.0, 0.0);
            double z = 1.41421356237309504880 * fvm_prng_erfinv_f64(v);
            if (u64[i] != u || z64[i] != z)
                fail_msg("f64 n=%zu i=%zu: uniform %.17g vs %.17g, normal %.17g vs %.17g", n, i, u64[i], u, z64[i], z);
        }
        for (size_t i = n; i < MAXM + GUARD; i++) {
            assert_true(u32[i] == -7.0f && z32[i] == -7.0f);
            assert_true(u64[i] == -7.0 && z64[i] == -7.0);
        }
    }
    fvm_prng_uniform_f32(k, 0, NULL);
    fvm_prng_uniform_f64(k, 0, NULL);
    fvm_prng_normal_f32(k, 0, NULL);
    fvm_prng_normal_f64(k, 0, NULL);
}

/* The extreme uniforms map into (-1, 1): finite normals at both ends. */
static void test_normal_mapping_ends(void **state)
{
    float lo32 = 2.0f * ref_unit_f32(0) + nextafterf(-1.0f, 0.0f);
    float hi32 = 2.0f * ref_unit_f32(0xffffffffu) + nextafterf(-1.0f, 0.0f);
    assert_true(lo32 > -1.0f && hi32 < 1.0f);
    assert_true(lo32 == nextafterf(-1.0f, 0.0f));
    assert_true(isfinite(fvm_prng_erfinv_f32(lo32)) && isfinite(fvm_prng_erfinv_f32(hi32)));
    assert_true(fvm_prng_erfinv_f32(lo32) < -3.8f && fvm_prng_erfinv_f32(hi32) > 3.5f);

    double lo64 = 2.0 * ref_unit_f64(0) + nextafter(-1.0, 0.0);
    double hi64 = 2.0 * ref_unit_f64(UINT64_MAX) + nextafter(-1.0, 0.0);
    assert_true(lo64 > -1.0 && hi64 < 1.0);
    assert_true(isfinite(fvm_prng_erfinv_f64(lo64)) && isfinite(fvm_prng_erfinv_f64(hi64)));
    assert_true(fvm_prng_erfinv_f64(lo64) < -5.8 && fvm_prng_erfinv_f64(hi64) > 5.7);
}

/* ---- determinism and independence ---------------------------------------- */

static void test_determinism(void **state)
{
    uint32_t k[2], a[1001], b[1001];
    fvm_prng_key(20261122, k);
    fvm_prng_bits(k, 1001, a);
    /* whatever happens in between, the same key gives the same bits */
    fvm_prng_normal_f64(k, NSTAT, stat_f64);
    fvm_prng_split(k, 3, b);
    fvm_prng_bits(k, 1001, b);
    assert_memory_equal(a, b, sizeof a);

    float x[257], y[257];
    fvm_prng_normal_f32(k, 257, x);
    fvm_prng_normal_f32(k, 257, y);
    assert_memory_equal(x, y, sizeof x);

    /* a different key gives different bits */
    uint32_t k2[2] = {k[0], k[1] ^ 1u};
    fvm_prng_bits(k2, 1001, b);
    size_t same = 0;
    for (size_t i = 0; i < 1001; i++)
        same += a[i] == b[i];
    assert_true(same < 2);
}

static unsigned popcount32(uint32_t x)
{
    unsigned c = 0;
    for (; x; x &= x - 1)
        c++;
    return c;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_split_independence(void **state)
{
    uint32_t k[2], ks[4];
    fvm_prng_key(42, k);
    fvm_prng_split(k, 2, ks);
    assert_false(ks[0] == ks[2] && ks[1] == ks[3]);
    assert_false(ks[0] == k[0] && ks[1] == k[1]);
    assert_false(ks[2] == k[0] && ks[3] == k[1]);

    /* streams under the two children (and the parent) agree on half their bits */
    enum { N = 8192 };
    static uint32_t a[N], b[N], p[N];
    fvm_prng_bits(&ks[0], N, a);
    fvm_prng_bits(&ks[2], N, b);
    fvm_prng_bits(k, N, p);
    const uint32_t *pairs[3][2] = {{a, b}, {a, p}, {b, p}};
    for (size_t j = 0; j < 3; j++) {
        uint64_t agree = 0;
        size_t equal_words = 0;
        for (size_t i = 0; i < N; i++) {
            agree += 32 - popcount32(pairs[j][0][i] ^ pairs[j][1][i]);
            equal_words += pairs[j][0][i] == pairs[j][1][i];
        }
        double frac = (double)agree / (32.0 * N);
        check_close(frac, 0.5, 0.01, 0, "split streams bit agreement", j);
        assert_true(equal_words < 2);
    }

    /* many children, and many fold_ins, are all distinct keys */
    enum { M = 2000 };
    static uint32_t many[2 * M];
    static uint64_t packed[2 * M];
    fvm_prng_split(k, M, many);
    for (size_t i = 0; i < M; i++) {
        uint32_t f[2];
        fvm_prng_fold_in(k, (uint32_t)i, f);
        packed[i] = (uint64_t)many[2 * i] << 32 | many[2 * i + 1];
        packed[M + i] = (uint64_t)f[0] << 32 | f[1];
    }
    qsort(packed, 2 * M, sizeof packed[0], cmp_u64);
    for (size_t i = 1; i < 2 * M; i++)
        assert_true(packed[i] != packed[i - 1]);
}

/* ---- statistics ---------------------------------------------------------- */

static void test_uniform_stats(void **state)
{
    uint32_t k[2];
    fvm_prng_key(7, k);

    fvm_prng_uniform_f32(k, NSTAT, stat_f32);
    double s = 0;
    for (size_t i = 0; i < NSTAT; i++) {
        if (!(stat_f32[i] >= 0.0f && stat_f32[i] < 1.0f))
            fail_msg("uniform_f32[%zu] = %.9g outside [0, 1)", i, stat_f32[i]);
        s += stat_f32[i];
    }
    check_close(s / NSTAT, 0.5, 0.01, 0, "uniform_f32 mean", 0);

    fvm_prng_uniform_f64(k, NSTAT, stat_f64);
    s = 0;
    for (size_t i = 0; i < NSTAT; i++) {
        if (!(stat_f64[i] >= 0.0 && stat_f64[i] < 1.0))
            fail_msg("uniform_f64[%zu] = %.17g outside [0, 1)", i, stat_f64[i]);
        s += stat_f64[i];
    }
    check_close(s / NSTAT, 0.5, 0.01, 0, "uniform_f64 mean", 0);

    /* tenths of [0, 1) each get about a tenth (sd ~ 0.001) */
    size_t bins[10] = {0};
    for (size_t i = 0; i < NSTAT; i++)
        bins[(size_t)(stat_f64[i] * 10)]++;
    for (size_t j = 0; j < 10; j++)
        check_close((double)bins[j] / NSTAT, 0.1, 0.006, 0, "uniform_f64 decile", j);
}

static void test_normal_stats(void **state)
{
    uint32_t k[2];
    fvm_prng_key(11, k);

    fvm_prng_normal_f32(k, NSTAT, stat_f32);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < NSTAT; i++) {
        if (!isfinite(stat_f32[i]))
            fail_msg("normal_f32[%zu] not finite", i);
        s += stat_f32[i];
    }
    double mean = s / NSTAT;
    for (size_t i = 0; i < NSTAT; i++)
        s2 += (stat_f32[i] - mean) * (stat_f32[i] - mean);
    check_close(mean, 0.0, 0.02, 0, "normal_f32 mean", 0);
    check_close(s2 / (NSTAT - 1), 1.0, 0.03, 0, "normal_f32 variance", 0);

    fvm_prng_normal_f64(k, NSTAT, stat_f64);
    s = s2 = 0;
    size_t within1 = 0;
    for (size_t i = 0; i < NSTAT; i++) {
        if (!isfinite(stat_f64[i]))
            fail_msg("normal_f64[%zu] not finite", i);
        s += stat_f64[i];
        within1 += fabs(stat_f64[i]) < 1.0;
    }
    mean = s / NSTAT;
    for (size_t i = 0; i < NSTAT; i++)
        s2 += (stat_f64[i] - mean) * (stat_f64[i] - mean);
    check_close(mean, 0.0, 0.02, 0, "normal_f64 mean", 0);
    check_close(s2 / (NSTAT - 1), 1.0, 0.03, 0, "normal_f64 variance", 0);
    /* P(|Z| < 1) = 0.682689..., sd of the fraction ~ 0.0015 */
    check_close((double)within1 / NSTAT, 0.6826894921370859, 0.01, 0, "normal_f64 |z|<1", 0);
}

/* ---- erfinv -------------------------------------------------------------- */

static void test_erfinv_known(void **state)
{
    static const double known[][2] = {
        {0.5, 0.4769362762044699},
        {0.9, 1.1630871536766743},
        {-0.999, -2.326753765513525},
    };
    for (size_t i = 0; i < 3; i++) {
        check_close(fvm_prng_erfinv_f64(known[i][0]), known[i][1], 0, 1e-15, "erfinv_f64", i);
        check_close(fvm_prng_erfinv_f32((float)known[i][0]), known[i][1], 0, 4e-6, "erfinv_f32", i);
        /* against the f64 version at the very same float input */
        float x = (float)known[i][0];
        check_close(fvm_prng_erfinv_f32(x), fvm_prng_erfinv_f64(x), 0, 5e-7, "erfinv_f32 vs f64", i);
    }

    assert_true(fvm_prng_erfinv_f64(0.0) == 0.0 && fvm_prng_erfinv_f32(0.0f) == 0.0f);
    assert_true(isinf(fvm_prng_erfinv_f64(1.0)) && fvm_prng_erfinv_f64(1.0) > 0);
    assert_true(isinf(fvm_prng_erfinv_f64(-1.0)) && fvm_prng_erfinv_f64(-1.0) < 0);
    assert_true(isinf(fvm_prng_erfinv_f32(1.0f)) && fvm_prng_erfinv_f32(1.0f) > 0);
    assert_true(isinf(fvm_prng_erfinv_f32(-1.0f)) && fvm_prng_erfinv_f32(-1.0f) < 0);
    assert_true(isnan(fvm_prng_erfinv_f64(1.5)) && isnan(fvm_prng_erfinv_f32(-1.5f)));
    assert_true(isnan(fvm_prng_erfinv_f64(NAN)) && isnan(fvm_prng_erfinv_f32(NAN)));
}

/* erf(erfinv(x)) = x across all three f64 branches, and exact odd symmetry. */
static void test_erfinv_roundtrip(void **state)
{
    for (int i = -999; i <= 999; i++) {
        double x = i / 1000.0;
        double y = fvm_prng_erfinv_f64(x);
        check_close(erf(y), x, 4e-16, 2e-15, "erf(erfinv_f64(x))", (size_t)(i + 999));
        assert_true(fvm_prng_erfinv_f64(-x) == -y);
        float xf = (float)x;
        float yf = fvm_prng_erfinv_f32(xf);
        assert_true(fvm_prng_erfinv_f32(-xf) == -yf);
        check_close(yf, fvm_prng_erfinv_f64(xf), 1e-12, 1e-6, "erfinv_f32 vs f64", (size_t)(i + 999));
    }
    /* the tails: w >= 6.25 and w >= 16 (1 - x = 1e-3 .. 1e-12) */
    for (int e = 3; e <= 12; e++) {
        double t = pow(10.0, -e);
        double x = 1.0 - t;
        double y = fvm_prng_erfinv_f64(x);
        check_close(erfc(y), 1.0 - x, 0, 5e-14, "erfc(erfinv_f64(1 - t))", (size_t)e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threefry_kat),
        cmocka_unit_test(test_jax_key_from_seed),
        cmocka_unit_test(test_jax_split_fold_in),
        cmocka_unit_test(test_jax_random_bits),
        cmocka_unit_test(test_jax_uniform_f64),
        cmocka_unit_test(test_jax_uniform_f32),
        cmocka_unit_test(test_jax_normal_f32),
        cmocka_unit_test(test_bits_layout),
        cmocka_unit_test(test_split_fold_in_definition),
        cmocka_unit_test(test_float_layout),
        cmocka_unit_test(test_normal_mapping_ends),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_split_independence),
        cmocka_unit_test(test_uniform_stats),
        cmocka_unit_test(test_normal_stats),
        cmocka_unit_test(test_erfinv_known),
        cmocka_unit_test(test_erfinv_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
