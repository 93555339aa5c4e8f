/* bench_conv.c - GFLOP/s of conv2d and its two gradients on the CNN of McMahan et al. (MNIST-sized
 * images), against cblas_sgemm on a 512x512x512 product measured in the same run.
 *
 * Usage: bench_conv [f32|f64] [batch ...]   (default: f32, batches 10 32 64)
 * A convolution counts 2*N*OH*OW*KH*KW*C*O flops (padding included), as each
 * of its gradients does. Each figure is the best of several timed runs. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../vm/kernels/kernels_nn.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill(fvm_tensor *t, unsigned seed)
{
    int64_t n = fvm_tensor_count(t);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        fvm_tensor_set_f64(t, i, (double)(seed >> 8) / (1 << 24) - 0.5);
    }
}

static fvm_tensor make(fvm_dtype dt, int64_t a, int64_t b, int64_t c, int64_t e, unsigned seed)
{
    fvm_dims s = {.rank = 4, .d = {a, b, c, e}};
    fvm_tensor t;
    if (fvm_tensor_alloc(&t, dt, &s, NULL) != FVM_OK) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    fill(&t, seed);
    return t;
}

enum { FWD, GRAD_INPUT, GRAD_FILTER };

static fvm_status run(int which, const fvm_tensor *x, const fvm_tensor *w, const fvm_tensor *dy, const fvm_window *win,
                      fvm_tensor *y, fvm_tensor *dx, fvm_tensor *dw)
{
    switch (which) {
    case FWD:
        return fvm_k_conv2d(x, w, win, y, NULL);
    case GRAD_INPUT:
        return fvm_k_conv2d_grad_input(dy, w, win, dx, NULL);
    default:
        return fvm_k_conv2d_grad_filter(x, dy, win, dw, NULL);
    }
}

/* Seconds per call: best of 5 runs, each repeating the call for >= 50 ms. */
static double best_time(int which, const fvm_tensor *x, const fvm_tensor *w, const fvm_tensor *dy,
                        const fvm_window *win, fvm_tensor *y, fvm_tensor *dx, fvm_tensor *dw)
{
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        int reps = 0;
        double t0 = now(), t;
        do {
            if (run(which, x, w, dy, win, y, dx, dw) != FVM_OK) {
                fprintf(stderr, "kernel failed\n");
                exit(1);
            }
            reps++;
        } while ((t = now() - t0) < 0.05);
        if (t / reps < best)
            best = t / reps;
    }
    return best;
}

static double gemm_gflops(void)
{
    enum { M = 512 };
    float *a = malloc(sizeof(float) * M * M), *b = malloc(sizeof(float) * M * M), *c = malloc(sizeof(float) * M * M);
    if (!a || !b || !c)
        exit(1);
    for (int i = 0; i < M * M; i++) {
        a[i] = (float)(i % 7) - 3;
        b[i] = (float)(i % 5) - 2;
    }
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        int reps = 0;
        double t0 = now(), t;
        do {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, M, M, 1, a, M, b, M, 0, c, M);
            reps++;
        } while ((t = now() - t0) < 0.05);
        if (t / reps < best)
            best = t / reps;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * M * M * M / best * 1e-9;
}

int main(int argc, char **argv)
{
    fvm_dtype dt = FVM_DTYPE_F32;
    int first = 1;
    if (argc > 1 && (!strcmp(argv[1], "f32") || !strcmp(argv[1], "f64"))) {
        dt = argv[1][1] == '3' ? FVM_DTYPE_F32 : FVM_DTYPE_F64;
        first = 2;
    }
    int64_t batches[16] = {10, 32, 64};
    int nb = 3;
    if (argc > first) {
        nb = 0;
        for (int i = first; i < argc && nb < 16; i++)
            batches[nb++] = atoll(argv[i]);
    }
    printf("cblas_sgemm 512x512x512: %.1f GFLOP/s\n", gemm_gflops());
    static const struct {
        const char *name;
        int64_t h, c, k, o;
    } layers[] = {{"conv1 28x28x1 -> 5x5x32", 28, 1, 5, 32}, {"conv2 14x14x32 -> 5x5x64", 14, 32, 5, 64}};
    static const char *what[] = {"forward", "grad_input", "grad_filter"};
    printf("%-26s %5s %12s %12s %12s   (%s, GFLOP/s)\n", "layer (SAME)", "N", what[0], what[1], what[2],
           fvm_dtype_name(dt));
    for (int l = 0; l < 2; l++)
        for (int b = 0; b < nb; b++) {
            int64_t n = batches[b], h = layers[l].h, c = layers[l].c, k = layers[l].k, o = layers[l].o;
            fvm_window win = {.kh = k, .kw = k, .sh = 1, .sw = 1, .same = true};
            fvm_tensor x = make(dt, n, h, h, c, 1), w = make(dt, k, k, c, o, 2), dy = make(dt, n, h, h, o, 3);
            fvm_tensor y = make(dt, n, h, h, o, 4), dx = make(dt, n, h, h, c, 5), dw = make(dt, k, k, c, o, 6);
            double flops = 2.0 * (double)(n * h * h * k * k * c * o);
            printf("%-26s %5lld", layers[l].name, (long long)n);
            for (int which = 0; which < 3; which++)
                printf(" %12.1f", flops / best_time(which, &x, &w, &dy, &win, &y, &dx, &dw) * 1e-9);
            printf("\n");
            fvm_tensor_release(&x);
            fvm_tensor_release(&w);
            fvm_tensor_release(&dy);
            fvm_tensor_release(&y);
            fvm_tensor_release(&dx);
            fvm_tensor_release(&dw);
        }
    return 0;
}
