/* kernels_gemm.c - f32 matrix products: each element one fused multiply-add chain in k order, in vectors when the CPU has them. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels_impl.h"

/* The product as out(r, l) = sum_k S(r, k) * V(k, l) (or, with the SGD
 * epilogue, w(r, l) - scale * that sum), with V read along its
 * lanes l: either C = A B (rows i, lanes j, V = B) when B's rows are
 * contiguous, or C^T = B^T A^T (rows j, lanes i, V = A^T) otherwise, so
 * that a transposed B is never gathered. Each element is computed as
 * acc = fmaf(S(r,k), V(k,l), acc) for k = 0, 1, ... from acc = 0: exactly
 * the scalar loop over k with fmaf, whichever way the work is cut and
 * whatever the vector width, so every target below gives the same bits. */
typedef struct gemm_args {
    int64_t rows, lanes, k;
    const float *s; /* S(r, k) = s[r * s_r + k * s_k] */
    int64_t s_r, s_k;
    const float *v; /* V(k, l) = v[k * v_k + l * v_l] */
    int64_t v_k, v_l;
    float *o; /* out(r, l) = o[r * o_r + l * o_l] */
    int64_t o_r, o_l;
    const float *w; /* the epilogue's base, read as o is, or NULL: out = w - scale * (the sum), or w + (the sum) */
    float scale;
    bool add;
} gemm_args;

/* k is cut into blocks of GEMM_KB, so that a packed panel of V (when its
 * lanes are not contiguous, or at the edge) stays in the L1 cache; a tile
 * continues its chains from the previous block's stored values. */
#define GEMM_KB 256
#define GEMM_UNROLL _Pragma("GCC unroll 16")

/* Every CPU: scalar fmaf (a library call where the target has no fused
 * multiply-add instruction). */
#define GEMM_NAME(x) x##_generic
#define GEMM_ATTR
#define GEMM_MR 4
#define GEMM_NV 4
#define GEMM_VEC float
#define GEMM_VW 1
#define GEMM_ZERO() 0.0f
#define GEMM_SET1(x) (x)
#define GEMM_LOAD(p) (*(p))
#define GEMM_STORE(p, v) (*(p) = (v))
#define GEMM_FMA(a, b, c) fmaf((a), (b), (c))
#define GEMM_MUL(a, b) ((a) * (b))
#define GEMM_SUB(a, b) ((a) - (b))
#define GEMM_ADD(a, b) ((a) + (b))
#define GEMM_MASK bool
#define GEMM_MASKN(n) ((n) > 0)
#define GEMM_LOADM(p, m) ((m) ? *(p) : 0.0f)
#define GEMM_STOREM(p, v, m) ((m) ? (void)(*(p) = (v)) : (void)0)
#include "kernels_gemm_tile.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GEMM_HAVE_X86 1

/* 16 registers of 8 floats: 6 x 2 accumulators, 2 of V, 1 broadcast. */
#define GEMM_NAME(x) x##_avx2
#define GEMM_ATTR __attribute__((target("avx2,fma")))
#define GEMM_MR 6
#define GEMM_NV 2
#define GEMM_VEC __m256
#define GEMM_VW 8
#define GEMM_ZERO() _mm256_setzero_ps()
#define GEMM_SET1(x) _mm256_set1_ps(x)
#define GEMM_LOAD(p) _mm256_loadu_ps(p)
#define GEMM_STORE(p, v) _mm256_storeu_ps((p), (v))
#define GEMM_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define GEMM_MUL(a, b) _mm256_mul_ps((a), (b))
#define GEMM_SUB(a, b) _mm256_sub_ps((a), (b))
#define GEMM_ADD(a, b) _mm256_add_ps((a), (b))
#define GEMM_MASK __m256i
#define GEMM_MASKN(n) _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define GEMM_LOADM(p, m) _mm256_maskload_ps((p), (m))
#define GEMM_STOREM(p, v, m) _mm256_maskstore_ps((p), (m), (v))
#include "kernels_gemm_tile.h"

/* 32 registers of 16 floats: 12 x 2 accumulators, 2 of V, 1 broadcast. */
#define GEMM_NAME(x) x##_avx512
#define GEMM_ATTR __attribute__((target("avx512f")))
#define GEMM_MR 12
#define GEMM_NV 2
#define GEMM_VEC __m512
#define GEMM_VW 16
#define GEMM_ZERO() _mm512_setzero_ps()
#define GEMM_SET1(x) _mm512_set1_ps(x)
#define GEMM_LOAD(p) _mm512_loadu_ps(p)
#define GEMM_STORE(p, v) _mm512_storeu_ps((p), (v))
#define GEMM_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define GEMM_MUL(a, b) _mm512_mul_ps((a), (b))
#define GEMM_SUB(a, b) _mm512_sub_ps((a), (b))
#define GEMM_ADD(a, b) _mm512_add_ps((a), (b))
#define GEMM_MASK __mmask16
#define GEMM_MASKN(n) ((__mmask16)((1u << (n)) - 1))
#define GEMM_LOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define GEMM_STOREM(p, v, m) _mm512_mask_storeu_ps((p), (m), (v))
#define GEMM_AGAIN
#include "kernels_gemm_tile.h"
#undef GEMM_AGAIN

/* Products of at most 4 rows (an LSTM's step over a batch of 4): 4 x 6
 * accumulators, 6 of V, 1 broadcast; each vector of V loaded serves 4
 * multiply-adds, where the 12-row tile's would serve as many as the rows. */
#define GEMM_NAME(x) x##_avx512_wide
#define GEMM_MR 4
#define GEMM_NV 6
#include "kernels_gemm_tile.h"
#endif

bool fvm_gemm_f32_isa(fvm_gemm_isa isa)
{
    switch (isa) {
    case FVM_GEMM_GENERIC:
        return true;
#ifdef GEMM_HAVE_X86
    case FVM_GEMM_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case FVM_GEMM_AVX512:
        return __builtin_cpu_supports("avx512f");
#endif
    default:
        return false;
    }
}

bool fvm_gemm_f32_fits(const mm_shape *s)
{
    return s->m <= FVM_GEMM_MAX_DIM && s->n <= FVM_GEMM_MAX_DIM && s->k <= FVM_GEMM_MAX_DIM &&
           s->m * s->n * s->k <= FVM_GEMM_MAX_MACS;
}

bool fvm_gemm_f32_in_place(const mm_shape *s)
{
    return s->k <= GEMM_KB;
}

void fvm_gemm_f32_with(fvm_gemm_isa isa, const mm_shape *s, const float *a, const float *b, float *c,
                       const fvm_gemm_epilogue *ep)
{
    gemm_args g = {.k = s->k, .o = c, .w = ep ? ep->base : NULL, .scale = ep ? ep->scale : 0.0f, .add = ep && ep->add};
    if (s->b_sj == 1) {
        g.rows = s->m, g.lanes = s->n;
        g.s = a, g.s_r = s->a_si, g.s_k = s->a_sk;
        g.v = b, g.v_k = s->b_sk, g.v_l = 1;
        g.o_r = s->n, g.o_l = 1;
    } else {
        g.rows = s->n, g.lanes = s->m;
        g.s = b, g.s_r = s->b_sj, g.s_k = s->b_sk;
        g.v = a, g.v_k = s->a_sk, g.v_l = s->a_si;
        g.o_r = 1, g.o_l = s->n;
    }
    switch (isa) {
#ifdef GEMM_HAVE_X86
    case FVM_GEMM_AVX512:
        if (g.rows <= 4)
            gemm_avx512_wide(&g);
        else
            gemm_avx512(&g);
        break;
    case FVM_GEMM_AVX2:
        gemm_avx2(&g);
        break;
#endif
    default:
        gemm_generic(&g);
        break;
    }
}

void fvm_gemm_f32_then(const mm_shape *s, const float *a, const float *b, float *c, const fvm_gemm_epilogue *ep)
{
    fvm_gemm_isa isa = fvm_gemm_f32_isa(FVM_GEMM_AVX512) ? FVM_GEMM_AVX512
                       : fvm_gemm_f32_isa(FVM_GEMM_AVX2) ? FVM_GEMM_AVX2
                                                         : FVM_GEMM_GENERIC;
    fvm_gemm_f32_with(isa, s, a, b, c, ep);
}

void fvm_gemm_f32(const mm_shape *s, const float *a, const float *b, float *c)
{
    fvm_gemm_f32_then(s, a, b, c, NULL);
}
