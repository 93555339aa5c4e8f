/* sgemm_peak.c - the machine's SGEMM rate through cblas: a large square product on 1 thread and
 * on every thread, and the products of one SGD step of the 2NN at its own shapes.
 *
 * Usage: sgemm_peak [N [BATCH]]   (default: N = 2048, BATCH = 10)
 *
 * Prints one line per figure, key=value, for bench/bench.py to read:
 *   blas corename=... config=...
 *   sgemm threads=T n=N gflops=G cpu_gflops=C   products of two N x N matrices
 *   shape name=... m=M n=N k=K ta=0|1 tb=0|1 gflops=G cpu_gflops=C   one product of the step
 *   step batch=B flops=F gflops=G cpu_gflops=C  all of the step's products: F over their summed time
 * A product of [M,K] by [K,N] counts 2*M*N*K flops. Each figure is the best of 5 timed runs
 * (each repeating the product for at least 50 ms), so a busy machine lowers it less; gflops
 * is over wall time, cpu_gflops over the process's CPU time (all threads), which other
 * processes taking the cores do not inflate: on one thread it is the rate while running. The
 * step's shapes are those fedvm's autodiff calls (row-major, transposes as flags): forward
 * x.w1, h1.w2, h2.w3; backward dw = h^T.dz for the three layers and dh = dz.w^T for the
 * upper two (the input's gradient is not needed). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *matrix(long n, unsigned seed)
{
    float *a = malloc(sizeof(float) * (size_t)n);
    if (!a) {
        fprintf(stderr, "sgemm_peak: out of memory\n");
        exit(1);
    }
    for (long i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        a[i] = (float)(seed >> 8) / (float)(1 << 24) - 0.5f;
    }
    return a;
}

typedef struct product {
    const char *name;
    int m, n, k;
    int ta, tb; /* op(A) = A^T, op(B) = B^T */
} product;

/* Seconds of one C[m,n] = op(A) op(B), wall and CPU (the process's, all
 * threads): the best of 5 runs of >= 50 ms each, the CPU time of the same run. */
static void best_seconds(const product *p, const float *a, const float *b, float *c, double *wall, double *cpu)
{
    int lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n;
    *wall = *cpu = 1e30;
    for (int r = 0; r < 5; r++) {
        long reps = 0;
        double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID), t;
        do {
            cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, p->m, p->n,
                        p->k, 1.0f, a, lda, b, ldb, 0.0f, c, p->n);
            reps++;
        } while ((t = now(CLOCK_MONOTONIC) - t0) < 0.05);
        if (t / (double)reps < *wall) {
            *wall = t / (double)reps;
            *cpu = (now(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)reps;
        }
    }
}

static double flops(const product *p)
{
    return 2.0 * p->m * p->n * p->k;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2048, batch = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 16 || n > 16384 || batch < 1 || batch > 100000) {
        fprintf(stderr, "usage: sgemm_peak [N [BATCH]]  (16 <= N <= 16384, 1 <= BATCH <= 100000)\n");
        return 2;
    }
    printf("blas corename=%s config=\"%s\"\n", openblas_get_corename(), openblas_get_config());
    fflush(stdout);

    /* room for the square and for every operand of the step below */
    long size = (long)n * n > 784L * (batch > 784 ? batch : 784) ? (long)n * n : 784L * (batch > 784 ? batch : 784);
    float *a = matrix(size, 1), *b = matrix(size, 2), *c = matrix(size, 3);
    int all = openblas_get_num_threads();
    const int threads[2] = {1, all};
    for (int i = 0; i < (all > 1 ? 2 : 1); i++) {
        openblas_set_num_threads(threads[i]);
        product sq = {"square", n, n, n, 0, 0};
        double wall, cpu;
        best_seconds(&sq, a, b, c, &wall, &cpu);
        printf("sgemm threads=%d n=%d gflops=%.1f cpu_gflops=%.1f\n", threads[i], n, flops(&sq) / wall * 1e-9,
               flops(&sq) / cpu * 1e-9);
        fflush(stdout);
    }

    /* One SGD step of the 2NN (784-200-200-10) on a batch of B, on one thread as fedvm runs it. */
    openblas_set_num_threads(1);
    const product step[] = {
        {"fwd1 x.w1", batch, 200, 784, 0, 0},    {"fwd2 h1.w2", batch, 200, 200, 0, 0},
        {"fwd3 h2.w3", batch, 10, 200, 0, 0},    {"dw3 h2^T.dz3", 200, 10, batch, 1, 0},
        {"dh2 dz3.w3^T", batch, 200, 10, 0, 1},  {"dw2 h1^T.dz2", 200, 200, batch, 1, 0},
        {"dh1 dz2.w2^T", batch, 200, 200, 0, 1}, {"dw1 x^T.dz1", 784, 200, batch, 1, 0},
    };
    double total_flops = 0, total_wall = 0, total_cpu = 0;
    for (size_t i = 0; i < sizeof step / sizeof *step; i++) {
        const product *p = &step[i];
        double wall, cpu;
        best_seconds(p, a, b, c, &wall, &cpu);
        total_flops += flops(p);
        total_wall += wall;
        total_cpu += cpu;
        printf("shape name=\"%s\" m=%d n=%d k=%d ta=%d tb=%d gflops=%.1f cpu_gflops=%.1f\n", p->name, p->m, p->n, p->k,
               p->ta, p->tb, flops(p) / wall * 1e-9, flops(p) / cpu * 1e-9);
    }
    printf("step batch=%d flops=%.0f gflops=%.1f cpu_gflops=%.1f\n", batch, total_flops,
           total_flops / total_wall * 1e-9, total_flops / total_cpu * 1e-9);
    free(a);
    free(b);
    free(c);
    return 0;
}
