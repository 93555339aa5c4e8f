/* packed.h - matrices a context keeps transposed for the products that read them so (exec_matmul).
 *
 * A product with a transposed matrix operand, a(m,k) b(n,k)^T, is made by
 * fedvm's kernel with b's rows as the tile's rows and a's m rows as lanes;
 * when m is small (an LSTM's backward, dz(B,4H) wx^T with a batch of 4),
 * most lanes of every vector are idle. The same b is often read that way
 * many times running (the same weights at each of a sequence's 80
 * positions): a context keeps b^T, made once, so that such a product
 * becomes a(m,k) c(k,n) with c = b^T contiguous, m as rows. Each element
 * of the product is the same fused multiply-add chain over k in order
 * either way: the same bits.
 *
 * A copy holds a reference to b's buffer: while it does, the buffer can
 * neither be freed and reused nor written in place (fused chains write only
 * into buffers nothing else holds: vm/exec/fuse.h), so a copy found by
 * buffer, offset, dtype and shape is always b's transpose. A context keeps
 * at most FVM_PACKED_SLOTS copies of at most FVM_PACKED_MAX elements each,
 * dropping the least recently used, and frees them when it ends
 * (fvm_ctx_end). */
#ifndef FVM_PACKED_H
#define FVM_PACKED_H

#include "../ir/tensor.h"

#define FVM_PACKED_SLOTS 4
#define FVM_PACKED_MAX ((int64_t)1 << 20)

typedef struct fvm_ctx fvm_ctx;
typedef struct fvm_packed fvm_packed;

/* Should a(m,k) b^T use b's transpose (f32 matrices, m at most 8, b of
 * 32 Ki to FVM_PACKED_MAX elements)? */
bool fvm_packed_wanted(const fvm_tensor *a, const fvm_tensor *b, bool ta, bool tb);

/* b's transpose from x's copies (made with the VM's transpose kernel on
 * first use), borrowed until x's next call of this or its end; NULL when
 * it cannot be made (out of memory: the caller then multiplies as
 * written). */
const fvm_tensor *fvm_packed_transpose(fvm_ctx *x, const fvm_tensor *b);

/* Frees the copies (their references to the operands' buffers too). */
void fvm_packed_free(fvm_packed *p);

#endif
