/* cblas.h - the part of CBLAS that fedvm calls, for a build without BLAS (make NO_BLAS=1; private to vm/kernels). */
#ifndef FVM_NOBLAS_CBLAS_H
#define FVM_NOBLAS_CBLAS_H

/* A build with NO_BLAS=1 finds this header first (-Ivm/kernels/noblas), in
 * place of the BLAS library's, and links cblas.c beside it: every call is
 * computed by fvm_gemm_chain (kernels_impl.h), the portable provider's
 * fused multiply-add chains, so the CPU kernels give the portable
 * provider's bits. Only what fedvm calls: row-major operands, alpha 1,
 * beta 0 or 1 (anything else is a programmer error). The functions carry
 * fedvm's prefix, so a program can link libfedvm.a and a BLAS. */
enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };

#define cblas_sgemm fvm_cblas_sgemm
#define cblas_dgemm fvm_cblas_dgemm
#define cblas_sgemv fvm_cblas_sgemv
#define cblas_dgemv fvm_cblas_dgemv
#define cblas_sdot fvm_cblas_sdot
#define cblas_ddot fvm_cblas_ddot
#define openblas_set_num_threads fvm_cblas_set_num_threads

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc);
void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE t, int m, int n, float alpha, const float *a, int lda,
                 const float *x, int incx, float beta, float *y, int incy);
void cblas_dgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE t, int m, int n, double alpha, const double *a, int lda,
                 const double *x, int incx, double beta, double *y, int incy);
float cblas_sdot(int n, const float *x, int incx, const float *y, int incy);
double cblas_ddot(int n, const double *x, int incx, const double *y, int incy);
/* Nothing to set: the chains run on the calling thread. */
void openblas_set_num_threads(int n);

#endif
