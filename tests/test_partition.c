/* test_partition.c - random variates (rand.h), dataset partitions (partition.h) and synthetic generators (synthetic.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../vm/runtime/partition.h"
#include "../vm/core/prng.h"
#include "../vm/core/rand.h"
#include "../vm/runtime/synthetic.h"

static void check_near(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s: got %.6g, want %.6g +- %.3g", what, got, want, tol);
}

/* ---- rand.h ----------------------------------------------------------------------------- */

static void test_stream_layout(void **state)
{
    (void)state;
    /* block i hashes the counter (i mod 2^32, i div 2^32); words in order */
    uint32_t key[2] = {7, 42}, w[2];
    fvm_rand r;
    fvm_rand_init(&r, key);
    for (uint32_t i = 0; i < 3; i++) {
        const uint32_t ctr[2] = {i, 0};
        fvm_threefry2x32(key, ctr, w);
        assert_int_equal(fvm_rand_u32(&r), w[0]);
        assert_int_equal(fvm_rand_u32(&r), w[1]);
    }
    /* fold: the stream of fvm_prng_fold_in(key, 5) */
    uint32_t k5[2];
    fvm_prng_fold_in(key, 5, k5);
    fvm_rand a, b;
    fvm_rand_init_fold(&a, key, 5);
    fvm_rand_init(&b, k5);
    for (int i = 0; i < 10; i++)
        assert_int_equal(fvm_rand_u32(&a), fvm_rand_u32(&b));
    /* uniform: the top 53 bits of two words */
    fvm_rand_init(&r, key);
    const uint32_t c0[2] = {0, 0};
    fvm_threefry2x32(key, c0, w);
    double u = (double)((((uint64_t)w[0] << 32) | w[1]) >> 11) / 9007199254740992.0;
    assert_true(fvm_rand_uniform(&r) == u);
}

static void test_distributions(void **state)
{
    (void)state;
    uint32_t key[2];
    fvm_prng_key(1234, key);
    fvm_rand r;
    fvm_rand_init(&r, key);
    enum { N = 200000 };
    /* normal: mean 0, variance 1, within 5 standard errors */
    double s = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
        double x = fvm_rand_normal(&r);
        assert_true(isfinite(x));
        s += x;
        s2 += x * x;
    }
    check_near(s / N, 0.0, 5 / sqrt(N), "normal mean");
    check_near(s2 / N, 1.0, 5 * sqrt(2.0 / N), "normal variance");
    /* gamma(k): mean k, variance k */
    const double shapes[] = {0.05, 0.3, 1.0, 2.5, 10.0};
    for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
        double k = shapes[j], m = 0, v = 0;
        for (int i = 0; i < N; i++) {
            double g = exp(fvm_rand_log_gamma(&r, k));
            m += g;
            v += g * g;
        }
        m /= N;
        v = v / N - m * m;
        /* Var of the sample mean is k/N; Var(g^2) = k(k+1)(k+2)(k+3) - (k(k+1))^2 */
        check_near(m, k, 5 * sqrt(k / N), "gamma mean");
        double var_of_sq = k * (k + 1) * (k + 2) * (k + 3) - k * k * (k + 1) * (k + 1);
        check_near(v, k, 6 * sqrt(var_of_sq / N) + 5 * sqrt(k / N) * 2 * k, "gamma variance");
    }
    /* tiny shapes stay finite in logs */
    for (int i = 0; i < 100; i++)
        assert_true(isfinite(fvm_rand_log_gamma(&r, 1e-4)));
    /* Dirichlet: sums to one, mean 1/n per coordinate */
    double p[5], mean[5] = {0};
    for (int i = 0; i < 20000; i++) {
        fvm_rand_dirichlet(&r, 0.5, 5, p);
        double sum = 0;
        for (int k = 0; k < 5; k++) {
            assert_true(p[k] >= 0 && p[k] <= 1);
            sum += p[k];
            mean[k] += p[k] / 20000;
        }
        check_near(sum, 1.0, 1e-12, "dirichlet sum");
    }
    /* Var(p_k) = (1/5)(4/5)/(5*0.5+1) */
    for (int k = 0; k < 5; k++)
        check_near(mean[k], 0.2, 5 * sqrt(0.16 / 3.5 / 20000), "dirichlet mean");
    /* a tiny alpha still gives probabilities */
    fvm_rand_dirichlet(&r, 1e-3, 5, p);
    double sum = 0;
    for (int k = 0; k < 5; k++)
        sum += p[k];
    check_near(sum, 1.0, 1e-12, "dirichlet sum, alpha 1e-3");
    /* permutations and bounded integers */
    int64_t perm[1000];
    int seen[1000] = {0};
    fvm_rand_permutation(&r, 1000, perm);
    for (int i = 0; i < 1000; i++)
        seen[perm[i]]++;
    for (int i = 0; i < 1000; i++)
        assert_int_equal(seen[i], 1);
    int counts[3] = {0};
    for (int i = 0; i < 30000; i++)
        counts[fvm_rand_below(&r, 3)]++;
    for (int k = 0; k < 3; k++)
        check_near(counts[k], 10000, 5 * sqrt(30000 * (1.0 / 3) * (2.0 / 3)), "below(3)");
}

/* ---- partition.h --------------------------------------------------------------------------- */

/* Fashion-MNIST-like labels: 10 classes of 600, shuffled deterministically. */
static int32_t *labels_6000(void)
{
    int32_t *y = malloc(6000 * sizeof *y);
    for (int i = 0; i < 6000; i++)
        y[i] = (int32_t)((i * 7919) % 6000 % 10);
    return y;
}

/* Every example once; each client's indices ascending. */
static void check_cover(const fvm_partition *p, int64_t n)
{
    char *seen = calloc((size_t)n, 1);
    assert_int_equal(p->offsets[0], 0);
    assert_int_equal(p->offsets[p->nclients], n);
    for (int64_t k = 0; k < p->nclients; k++)
        for (int64_t j = p->offsets[k]; j < p->offsets[k + 1]; j++) {
            assert_true(p->index[j] >= 0 && p->index[j] < n);
            assert_int_equal(seen[p->index[j]]++, 0);
            if (j > p->offsets[k])
                assert_true(p->index[j] > p->index[j - 1]);
        }
    free(seen);
}

static int labels_of(const fvm_partition *p, const int32_t *y, int64_t k)
{
    int have[10] = {0}, n = 0;
    for (int64_t j = p->offsets[k]; j < p->offsets[k + 1]; j++)
        if (!have[y[p->index[j]]]++)
            n++;
    return n;
}

static void test_partition_parse(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_partition_spec s;
    assert_int_equal(fvm_partition_parse("iid", &s, &d), FVM_OK);
    assert_int_equal(s.kind, FVM_PARTITION_IID);
    assert_int_equal(fvm_partition_parse("shards:2", &s, &d), FVM_OK);
    assert_int_equal(s.kind, FVM_PARTITION_SHARDS);
    assert_int_equal(s.shards, 2);
    assert_int_equal(fvm_partition_parse("dirichlet:0.5", &s, &d), FVM_OK);
    assert_int_equal(s.kind, FVM_PARTITION_DIRICHLET);
    assert_true(s.alpha == 0.5);
    assert_int_equal(s.min_size, FVM_PARTITION_MIN_SIZE);
    const char *bad[] = {"",           "IID",         "shards",       "shards:",       "shards:0",      "shards:2x",
                         "dirichlet:", "dirichlet:0", "dirichlet:-1", "dirichlet:nan", "dirichlet:inf", "random"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(fvm_partition_parse(bad[i], &s, &d), FVM_ERR_USAGE);
        assert_non_null(strstr(d.errs[0].msg, bad[i]));
        fvm_diag_clear(&d);
    }
}

static void test_partition_iid_shards(void **state)
{
    (void)state;
    int32_t *y = labels_6000();
    fvm_diag d = {0};
    fvm_partition p, q;
    fvm_partition_spec iid = {.kind = FVM_PARTITION_IID};
    assert_int_equal(fvm_partition_make(&iid, y, 6000, 10, 7, &p, &d), FVM_OK);
    check_cover(&p, 6000);
    for (int k = 0; k < 10; k++)
        assert_int_equal(p.offsets[k + 1] - p.offsets[k], 600);
    /* same seed, same partition; another seed, another */
    assert_int_equal(fvm_partition_make(&iid, y, 6000, 10, 7, &q, &d), FVM_OK);
    assert_memory_equal(p.index, q.index, 6000 * sizeof *p.index);
    fvm_partition_free(&q);
    assert_int_equal(fvm_partition_make(&iid, y, 6000, 10, 8, &q, &d), FVM_OK);
    assert_memory_not_equal(p.index, q.index, 6000 * sizeof *p.index);
    fvm_partition_free(&q);
    fvm_partition_free(&p);
    /* sizes differ by at most one when n is not a multiple */
    assert_int_equal(fvm_partition_make(&iid, y, 6000, 7, 0, &p, &d), FVM_OK);
    for (int k = 0; k < 7; k++)
        assert_true(p.offsets[k + 1] - p.offsets[k] == 857 || p.offsets[k + 1] - p.offsets[k] == 858);
    fvm_partition_free(&p);

    /* shards:2 over 10 or 100 clients: shard sizes divide 600, so at most 2 labels each */
    fvm_partition_spec sh = {.kind = FVM_PARTITION_SHARDS, .shards = 2};
    const int64_t ns[] = {10, 100};
    for (int t = 0; t < 2; t++) {
        assert_int_equal(fvm_partition_make(&sh, y, 6000, ns[t], 3, &p, &d), FVM_OK);
        check_cover(&p, 6000);
        int two = 0;
        for (int64_t k = 0; k < ns[t]; k++) {
            assert_int_equal(p.offsets[k + 1] - p.offsets[k], 6000 / ns[t]);
            int l = labels_of(&p, y, k);
            assert_true(l >= 1 && l <= 2);
            two += l == 2;
        }
        assert_true(two > 0); /* shards really are mixed, not whole labels */
        fvm_partition_free(&p);
    }
    fvm_partition_spec sh1 = {.kind = FVM_PARTITION_SHARDS, .shards = 1};
    assert_int_equal(fvm_partition_make(&sh1, y, 6000, 10, 3, &p, &d), FVM_OK);
    for (int k = 0; k < 10; k++)
        assert_int_equal(labels_of(&p, y, k), 1);
    fvm_partition_free(&p);
    /* more shards than examples; more clients than examples; a negative label */
    fvm_partition_spec many = {.kind = FVM_PARTITION_SHARDS, .shards = 1000};
    assert_int_equal(fvm_partition_make(&many, y, 6000, 10, 0, &p, &d), FVM_ERR_RUNTIME);
    fvm_diag_clear(&d);
    assert_int_equal(fvm_partition_make(&iid, y, 6000, 6001, 0, &p, &d), FVM_ERR_USAGE);
    fvm_diag_clear(&d);
    y[17] = -1;
    assert_int_equal(fvm_partition_make(&iid, y, 6000, 10, 0, &p, &d), FVM_ERR_USAGE);
    assert_non_null(strstr(d.errs[0].msg, "17"));
    fvm_diag_clear(&d);
    assert_null(p.index);
    free(y);
}

static void test_partition_dirichlet(void **state)
{
    (void)state;
    int32_t *y = labels_6000();
    fvm_diag d = {0};
    fvm_partition p;
    /* the minimum size holds; small alpha skews the labels */
    fvm_partition_spec dir = {.kind = FVM_PARTITION_DIRICHLET, .alpha = 0.1, .min_size = 50};
    assert_int_equal(fvm_partition_make(&dir, y, 6000, 20, 11, &p, &d), FVM_OK);
    check_cover(&p, 6000);
    double top_share = 0;
    for (int k = 0; k < 20; k++) {
        int64_t size = p.offsets[k + 1] - p.offsets[k];
        assert_true(size >= 50);
        int count[10] = {0}, top = 0;
        for (int64_t j = p.offsets[k]; j < p.offsets[k + 1]; j++)
            count[y[p.index[j]]]++;
        for (int c = 0; c < 10; c++)
            top = count[c] > top ? count[c] : top;
        top_share += (double)top / (double)size / 20;
    }
    assert_true(top_share > 0.4); /* iid would give about 0.1-0.15 */
    fvm_partition_free(&p);
    /* a large alpha is close to iid */
    fvm_partition_spec flat = {.kind = FVM_PARTITION_DIRICHLET, .alpha = 1000, .min_size = 10};
    assert_int_equal(fvm_partition_make(&flat, y, 6000, 10, 11, &p, &d), FVM_OK);
    for (int k = 0; k < 10; k++)
        check_near((double)(p.offsets[k + 1] - p.offsets[k]), 600, 60, "dirichlet:1000 size");
    fvm_partition_free(&p);
    /* an impossible minimum is a clear error */
    fvm_partition_spec hard = {.kind = FVM_PARTITION_DIRICHLET, .alpha = 0.1, .min_size = 500};
    assert_int_equal(fvm_partition_make(&hard, y, 6000, 12, 0, &p, &d), FVM_ERR_RUNTIME);
    assert_non_null(strstr(d.errs[0].msg, "at least 500"));
    fvm_diag_clear(&d);
    free(y);
}

/* ---- synthetic.h --------------------------------------------------------------------------- */

static void test_synthetic_fedprox(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_synth_config c;
    fvm_synth_defaults(FVM_SYNTH_FEDPROX, &c);
    assert_int_equal(c.clients, 30);
    assert_int_equal(c.dim, 60);
    assert_int_equal(c.classes, 10);
    assert_int_equal(c.min_examples, 50);
    assert_int_equal(c.max_examples, 0);
    fvm_synth *g;
    assert_int_equal(fvm_synth_new(&c, &g, &d), FVM_OK);
    int64_t total = 0;
    int label_seen[10] = {0};
    for (int64_t k = 0; k < 30; k++) {
        fvm_tensor x, y;
        assert_int_equal(fvm_synth_client(g, k, &x, &y, &d), FVM_OK);
        int64_t n = x.shape.d[0];
        assert_int_equal(n, fvm_synth_size(g, k));
        assert_true(n >= 50);
        assert_int_equal(x.dtype, FVM_DTYPE_F32);
        assert_int_equal(x.shape.d[1], 60);
        assert_int_equal(y.dtype, FVM_DTYPE_I32);
        assert_int_equal(y.shape.d[0], n);
        for (int64_t i = 0; i < n; i++) {
            int32_t l = ((int32_t *)fvm_tensor_data(&y))[i];
            assert_true(l >= 0 && l < 10);
            label_seen[l] = 1;
        }
        total += n;
        /* any client alone gives the same data */
        fvm_tensor x2, y2;
        assert_int_equal(fvm_synth_client(g, k, &x2, &y2, &d), FVM_OK);
        assert_true(fvm_tensor_identical(&x, &x2) && fvm_tensor_identical(&y, &y2));
        fvm_tensor_release(&x);
        fvm_tensor_release(&y);
        fvm_tensor_release(&x2);
        fvm_tensor_release(&y2);
    }
    int labels = 0;
    for (int l = 0; l < 10; l++)
        labels += label_seen[l];
    assert_true(labels >= 5);
    assert_true(total > 30 * 50);
    assert_int_equal(fvm_synth_client(g, 30, &(fvm_tensor){0}, &(fvm_tensor){0}, &d), FVM_ERR_USAGE);
    fvm_diag_clear(&d);
    fvm_synth_free(g);

    /* x ~ N(v, diag(j^-1.2)): the variance of feature j within one big client */
    c.iid = true;
    c.min_examples = c.max_examples = 20000;
    c.clients = 1;
    assert_int_equal(fvm_synth_new(&c, &g, &d), FVM_OK);
    fvm_tensor x, y;
    assert_int_equal(fvm_synth_client(g, 0, &x, &y, &d), FVM_OK);
    assert_int_equal(x.shape.d[0], 20000);
    const float *px = fvm_tensor_data(&x);
    for (int j = 0; j < 60; j += 59) {
        double m = 0, v = 0;
        for (int i = 0; i < 20000; i++)
            m += px[i * 60 + j] / 20000.0;
        for (int i = 0; i < 20000; i++)
            v += (px[i * 60 + j] - m) * (px[i * 60 + j] - m) / 20000.0;
        double want = pow(j + 1, -1.2);
        check_near(m, 0.0, 5 * sqrt(want / 20000), "iid feature mean");
        check_near(v, want, 0.05 * want, "feature variance");
    }
    fvm_tensor_release(&x);
    fvm_tensor_release(&y);
    fvm_synth_free(g);

    /* bad configurations */
    fvm_synth_defaults(FVM_SYNTH_FEDPROX, &c);
    c.classes = 1;
    assert_int_equal(fvm_synth_new(&c, &g, &d), FVM_ERR_USAGE);
    assert_non_null(strstr(d.errs[0].msg, "classes"));
    fvm_diag_clear(&d);
    fvm_synth_defaults(FVM_SYNTH_FEDPROX, &c);
    c.max_examples = 10;
    assert_int_equal(fvm_synth_new(&c, &g, &d), FVM_ERR_USAGE);
    fvm_diag_clear(&d);
    c.max_examples = 0;
    c.alpha = -1;
    assert_int_equal(fvm_synth_new(&c, &g, &d), FVM_ERR_USAGE);
    fvm_diag_clear(&d);
}

static void test_synthetic_leaf(void **state)
{
    (void)state;
    fvm_diag d = {0};
    fvm_synth_config c;
    fvm_synth_defaults(FVM_SYNTH_LEAF, &c);
    assert_int_equal(c.min_examples, 5);
    assert_int_equal(c.max_examples, 1000);
    c.clients = 400;
    c.clusters = 3;
    fvm_synth *g;
    assert_int_equal(fvm_synth_new(&c, &g, &d), FVM_OK);
    int capped = 0;
    for (int64_t k = 0; k < 400; k++) {
        int64_t n = fvm_synth_size(g, k);
        assert_true(n >= 5 && n <= 1000);
        capped += n == 1000;
        if (k < 40) {
            fvm_tensor x, y;
            assert_int_equal(fvm_synth_client(g, k, &x, &y, &d), FVM_OK);
            assert_int_equal(x.shape.d[0], n);
            for (int64_t i = 0; i < n; i++) {
                int32_t l = ((int32_t *)fvm_tensor_data(&y))[i];
                assert_true(l >= 0 && l < 10);
            }
            fvm_tensor_release(&x);
            fvm_tensor_release(&y);
        }
    }
    /* P(lognormal(3,2) >= 995) = P(Z >= (ln 995 - 3)/2) ~ 0.039: some clients hit the cap */
    assert_true(capped > 3 && capped < 40);
    fvm_synth_free(g);
    /* the seed changes everything; the same seed nothing */
    fvm_tensor a, b, t;
    c.clients = 2;
    assert_int_equal(fvm_synth_new(&c, &g, &d), FVM_OK);
    assert_int_equal(fvm_synth_client(g, 1, &a, &t, &d), FVM_OK);
    fvm_tensor_release(&t);
    fvm_synth_free(g);
    c.seed = 1;
    assert_int_equal(fvm_synth_new(&c, &g, &d), FVM_OK);
    assert_int_equal(fvm_synth_client(g, 1, &b, &t, &d), FVM_OK);
    fvm_tensor_release(&t);
    assert_false(fvm_tensor_identical(&a, &b));
    fvm_tensor_release(&a);
    fvm_tensor_release(&b);
    fvm_synth_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_layout),       cmocka_unit_test(test_distributions),
        cmocka_unit_test(test_partition_parse),     cmocka_unit_test(test_partition_iid_shards),
        cmocka_unit_test(test_partition_dirichlet), cmocka_unit_test(test_synthetic_fedprox),
        cmocka_unit_test(test_synthetic_leaf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
