/* provider.c - the CPU kernel provider, the providers by name, and the CPU kernels as other providers' fallback. */
#include "provider.h"

#include <cblas.h>
#include <string.h>

static void cpu_init(void)
{
    openblas_set_num_threads(1); /* bit-identical results whatever the core count */
}

static const fvm_kernels cpu = {
    .name = "cpu",
    .init = cpu_init,
    .alloc = fvm_tensor_alloc,
    .unary = fvm_k_unary,
    .binary = fvm_k_binary,
    .select = fvm_k_select,
    .cast = fvm_k_cast,
    .fill = fvm_k_fill,
    .iota = fvm_k_iota,
    .fused = fvm_k_fused,
    .matmul = fvm_k_matmul,
    .matmul_update = fvm_k_matmul_update,
    .matmul_update_in_place = fvm_k_matmul_update_in_place,
    .reduce = fvm_k_reduce,
    .argmax = fvm_k_argmax,
    .cumsum = fvm_k_cumsum,
    .sum_squares = fvm_k_sum_squares,
    .transpose = fvm_k_transpose,
    .slice = fvm_k_slice,
    .unslice = fvm_k_unslice,
    .concat = fvm_k_concat,
    .gather = fvm_k_gather,
    .broadcast = fvm_k_broadcast,
    .conv2d = fvm_k_conv2d,
    .conv2d_grad_input = fvm_k_conv2d_grad_input,
    .conv2d_grad_filter = fvm_k_conv2d_grad_filter,
    .pool = fvm_k_pool,
    .pool_grad = fvm_k_pool_grad,
    .pool_gather = fvm_k_pool_gather,
    .softmax = fvm_k_softmax,
    .softmax_xent = fvm_k_softmax_xent,
    .scatter_add = fvm_k_scatter_add,
    .dropout = fvm_k_dropout,
    .layer_norm = fvm_k_layer_norm,
    .lstm_gates = fvm_k_lstm_gates,
};

const fvm_kernels *fvm_kernels_cpu(void)
{
    return &cpu;
}

const fvm_kernels *fvm_kernels_lookup(const char *name)
{
    if (!strcmp(name, "cpu"))
        return fvm_kernels_cpu();
    if (!strcmp(name, "portable"))
        return fvm_kernels_portable();
    return NULL;
}

void fvm_kernels_complete(fvm_kernels *k)
{
#define FALLBACK(m) \
    if (!k->m) \
        k->m = cpu.m;
    FALLBACK(alloc)
    FALLBACK(unary)
    FALLBACK(binary)
    FALLBACK(select)
    FALLBACK(cast)
    FALLBACK(fill)
    FALLBACK(iota)
    FALLBACK(fused)
    FALLBACK(matmul)
    if (!k->matmul_update) {
        k->matmul_update = cpu.matmul_update;
        k->matmul_update_in_place = cpu.matmul_update_in_place;
    }
    FALLBACK(reduce)
    FALLBACK(argmax)
    FALLBACK(cumsum)
    FALLBACK(sum_squares)
    FALLBACK(transpose)
    FALLBACK(slice)
    FALLBACK(unslice)
    FALLBACK(concat)
    FALLBACK(gather)
    FALLBACK(broadcast)
    FALLBACK(conv2d)
    FALLBACK(conv2d_grad_input)
    FALLBACK(conv2d_grad_filter)
    FALLBACK(pool)
    FALLBACK(pool_grad)
    FALLBACK(pool_gather)
    FALLBACK(softmax)
    FALLBACK(softmax_xent)
    FALLBACK(scatter_add)
    FALLBACK(dropout)
    FALLBACK(layer_norm)
    FALLBACK(lstm_gates)
#undef FALLBACK
}
