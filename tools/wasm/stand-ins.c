/* stand-ins.c - what the WebAssembly build of fedvm device links instead of the libraries Emscripten lacks:
 * the CBLAS calls as plain loops (row-major only, as vm/kernels calls them), and the SQLite datasets and YAML
 * documents as clear errors (a device there reads its data from a .json file, one member per client). */
#include <stdlib.h>
#include <string.h>

#include "../../format/data_bind.h"
#include "../../format/dataset.h"
#include "../../format/doc_io.h"
#include "cblas.h"

/* ---- CBLAS, row-major ------------------------------------------------------------ */

#define GEMM(P, T) \
    void cblas_##P##gemm(CBLAS_ORDER o, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, T alpha, \
                         const T *a, int lda, const T *b, int ldb, T beta, T *c, int ldc) \
    { \
        (void)o; \
        for (int i = 0; i < m; i++) \
            for (int j = 0; j < n; j++) { \
                T acc = 0; \
                for (int p = 0; p < k; p++) \
                    acc += (ta == CblasTrans ? a[p * lda + i] : a[i * lda + p]) * \
                           (tb == CblasTrans ? b[j * ldb + p] : b[p * ldb + j]); \
                c[i * ldc + j] = alpha * acc + (beta == 0 ? 0 : beta * c[i * ldc + j]); \
            } \
    }
GEMM(s, float)
GEMM(d, double)

#define GEMV(P, T) \
    void cblas_##P##gemv(CBLAS_ORDER o, CBLAS_TRANSPOSE t, int m, int n, T alpha, const T *a, int lda, const T *x, \
                         int incx, T beta, T *y, int incy) \
    { \
        (void)o; \
        int rows = t == CblasTrans ? n : m, cols = t == CblasTrans ? m : n; \
        for (int i = 0; i < rows; i++) { \
            T acc = 0; \
            for (int p = 0; p < cols; p++) \
                acc += (t == CblasTrans ? a[p * lda + i] : a[i * lda + p]) * x[p * incx]; \
            y[i * incy] = alpha * acc + (beta == 0 ? 0 : beta * y[i * incy]); \
        } \
    }
GEMV(s, float)
GEMV(d, double)

#define DOT(P, T) \
    T cblas_##P##dot(int n, const T *x, int incx, const T *y, int incy) \
    { \
        T acc = 0; \
        for (int i = 0; i < n; i++) \
            acc += x[i * incx] * y[i * incy]; \
        return acc; \
    }
DOT(s, float)
DOT(d, double)

void openblas_set_num_threads(int n)
{
    (void)n;
}

/* ---- datasets and YAML: not in this build ------------------------------------------------ */

static fvm_status missing(const char *what, const char *path, fvm_diag *d)
{
    fvm_loc loc = {.file = path};
    return fvm_diag_add(d, FVM_ERR_USAGE, &loc, "%s are not in the WebAssembly build; give the data as a .json file",
                        what);
}

fvm_status fvm_data_spec(const char *text, char **file, char **split, fvm_diag *d)
{
    *split = NULL;
    if (!(*file = strdup(text)))
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    return FVM_OK;
}

fvm_status fvm_data_bind(const char *path, const char *split, const char *param, const fvm_type *t, fvm_value **out,
                         fvm_diag *d)
{
    *out = NULL;
    return missing("SQLite datasets", path, d);
}

fvm_status fvm_dataset_open(const char *path, const char *split, fvm_dataset **out, fvm_diag *d)
{
    *out = NULL;
    return missing("SQLite datasets", path, d);
}

void fvm_dataset_close(fvm_dataset *ds)
{
    (void)ds;
}

fvm_status fvm_dataset_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                              fvm_diag *d)
{
    return missing("SQLite datasets", NULL, d);
}

int64_t fvm_dataset_find(fvm_dataset *ds, const void *id, size_t id_len)
{
    return -1;
}

fvm_status fvm_yaml_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d)
{
    *out = NULL;
    return missing("YAML documents", src->file, d);
}
