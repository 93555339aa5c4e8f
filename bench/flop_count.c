/* flop_count.c - counts the floating-point work a process hands to BLAS: an LD_PRELOAD library that
 * wraps cblas_sgemm, cblas_sgemv and cblas_sdot, counts each call's flops and passes it on.
 *
 *   FVM_FLOP_COUNT=out.txt LD_PRELOAD=build/bench/flop_count.so bin/fedvm run ...
 *
 * (Built with the project's -D_GNU_SOURCE, which RTLD_NEXT needs.)
 *
 * At exit it writes to $FVM_FLOP_COUNT (else stderr), key=value:
 *   calls=C flops=F                         every call counted
 *   shape fn=sgemm m=M n=N k=K ta=0|1 tb=0|1 calls=C   one line per distinct call shape
 * A gemm of [M,K] by [K,N] counts 2*M*N*K flops, a gemv of [M,N] 2*M*N, a dot of N 2*N.
 * bench/bench.py compares the count of a fedvm run with the formula of BENCHMARKS.md. */
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAX_SHAPES = 256 };

typedef struct shape {
    char fn; /* 'g' gemm, 'v' gemv, 'd' dot */
    int m, n, k, ta, tb;
    long long calls;
} shape;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static shape shapes[MAX_SHAPES];
static int nshapes, overflow;
static long long total_calls;
static double total_flops;

static void count(char fn, int m, int n, int k, int ta, int tb, double flops)
{
    pthread_mutex_lock(&lock);
    total_calls++;
    total_flops += flops;
    int i = 0;
    while (i < nshapes && !(shapes[i].fn == fn && shapes[i].m == m && shapes[i].n == n && shapes[i].k == k &&
                            shapes[i].ta == ta && shapes[i].tb == tb))
        i++;
    if (i == nshapes && nshapes < MAX_SHAPES)
        shapes[nshapes++] = (shape){fn, m, n, k, ta, tb, 0};
    if (i < nshapes)
        shapes[i].calls++;
    else
        overflow = 1;
    pthread_mutex_unlock(&lock);
}

/* The wrapped library's function of that name. */
static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "flop_count: no %s after this library\n", name);
        abort();
    }
    return f;
}

void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n,
                 OPENBLAS_CONST blasint k, OPENBLAS_CONST float alpha, OPENBLAS_CONST float *a,
                 OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *b, OPENBLAS_CONST blasint ldb,
                 OPENBLAS_CONST float beta, float *c, OPENBLAS_CONST blasint ldc)
{
    static void (*f)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                     const float *, blasint, const float *, blasint, float, float *, blasint);
    if (!f)
        *(void **)&f = next("cblas_sgemm");
    count('g', m, n, k, ta != CblasNoTrans, tb != CblasNoTrans, 2.0 * m * n * k);
    f(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cblas_sgemv(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE trans,
                 OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float *a, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *x,
                 OPENBLAS_CONST blasint incx, OPENBLAS_CONST float beta, float *y, OPENBLAS_CONST blasint incy)
{
    static void (*f)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, blasint, blasint, float, const float *, blasint,
                     const float *, blasint, float, float *, blasint);
    if (!f)
        *(void **)&f = next("cblas_sgemv");
    count('v', m, n, 1, trans != CblasNoTrans, 0, 2.0 * m * n);
    f(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

float cblas_sdot(OPENBLAS_CONST blasint n, OPENBLAS_CONST float *x, OPENBLAS_CONST blasint incx,
                 OPENBLAS_CONST float *y, OPENBLAS_CONST blasint incy)
{
    static float (*f)(blasint, const float *, blasint, const float *, blasint);
    if (!f)
        *(void **)&f = next("cblas_sdot");
    count('d', 1, 1, n, 0, 0, 2.0 * n);
    return f(n, x, incx, y, incy);
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("FVM_FLOP_COUNT");
    FILE *out = path ? fopen(path, "w") : stderr;
    if (!out) {
        perror(path);
        return;
    }
    static const char *const names[] = {['g'] = "sgemm", ['v'] = "sgemv", ['d'] = "sdot"};
    fprintf(out, "calls=%lld flops=%.0f\n", total_calls, total_flops);
    for (int i = 0; i < nshapes; i++)
        fprintf(out, "shape fn=%s m=%d n=%d k=%d ta=%d tb=%d calls=%lld\n", names[(int)shapes[i].fn], shapes[i].m,
                shapes[i].n, shapes[i].k, shapes[i].ta, shapes[i].tb, shapes[i].calls);
    if (overflow)
        fprintf(out, "overflow: more than %d shapes, the rest counted in the total only\n", MAX_SHAPES);
    if (out != stderr)
        fclose(out);
}
