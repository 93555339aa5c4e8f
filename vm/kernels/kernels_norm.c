/* kernels_norm.c - the layer norm, the LSTM cell's gates and the sum of squares of global norms, in f64 in a fixed order. */
#include <math.h>

#include "kernels_impl.h"
#include "kernels_nn.h"
#include "kernels_scalar.h"

static bool is_float(fvm_dtype t)
{
    return t == FVM_DTYPE_F32 || t == FVM_DTYPE_F64;
}

fvm_status fvm_k_layer_norm(const fvm_tensor *x, const fvm_tensor *gamma, const fvm_tensor *beta, double eps,
                            fvm_tensor *y, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "layer_norm: x");
    KREQUIRE_TENSOR(d, gamma, "layer_norm: gamma");
    KREQUIRE_TENSOR(d, beta, "layer_norm: beta");
    KREQUIRE_TENSOR(d, y, "layer_norm: y");
    if (!is_float(x->dtype))
        return kernel_type_error(d, "layer_norm", x->dtype);
    KREQUIRE(d, x->shape.rank >= 1, "layer_norm: x must have rank 1 or more");
    int64_t n = x->shape.d[x->shape.rank - 1], rows = n ? fvm_tensor_count(x) / n : 0;
    KREQUIRE(d, gamma->shape.rank == 1 && gamma->shape.d[0] == n && beta->shape.rank == 1 && beta->shape.d[0] == n,
             "layer_norm: gamma and beta must be [D], D x's last dim");
    KREQUIRE(d, y->dtype == x->dtype && fvm_dims_equal(&y->shape, &x->shape),
             "layer_norm: y must have x's dtype and shape");
    for (int64_t r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < n; j++)
            mean += fvm_tensor_get_f64(x, r * n + j);
        mean /= (double)n;
        for (int64_t j = 0; j < n; j++) {
            double c = fvm_tensor_get_f64(x, r * n + j) - mean;
            var += c * c;
        }
        double inv = 1.0 / sqrt(var / (double)n + eps);
        for (int64_t j = 0; j < n; j++) {
            double xh = (fvm_tensor_get_f64(x, r * n + j) - mean) * inv;
            fvm_tensor_set_f64(y, r * n + j, xh * fvm_tensor_get_f64(gamma, j) + fvm_tensor_get_f64(beta, j));
        }
    }
    return FVM_OK;
}

/* The gates of every element, in double precision whatever T is (each operand widened, each result
 * rounded to T once: c' before h' reads it back), so both dtypes give the bits they always have. */
#define LSTM_GATES(T) \
    do { \
        const T *zxp = (const T *)kernel_bytes(zx), *zhp = (const T *)kernel_bytes(zh); \
        const T *bp = (const T *)kernel_bytes(b), *cp = (const T *)kernel_bytes(c); \
        T *hp = (T *)kernel_bytes(h_out), *cop = (T *)kernel_bytes(c_out); \
        for (int64_t r = 0; r < B; r++) { \
            const T *zxr = zxp + r * 4 * H, *zhr = zhp + r * 4 * H; \
            for (int64_t j = 0; j < H; j++) { \
                double g[4]; \
                for (int q = 0; q < 4; q++) \
                    g[q] = (double)zxr[q * H + j] + (double)zhr[q * H + j] + (double)bp[q * H + j]; \
                T cv = (T)(stable_sigmoid(g[1]) * (double)cp[r * H + j] + stable_sigmoid(g[0]) * tanh(g[2])); \
                cop[r * H + j] = cv; \
                hp[r * H + j] = (T)(stable_sigmoid(g[3]) * tanh((double)cv)); \
            } \
        } \
    } while (0)

fvm_status fvm_k_lstm_gates(const fvm_tensor *zx, const fvm_tensor *zh, const fvm_tensor *b, const fvm_tensor *c,
                            fvm_tensor *h_out, fvm_tensor *c_out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, zx, "lstm_cell: zx");
    KREQUIRE_TENSOR(d, zh, "lstm_cell: zh");
    KREQUIRE_TENSOR(d, b, "lstm_cell: b");
    KREQUIRE_TENSOR(d, c, "lstm_cell: c");
    KREQUIRE_TENSOR(d, h_out, "lstm_cell: h_out");
    KREQUIRE_TENSOR(d, c_out, "lstm_cell: c_out");
    if (!is_float(c->dtype))
        return kernel_type_error(d, "lstm_cell", c->dtype);
    KREQUIRE(d, c->shape.rank == 2, "lstm_cell: c must be [B,H]");
    int64_t B = c->shape.d[0], H = c->shape.d[1];
    fvm_dims z = {.rank = 2, .d = {B, 4 * H}};
    KREQUIRE(d,
             fvm_dims_equal(&zx->shape, &z) && fvm_dims_equal(&zh->shape, &z) && b->shape.rank == 1 &&
                 b->shape.d[0] == 4 * H && fvm_dims_equal(&h_out->shape, &c->shape) &&
                 fvm_dims_equal(&c_out->shape, &c->shape) && h_out->dtype == c->dtype && c_out->dtype == c->dtype,
             "lstm_cell: zx, zh [B,4H], b [4H], c, h_out, c_out [B,H] of one dtype");
    KREQUIRE(d, zx->dtype == c->dtype && zh->dtype == c->dtype && b->dtype == c->dtype,
             "lstm_cell: zx, zh and b must have c's dtype");
    if (B == 0 || H == 0)
        return FVM_OK;
    if (c->dtype == FVM_DTYPE_F32)
        LSTM_GATES(float);
    else
        LSTM_GATES(double);
    return FVM_OK;
}

fvm_status fvm_k_sum_squares(const fvm_tensor *x, double *out, fvm_diag *d)
{
    KREQUIRE_TENSOR(d, x, "sum_squares: x");
    double s = 0;
    for (int64_t i = 0; i < fvm_tensor_count(x); i++) {
        double e = fvm_tensor_get_f64(x, i);
        s += e * e;
    }
    *out = s;
    return FVM_OK;
}
