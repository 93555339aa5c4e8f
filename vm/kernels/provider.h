/* provider.h - kernel providers: the table of kernels the interpreter computes with, the CPU provider and the portable one.
 *
 * The interpreter (vm/exec) reaches every kernel and every buffer it
 * allocates for a result through its VM's provider (fvm_vm_config.kernels),
 * so a device (an accelerator, a CPU without SIMD or BLAS) plugs in here
 * with a table of its own. The values the kernels read and write are
 * fvm_tensor buffers that the rest of fedvm (the interpreter's control ops
 * and random numbers, aggregation, format/) reads and writes in place: a
 * provider's buffers must be addressable by the host (host memory, or
 * memory mapped for both). Providers are process-wide, like a BLAS library:
 * a table of functions with no per-VM state.
 *
 * Every kernel member has the signature and the contract of the kernels.h
 * or kernels_nn.h function of its name (fvm_k_<member>): arguments, out's
 * dtype and shape, in-place rules, errors, and the bits of the result (the
 * conformance test, tests/test_providers.c, compares every provider with the
 * CPU one; where a result depends on BLAS, kernels.h and format/SPEC.md say
 * so). A provider's table may leave any kernel member NULL:
 * fvm_kernels_complete then puts the CPU provider's kernel there, which runs
 * on the same (host) buffers. */
#ifndef FVM_PROVIDER_H
#define FVM_PROVIDER_H

#include "kernels.h"
#include "kernels_nn.h"
#include "providers.h"

struct fvm_kernels {
    /* Required. The provider's name ("cpu", "portable"): fedvm run --kernels NAME. */
    const char *name;
    /* Optional (NULL: nothing to do; not taken from the CPU provider). Called
     * by fvm_vm_new for every VM made with the provider, before the VM runs
     * anything: the process-wide settings the kernels need. The CPU
     * provider's sets OpenBLAS to one thread: BLAS results change in their
     * last bits with OpenBLAS's thread count, and fedvm's must not depend on
     * the machine (parallelism comes from the backends instead). */
    void (*init)(void);

    /* -- buffers -- */
    /* *t = a new tensor of dtype dt and shape (known dims), uninitialised:
     * the result of a kernel (the caller owns one reference). Errors and
     * contract as fvm_tensor_alloc's; the CPU provider's is fvm_tensor_alloc
     * (64-byte aligned, from a per-thread cache of freed buffers). */
    fvm_status (*alloc)(fvm_tensor *t, fvm_dtype dt, const fvm_dims *shape, fvm_diag *d);

    /* -- elementwise (the FVM_EW rows of ops.def) -- */
    fvm_status (*unary)(fvm_unary op, const fvm_tensor *x, fvm_tensor *out, fvm_diag *d);
    fvm_status (*binary)(fvm_binary op, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d);
    fvm_status (*select)(const fvm_tensor *p, const fvm_tensor *a, const fvm_tensor *b, fvm_tensor *out, fvm_diag *d);
    fvm_status (*cast)(const fvm_tensor *x, fvm_tensor *out, fvm_diag *d);
    fvm_status (*fill)(double v, fvm_tensor *out, fvm_diag *d);
    fvm_status (*iota)(int axis, fvm_tensor *out, fvm_diag *d);
    /* A chain of steps in one pass (chains fvm_k_fused_dtype accepts). */
    fvm_status (*fused)(const fvm_fstep *steps, int nsteps, const fvm_tensor *const *in, int nin, fvm_tensor *out,
                        fvm_diag *d);

    /* -- products and reductions -- */
    fvm_status (*matmul)(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, fvm_tensor *out, fvm_diag *d);
    fvm_status (*matmul_update)(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *scale,
                                const fvm_tensor *base, fvm_tensor *out, fvm_diag *d);
    /* Optional, and paired with matmul_update (NULL: never; the CPU
     * provider's is taken only with its matmul_update): may matmul_update's
     * out be its base, for these operands? */
    bool (*matmul_update_in_place)(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb, const fvm_tensor *base);
    fvm_status (*reduce)(fvm_reduce op, const fvm_tensor *x, uint32_t axes_mask, fvm_tensor *out, fvm_diag *d);
    fvm_status (*argmax)(const fvm_tensor *x, int axis, fvm_tensor *out, fvm_diag *d);
    fvm_status (*cumsum)(const fvm_tensor *x, int axis, bool reverse, fvm_tensor *out, fvm_diag *d);
    fvm_status (*sum_squares)(const fvm_tensor *x, double *out, fvm_diag *d);

    /* -- shape movement -- */
    fvm_status (*transpose)(const fvm_tensor *x, const int *perm, fvm_tensor *out, fvm_diag *d);
    fvm_status (*slice)(const fvm_tensor *x, const int64_t *start, const int64_t *step, fvm_tensor *out, fvm_diag *d);
    fvm_status (*unslice)(const fvm_tensor *x, const int64_t *start, const int64_t *step, fvm_tensor *out, fvm_diag *d);
    fvm_status (*concat)(const fvm_tensor *const *xs, int n, int axis, fvm_tensor *out, fvm_diag *d);
    fvm_status (*gather)(const fvm_tensor *x, const fvm_tensor *idx, int axis, fvm_tensor *out, fvm_diag *d);
    fvm_status (*broadcast)(const fvm_tensor *x, fvm_tensor *out, fvm_diag *d);

    /* -- neural networks (kernels_nn.h) -- */
    fvm_status (*conv2d)(const fvm_tensor *x, const fvm_tensor *w, const fvm_window *win, fvm_tensor *y, fvm_diag *d);
    fvm_status (*conv2d_grad_input)(const fvm_tensor *dy, const fvm_tensor *w, const fvm_window *win, fvm_tensor *dx,
                                    fvm_diag *d);
    fvm_status (*conv2d_grad_filter)(const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win, fvm_tensor *dw,
                                     fvm_diag *d);
    fvm_status (*pool)(fvm_pool kind, const fvm_tensor *x, const fvm_window *win, fvm_tensor *y, fvm_diag *d);
    fvm_status (*pool_grad)(fvm_pool kind, const fvm_tensor *x, const fvm_tensor *dy, const fvm_window *win,
                            fvm_tensor *dx, fvm_diag *d);
    fvm_status (*pool_gather)(const fvm_tensor *x, const fvm_tensor *u, const fvm_window *win, fvm_tensor *y,
                              fvm_diag *d);
    fvm_status (*softmax)(const fvm_tensor *x, int axis, bool log, fvm_tensor *out, fvm_diag *d);
    fvm_status (*softmax_xent)(const fvm_tensor *logits, const fvm_tensor *labels, fvm_tensor *loss, fvm_diag *d);
    fvm_status (*scatter_add)(const fvm_tensor *idx, const fvm_tensor *updates, int axis, fvm_tensor *out, fvm_diag *d);
    fvm_status (*dropout)(const fvm_tensor *x, const uint32_t key[2], double rate, fvm_tensor *out, fvm_diag *d);
    fvm_status (*layer_norm)(const fvm_tensor *x, const fvm_tensor *gamma, const fvm_tensor *beta, double eps,
                             fvm_tensor *y, fvm_diag *d);
    fvm_status (*lstm_gates)(const fvm_tensor *zx, const fvm_tensor *zh, const fvm_tensor *b, const fvm_tensor *c,
                             fvm_tensor *h_out, fvm_tensor *c_out, fvm_diag *d);
};

/* The CPU provider: the kernels of kernels.h and kernels_nn.h (elementwise
 * loops compiled for AVX-512, AVX2 and the baseline, fedvm's f32 matrix
 * kernel, also for f32 conv2d and its gradients, OpenBLAS for the other
 * float products and f64 conv2d). The default
 * (fvm_vm_config.kernels NULL). Static storage. */
const fvm_kernels *fvm_kernels_cpu(void);

/* The portable provider: what a device without SIMD or BLAS runs. Its own
 * plain loops, one element at a time over the scalar kernels of the op
 * table, for the elementwise ops and fused chains; fused multiply-add
 * chains in k order for every matrix product, conv2d's and its gradients'
 * included (no BLAS); float sums and means as a plain recursion of NumPy's
 * pairwise summation over rows found by index arithmetic; the CPU
 * provider's kernels for the rest (max, min, integer sums, shape movement,
 * pooling, softmax, ...), which are plain C already. Its results are the
 * CPU provider's bit for bit, except for the products the CPU provider
 * hands to BLAS (format/SPEC.md, "What depends on BLAS"): f64 products, f32
 * ones with a vector operand or above 2^27 multiply-adds, and f64 conv2d
 * and its gradients, which differ in the last bits (BLAS orders the sums its
 * own way), and for which NaN a sum returns where two different NaNs meet
 * (format/SPEC.md, Numerics). Static storage. */
const fvm_kernels *fvm_kernels_portable(void);

/* Puts the CPU provider's kernel in every NULL kernel member of k (not in
 * name or init; matmul_update_in_place only with the CPU's matmul_update).
 * For a provider's constructor. */
void fvm_kernels_complete(fvm_kernels *k);

#endif
