/* kernels_gemm_tile.h - one instruction set's f32 product loop, included by kernels_gemm.c once per target.
 *
 * Before including, define:
 *   GEMM_NAME(x)   the name of this target's copy of x (x ## _avx512, ...)
 *   GEMM_ATTR      its function attributes (__attribute__((target("..."))) or nothing)
 *   GEMM_MR        rows of a tile (1 <= GEMM_MR <= 12)
 *   GEMM_NV        vectors per row of a tile
 *   GEMM_VEC       the vector type, of GEMM_VW floats
 *   GEMM_ZERO(), GEMM_SET1(x), GEMM_LOAD(p), GEMM_STORE(p, v), GEMM_FMA(a, b, c)
 *                  all-zero, broadcast, unaligned load and store, and a*b+c
 *                  rounded once, lane by lane
 *   GEMM_MUL(a, b), GEMM_SUB(a, b), GEMM_ADD(a, b)
 *                  a*b and a-b, each rounded once, lane by lane (the epilogue)
 *   GEMM_MASK, GEMM_MASKN(n), GEMM_LOADM(p, m), GEMM_STOREM(p, v, m)
 *                  a lane mask, the mask of the first n lanes (0 <= n <=
 *                  GEMM_VW), a load of those lanes (the others 0) and a
 *                  store of them (the memory past them is not touched)
 * GEMM_MR * GEMM_NV accumulators, GEMM_NV vectors of V and one broadcast
 * must fit the target's vector registers. A tile is GEMM_NR lanes wide.
 * With GEMM_AGAIN defined, only GEMM_NAME, GEMM_MR and GEMM_NV are
 * undefined after: the next inclusion makes the same target's loop with
 * tiles of another shape. */
#define GEMM_NR (GEMM_NV * GEMM_VW)

/* o(r, l) = o[r * o_r + l] for rows [0, mr) and lanes [0, nv * GEMM_VW) of
 * one tile, over kn steps of k: acc starts at 0 (first) or at o, then
 * acc = fmaf(S(r,k), V(k,l), acc) for k in order; with the epilogue's base
 * w (the last block of k), w(r, l) - scale * acc (add: w(r, l) + acc) is
 * stored instead, w read as o is. V's and o's rows are read
 * and written whole, or through the lane masks m when masked (lanes past
 * the matrix's edge are never touched). mr, nv and masked are constants
 * after inlining, so acc lives in registers. */
static inline __attribute__((always_inline)) GEMM_ATTR void GEMM_NAME(tile)(
    const int mr, const int nv, const bool masked, const GEMM_MASK *m, int64_t kn, bool first, const float *s,
    int64_t s_r, int64_t s_k, const float *v, int64_t v_k, float *o, int64_t o_r, const float *w, float scale, bool add)
{
    GEMM_VEC acc[GEMM_MR][GEMM_NV];
    GEMM_UNROLL for (int i = 0; i < mr; i++) GEMM_UNROLL for (int j = 0; j < nv; j++) acc[i][j] =
        first    ? GEMM_ZERO()
        : masked ? GEMM_LOADM(o + i * o_r + j * GEMM_VW, m[j])
                 : GEMM_LOAD(o + i * o_r + j * GEMM_VW);
    for (int64_t k = 0; k < kn; k++) {
        const float *vk = v + k * v_k;
        GEMM_VEC vj[GEMM_NV];
        GEMM_UNROLL for (int j = 0; j < nv; j++) vj[j] =
            masked ? GEMM_LOADM(vk + j * GEMM_VW, m[j]) : GEMM_LOAD(vk + j * GEMM_VW);
        GEMM_UNROLL for (int i = 0; i < mr; i++)
        {
            GEMM_VEC si = GEMM_SET1(s[i * s_r + k * s_k]);
            GEMM_UNROLL for (int j = 0; j < nv; j++) acc[i][j] = GEMM_FMA(si, vj[j], acc[i][j]);
        }
    }
    if (w && add) {
        GEMM_UNROLL for (int i = 0; i < mr; i++) GEMM_UNROLL for (int j = 0; j < nv; j++) acc[i][j] = GEMM_ADD(
            masked ? GEMM_LOADM(w + i * o_r + j * GEMM_VW, m[j]) : GEMM_LOAD(w + i * o_r + j * GEMM_VW), acc[i][j]);
    } else if (w) {
        GEMM_VEC sv = GEMM_SET1(scale);
        GEMM_UNROLL for (int i = 0; i < mr; i++) GEMM_UNROLL for (int j = 0; j < nv; j++) acc[i][j] =
            GEMM_SUB(masked ? GEMM_LOADM(w + i * o_r + j * GEMM_VW, m[j]) : GEMM_LOAD(w + i * o_r + j * GEMM_VW),
                     GEMM_MUL(sv, acc[i][j]));
    }
    GEMM_UNROLL for (int i = 0; i < mr; i++) GEMM_UNROLL for (int j = 0; j < nv; j++)
    {
        if (masked)
            GEMM_STOREM(o + i * o_r + j * GEMM_VW, acc[i][j], m[j]);
        else
            GEMM_STORE(o + i * o_r + j * GEMM_VW, acc[i][j]);
    }
}

/* Tiles of mr rows, mr a constant in each case: whole tiles, masked
 * ones, and masked ones of a single vector (a panel of at most GEMM_VW
 * lanes). */
#define GEMM_CASE(n) \
    case n: \
        if (nl <= GEMM_VW) \
            GEMM_NAME(tile)(n, 1, true, m, kn, k0 == 0, sp, g->s_r, g->s_k, vp, vk, o, o_r, wp, g->scale, g->add); \
        else if (nl < GEMM_NR) \
            GEMM_NAME(tile) \
        (n, GEMM_NV, true, m, kn, k0 == 0, sp, g->s_r, g->s_k, vp, vk, o, o_r, wp, g->scale, g->add); \
        else GEMM_NAME(tile)(n, GEMM_NV, false, m, kn, k0 == 0, sp, g->s_r, g->s_k, vp, vk, o, o_r, wp, g->scale, \
                             g->add); \
        break;

/* The product of g, in tiles of GEMM_MR rows by GEMM_NR lanes (a panel of
 * lanes) over blocks of GEMM_KB steps of k. With one block of k and V read
 * in place, row blocks are the outer loop, so out is written row after row
 * (whole cache lines, in order); otherwise lane panels are, so a panel of V
 * (packed or not) stays in the L1 cache while every row block uses it. */
GEMM_ATTR static void GEMM_NAME(gemm)(const gemm_args *g)
{
    _Alignas(64) float panel[GEMM_KB * GEMM_NR]; /* V's panel when its lanes are not contiguous */
    _Alignas(64) float edge[GEMM_MR * GEMM_NR]; /* a tile of out that is not GEMM_NR contiguous lanes */
    bool rows_outer = g->k <= GEMM_KB && g->v_l == 1;
    int64_t nrb = (g->rows + GEMM_MR - 1) / GEMM_MR, nlp = (g->lanes + GEMM_NR - 1) / GEMM_NR;
    for (int64_t a = 0; a < (rows_outer ? nrb : nlp); a++)
        for (int64_t k0 = 0; k0 < g->k; k0 += GEMM_KB)
            for (int64_t b = 0; b < (rows_outer ? nlp : nrb); b++) {
                int64_t r0 = (rows_outer ? a : b) * GEMM_MR, l0 = (rows_outer ? b : a) * GEMM_NR;
                int mr = g->rows - r0 < GEMM_MR ? (int)(g->rows - r0) : GEMM_MR;
                int nl = g->lanes - l0 < GEMM_NR ? (int)(g->lanes - l0) : GEMM_NR;
                bool direct = g->o_l == 1; /* else out's tile is transposed, through edge */
                GEMM_MASK m[GEMM_NV];
                for (int j = 0; j < GEMM_NV; j++)
                    m[j] = GEMM_MASKN(nl <= j * GEMM_VW ? 0 : nl >= (j + 1) * GEMM_VW ? GEMM_VW : nl - j * GEMM_VW);
                int64_t kn = g->k - k0 < GEMM_KB ? g->k - k0 : GEMM_KB;
                const float *vp = g->v + k0 * g->v_k + l0 * g->v_l;
                int64_t vk = g->v_k;
                if (g->v_l != 1) { /* packed once per panel and block of k (lanes outer) */
                    if (b == 0)
                        for (int64_t k = 0; k < kn; k++)
                            for (int l = 0; l < nl; l++)
                                panel[k * GEMM_NR + l] = vp[k * g->v_k + l * g->v_l];
                    vp = panel;
                    vk = GEMM_NR;
                }
                const float *sp = g->s + r0 * g->s_r + k0 * g->s_k;
                float *op = g->o + r0 * g->o_r + l0 * g->o_l, *o = direct ? op : edge;
                int64_t o_r = direct ? g->o_r : GEMM_NR;
                /* the epilogue, once the tile's sums are whole: in the tile when out is, else as it is copied out */
                bool last = k0 + kn == g->k;
                const float *wt = g->w && last ? g->w + (op - g->o) : NULL, *wp = direct ? wt : NULL;
                if (!direct && k0 > 0)
                    for (int i = 0; i < mr; i++)
                        for (int l = 0; l < nl; l++)
                            edge[i * GEMM_NR + l] = op[i * g->o_r + l * g->o_l];
                switch (mr) {
                    GEMM_CASE(1)
#if GEMM_MR >= 2
                    GEMM_CASE(2)
#endif
#if GEMM_MR >= 3
                    GEMM_CASE(3)
#endif
#if GEMM_MR >= 4
                    GEMM_CASE(4)
#endif
#if GEMM_MR >= 5
                    GEMM_CASE(5)
#endif
#if GEMM_MR >= 6
                    GEMM_CASE(6)
#endif
#if GEMM_MR >= 7
                    GEMM_CASE(7)
#endif
#if GEMM_MR >= 8
                    GEMM_CASE(8)
#endif
#if GEMM_MR >= 9
                    GEMM_CASE(9)
#endif
#if GEMM_MR >= 10
                    GEMM_CASE(10)
#endif
#if GEMM_MR >= 11
                    GEMM_CASE(11)
#endif
#if GEMM_MR >= 12
                    GEMM_CASE(12)
#endif
                default:
                    break;
                }
                if (!direct)
                    for (int i = 0; i < mr; i++)
                        for (int l = 0; l < nl; l++) {
                            int64_t at = i * g->o_r + l * g->o_l;
                            float e = edge[i * GEMM_NR + l];
                            if (wt && g->add) {
                                e = wt[at] + e;
                            } else if (wt) {
                                float t = g->scale * e;
                                e = wt[at] - t;
                            }
                            op[at] = e;
                        }
            }
}

#undef GEMM_CASE
#undef GEMM_NAME
#undef GEMM_MR
#undef GEMM_NV
#undef GEMM_NR
#ifndef GEMM_AGAIN /* the target's definitions kept for another shape of tile */
#undef GEMM_ATTR
#undef GEMM_VEC
#undef GEMM_VW
#undef GEMM_ZERO
#undef GEMM_SET1
#undef GEMM_LOAD
#undef GEMM_STORE
#undef GEMM_FMA
#undef GEMM_MUL
#undef GEMM_SUB
#undef GEMM_ADD
#undef GEMM_MASK
#undef GEMM_MASKN
#undef GEMM_LOADM
#undef GEMM_STOREM
#endif
