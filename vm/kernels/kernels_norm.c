/* kernels_norm.c - the layer norm, the LSTM cell's gates (f32 in f32 through f32math.h, f64 in f64) and the sum of squares of global norms, in a fixed order. */
#include <math.h>

#include "f32math.h"
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

/* The gates of f32 in f32: z = (zx + zh) + b, then c' and h' with the exp,
 * sigmoid and tanh of f32math.h, vectorised (each clone the same bits). */
KERNEL_CLONES static void lstm_gates_f32(const void *pzx, const void *pzh, const void *pb, const void *pc, void *ph,
                                         void *pco, int64_t B, int64_t H)
{
    const float *zx = pzx, *zh = pzh, *b = pb, *c = pc;
    float *h_out = ph, *c_out = pco;
    for (int64_t r = 0; r < B; r++) {
        const float *zxr = zx + r * 4 * H, *zhr = zh + r * 4 * H, *cr = c + r * H;
        float *hr = h_out + r * H, *cor = c_out + r * H;
        KERNEL_FOR(j, H, {
            float zi = (zxr[j] + zhr[j]) + b[j];
            float zf = (zxr[H + j] + zhr[H + j]) + b[H + j];
            float zg = (zxr[2 * H + j] + zhr[2 * H + j]) + b[2 * H + j];
            float zo = (zxr[3 * H + j] + zhr[3 * H + j]) + b[3 * H + j];
            float cv = fvm_sigmoidf(zf) * cr[j] + fvm_sigmoidf(zi) * fvm_tanhf(zg);
            cor[j] = cv;
            hr[j] = fvm_sigmoidf(zo) * fvm_tanhf(cv);
        });
    }
}

/* The gates of f64 in f64, through the C library's exp and tanh. */
static void lstm_gates_f64(const void *pzx, const void *pzh, const void *pb, const void *pc, void *ph, void *pco,
                           int64_t B, int64_t H)
{
    const double *zx = pzx, *zh = pzh, *b = pb, *c = pc;
    double *h_out = ph, *c_out = pco;
    for (int64_t r = 0; r < B; r++) {
        const double *zxr = zx + r * 4 * H, *zhr = zh + r * 4 * H;
        for (int64_t j = 0; j < H; j++) {
            double g[4];
            for (int q = 0; q < 4; q++)
                g[q] = (zxr[q * H + j] + zhr[q * H + j]) + b[q * H + j];
            double cv = ew_sigmoid(g[1]) * c[r * H + j] + ew_sigmoid(g[0]) * ew_tanh(g[2]);
            c_out[r * H + j] = cv;
            h_out[r * H + j] = ew_sigmoid(g[3]) * ew_tanh(cv);
        }
    }
}

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
        lstm_gates_f32(kernel_bytes(zx), kernel_bytes(zh), kernel_bytes(b), kernel_bytes(c), kernel_bytes(h_out),
                       kernel_bytes(c_out), B, H);
    else
        lstm_gates_f64(kernel_bytes(zx), kernel_bytes(zh), kernel_bytes(b), kernel_bytes(c), kernel_bytes(h_out),
                       kernel_bytes(c_out), B, H);
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
