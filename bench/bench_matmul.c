/* bench_matmul.c - GFLOP/s of fvm_k_matmul on the products of the 2NN's training step (McMahan et al.'s
 * 784-200-200-10 MLP, batch 10, and its evaluation in batches of 500), against cblas_sgemm on the same
 * shapes and against the machine's SGEMM peak (cblas_sgemm 1024x1024x1024 on 1 and 2 threads).
 *
 * Usage: bench_matmul [batch]   (default 10)
 * A product [M,K] @ [K,N] counts 2*M*N*K flops. Each figure is the fastest of many calls (the machine
 * may be shared: the fastest call is the one that ran alone), with operands warm in cache, as in a
 * training loop. Last, the SGD update w - lr * g of the three weight gradients: the product then the
 * fused chain sub(w, mul(lr, g)) over it, as a step runs today, against the product with the update as
 * its epilogue (fvm_gemm_f32_then), the same bits. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../vm/kernels/kernels.h"
#include "../vm/kernels/kernels_impl.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fvm_tensor make(int64_t rows, int64_t cols, unsigned seed)
{
    fvm_dims s = {.rank = 2, .d = {rows, cols}};
    fvm_tensor t;
    if (fvm_tensor_alloc(&t, FVM_DTYPE_F32, &s, NULL) != FVM_OK) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    float *p = fvm_tensor_data(&t);
    for (int64_t i = 0; i < rows * cols; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / (1 << 24) - 0.5f;
    }
    return t;
}

/* Seconds of the fastest of 'reps' calls (after one warm-up call). */
static double fastest(bool blas, const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, fvm_tensor *c, int reps)
{
    int m = (int)c->shape.d[0], n = (int)c->shape.d[1], k = (int)(ta ? a->shape.d[0] : a->shape.d[1]);
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = now();
        if (blas)
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                        fvm_tensor_data(a), (int)a->shape.d[1], fvm_tensor_data(b), (int)b->shape.d[1], 0.0f,
                        fvm_tensor_data(c), n);
        else if (fvm_k_matmul(a, b, ta, tb, c, NULL) != FVM_OK) {
            fprintf(stderr, "matmul failed\n");
            exit(1);
        }
        double t = now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    return best;
}

static double sgemm_peak(int threads)
{
    enum { M = 1024 };
    openblas_set_num_threads(threads);
    fvm_tensor a = make(M, M, 1), b = make(M, M, 2), c = make(M, M, 3);
    double t = fastest(true, &a, &b, false, false, &c, 40);
    fvm_tensor_release(&a);
    fvm_tensor_release(&b);
    fvm_tensor_release(&c);
    openblas_set_num_threads(1);
    return 2.0 * M * M * M / t * 1e-9;
}

/* Microseconds of the fastest of reps SGD updates of w [k,n] by g = a^T b (a [b,k], b [b,n]): the
 * product then the fused update in place in g (epilogue false), or the product with the update as its
 * epilogue, into g. */
static double update_us(const fvm_tensor *a, const fvm_tensor *b, const fvm_tensor *w, fvm_tensor *g, bool epilogue,
                        int reps)
{
    fvm_tensor lr = make(1, 1, 7);
    const fvm_fstep st[] = {{.kind = FVM_FS_BINARY, .op = FVM_BIN_MUL, .arg = {1, 2}},
                            {.kind = FVM_FS_BINARY, .op = FVM_BIN_SUB, .arg = {0, -1}}};
    const fvm_tensor *in[] = {w, &lr, g};
    int64_t m = g->shape.d[0], n = g->shape.d[1];
    mm_shape s = {.m = m, .n = n, .k = a->shape.d[0], .a_si = 1, .a_sk = m, .b_sk = n, .b_sj = 1};
    fvm_gemm_epilogue ep = {.scale = *(const float *)fvm_tensor_data(&lr), .base = fvm_tensor_data(w)};
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = now();
        fvm_gemm_f32_then(&s, fvm_tensor_data(a), fvm_tensor_data(b), fvm_tensor_data(g), epilogue ? &ep : NULL);
        if (!epilogue && fvm_k_fused(st, 2, in, 3, g, NULL) != FVM_OK) {
            fprintf(stderr, "fused update failed\n");
            exit(1);
        }
        double t = now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    fvm_tensor_release(&lr);
    return best * 1e6;
}

int main(int argc, char **argv)
{
    int64_t batch = argc > 1 ? atoll(argv[1]) : 10;
    if (batch < 1 || batch > 100000) {
        fprintf(stderr, "usage: bench_matmul [batch]\n");
        return 2;
    }
    printf("SGEMM peak (cblas_sgemm 1024x1024x1024, %s): 1 thread %.1f GFLOP/s, 2 threads %.1f GFLOP/s\n",
           openblas_get_corename(), sgemm_peak(1), sgemm_peak(2));
    /* name, M, K, N, transpose flags: what the 2NN's logits and their pullback multiply */
    const int64_t B = batch, E = 500;
    const struct {
        const char *name;
        int64_t m, k, n;
        bool ta, tb;
    } shapes[] = {
        {"x @ w1", B, 784, 200, false, false},       {"h1 @ w2", B, 200, 200, false, false},
        {"h2 @ w3", B, 200, 10, false, false},       {"dz3 @ w3^T", B, 10, 200, false, true},
        {"h2^T @ dz3", 200, B, 10, true, false},     {"da2 @ w2^T", B, 200, 200, false, true},
        {"h1^T @ da2", 200, B, 200, true, false},    {"x^T @ da1", 784, B, 200, true, false},
        {"eval: x @ w1", E, 784, 200, false, false}, {"eval: h1 @ w2", E, 200, 200, false, false},
        {"eval: h2 @ w3", E, 200, 10, false, false},
    };
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    printf("%-14s %5s %5s %5s %12s %12s   (GFLOP/s)\n", "product", "M", "K", "N", "fvm_k_matmul", "cblas_sgemm");
    double flops[2] = {0, 0}, secs[2][2] = {{0, 0}, {0, 0}};
    for (int i = 0; i < nshapes; i++) {
        int64_t m = shapes[i].m, k = shapes[i].k, n = shapes[i].n;
        bool ta = shapes[i].ta, tb = shapes[i].tb;
        fvm_tensor a = ta ? make(k, m, 4) : make(m, k, 4), b = tb ? make(n, k, 5) : make(k, n, 5), c = make(m, n, 6);
        double f = 2.0 * (double)(m * n * k);
        int reps = f < 1e8 ? 2000 : 50;
        double tf = fastest(false, &a, &b, ta, tb, &c, reps), tblas = fastest(true, &a, &b, ta, tb, &c, reps);
        printf("%-14s %5lld %5lld %5lld %12.1f %12.1f\n", shapes[i].name, (long long)m, (long long)k, (long long)n,
               f / tf * 1e-9, f / tblas * 1e-9);
        int part = i < 8 ? 0 : 1;
        flops[part] += f;
        secs[part][0] += tf;
        secs[part][1] += tblas;
        fvm_tensor_release(&a);
        fvm_tensor_release(&b);
        fvm_tensor_release(&c);
    }
    printf("%-14s %17s %12.1f %12.1f   (%.2f MFLOP)\n", "training step", "", flops[0] / secs[0][0] * 1e-9,
           flops[0] / secs[0][1] * 1e-9, flops[0] * 1e-6);
    printf("%-14s %17s %12.1f %12.1f   (%.2f MFLOP)\n", "evaluation", "", flops[1] / secs[1][0] * 1e-9,
           flops[1] / secs[1][1] * 1e-9, flops[1] * 1e-6);
    printf("%-14s %5s %5s %5s %12s %12s   (us)\n", "SGD update", "M", "K", "N", "then update", "epilogue");
    for (int i = 0; i < nshapes; i++) {
        int64_t m = shapes[i].m, k = shapes[i].k, n = shapes[i].n;
        if (!shapes[i].ta || shapes[i].tb)
            continue; /* the weight gradients */
        fvm_tensor a = make(k, m, 4), b = make(k, n, 5), w = make(m, n, 6), g = make(m, n, 8);
        double sep = update_us(&a, &b, &w, &g, false, 2000), epi = update_us(&a, &b, &w, &g, true, 2000);
        printf("%-14s %5lld %5lld %5lld %12.1f %12.1f\n", shapes[i].name, (long long)m, (long long)k, (long long)n, sep,
               epi);
        fvm_tensor_release(&a);
        fvm_tensor_release(&b);
        fvm_tensor_release(&w);
        fvm_tensor_release(&g);
    }
    return 0;
}
