/* bench_reduce.c - elements per nanosecond of fvm_k_reduce's f32 sums: a whole vector (in cache and in
 * memory), the rows of a matrix (the last axis, NumPy's pairwise order) and its columns (axis 0, a
 * running sum per column).
 *
 * Usage: bench_reduce
 * Each figure is the fastest of many calls (the machine may be shared: the fastest call is the one that
 * ran alone), the operand written once before the first. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../vm/kernels/kernels.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fvm_tensor make(const fvm_dims *s, unsigned seed)
{
    fvm_tensor t;
    if (fvm_tensor_alloc(&t, FVM_DTYPE_F32, s, NULL) != FVM_OK) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    float *p = fvm_tensor_data(&t);
    for (int64_t i = 0; i < fvm_tensor_count(&t); i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / (1 << 24) - 0.25f;
    }
    return t;
}

/* Elements per nanosecond of the fastest of reps calls summing x over the axes of mask. */
static double rate(const char *what, const fvm_dims *shape, uint32_t mask, int reps)
{
    fvm_tensor x = make(shape, 7), out;
    int64_t kept = 1;
    for (int i = 0; i < shape->rank; i++)
        if (!((mask >> i) & 1))
            kept *= shape->d[i];
    fvm_dims os = {.rank = 1, .d = {kept}};
    if (fvm_tensor_alloc(&out, FVM_DTYPE_F32, &os, NULL) != FVM_OK) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    fvm_diag d = {0};
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = now();
        if (fvm_k_reduce(FVM_RED_SUM, &x, mask, &out, &d) != FVM_OK) {
            fprintf(stderr, "%s: reduce failed\n", what);
            exit(1);
        }
        double t = now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    double n = (double)fvm_tensor_count(&x), per_ns = n / (best * 1e9);
    printf("%-46s %9.0f elements  %7.3f ms  %6.2f elements/ns  (sum %.9g)\n", what, n, best * 1e3, per_ns,
           (double)((float *)fvm_tensor_data(&out))[0]);
    fvm_tensor_release(&x);
    fvm_tensor_release(&out);
    return per_ns;
}

int main(void)
{
    fvm_dims v64k = {.rank = 1, .d = {1 << 16}}, v16m = {.rank = 1, .d = {1 << 24}};
    fvm_dims m = {.rank = 2, .d = {1000, 1000}}, mid = {.rank = 2, .d = {10000, 100}},
             thin = {.rank = 2, .d = {100000, 10}};
    rate("sum f32[65536] (in cache)", &v64k, 1, 2000);
    rate("sum f32[16777216] (in memory)", &v16m, 1, 20);
    rate("sum f32[1000,1000] over axis 1 (rows)", &m, 2, 200);
    rate("sum f32[1000,1000] over axis 0 (columns)", &m, 1, 200);
    rate("sum f32[10000,100] over axis 1 (rows of 100)", &mid, 2, 200);
    rate("sum f32[100000,10] over axis 1 (rows of 10)", &thin, 2, 200);
    return 0;
}
