/* cblas.c - the CBLAS calls of cblas.h as fvm_gemm_chain's fused multiply-add chains (make NO_BLAS=1). */
#include "cblas.h"

#include "../kernels_impl.h"

/* C [m,n] = op(A) op(B) (+ C when beta is 1), row-major. An f32 product
 * into a whole matrix goes to fvm_gemm_f32, whose chains are the same. */
static void gemm(size_t es, enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n,
                 int k, double alpha, const void *a, int lda, const void *b, int ldb, double beta, void *c, int ldc)
{
    assert(order == CblasRowMajor && alpha == 1 && (beta == 0 || beta == 1));
    bool at = ta == CblasTrans, bt = tb == CblasTrans;
    mm_shape s = {
        .m = m, .n = n, .k = k, .a_si = at ? 1 : lda, .a_sk = at ? lda : 1, .b_sk = bt ? 1 : ldb, .b_sj = bt ? ldb : 1};
    if (es == sizeof(float) && beta == 0 && ldc == n && m <= FVM_GEMM_MAX_DIM && n <= FVM_GEMM_MAX_DIM &&
        k <= FVM_GEMM_MAX_DIM)
        fvm_gemm_f32(&s, a, b, c);
    else
        fvm_gemm_chain(es, &s, a, b, c, ldc, beta == 1);
}

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    gemm(sizeof *c, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
    gemm(sizeof *c, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* y = op(A) x with A [m,n]: the chains of the matrix times a column. */
static void gemv(size_t es, enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE t, int m, int n, double alpha, const void *a,
                 int lda, const void *x, int incx, double beta, void *y, int incy)
{
    assert(order == CblasRowMajor && alpha == 1 && beta == 0);
    bool tr = t == CblasTrans;
    mm_shape s = {.m = tr ? n : m, .n = 1, .k = tr ? m : n, .a_si = tr ? 1 : lda, .a_sk = tr ? lda : 1, .b_sk = incx};
    fvm_gemm_chain(es, &s, a, x, y, incy, false);
}

void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE t, int m, int n, float alpha, const float *a, int lda,
                 const float *x, int incx, float beta, float *y, int incy)
{
    gemv(sizeof *y, order, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

void cblas_dgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE t, int m, int n, double alpha, const double *a, int lda,
                 const double *x, int incx, double beta, double *y, int incy)
{
    gemv(sizeof *y, order, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

float cblas_sdot(int n, const float *x, int incx, const float *y, int incy)
{
    float r;
    mm_shape s = {.m = 1, .n = 1, .k = n, .a_sk = incx, .b_sk = incy};
    fvm_gemm_chain(sizeof r, &s, x, y, &r, 1, false);
    return r;
}

double cblas_ddot(int n, const double *x, int incx, const double *y, int incy)
{
    double r;
    mm_shape s = {.m = 1, .n = 1, .k = n, .a_sk = incx, .b_sk = incy};
    fvm_gemm_chain(sizeof r, &s, x, y, &r, 1, false);
    return r;
}

void openblas_set_num_threads(int n)
{
    (void)n;
}
