/* safetensors.h - server state <-> safetensors checkpoints (the file format PyTorch, NumPy and JAX users load).
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON header
 * {"__metadata__": {string: string}, NAME: {"dtype": "F32", "shape": [...],
 * "data_offsets": [begin, end]}, ...} and then the data buffer: each tensor's
 * little-endian C-order bytes at [begin, end) of the buffer, the tensors
 * covering it exactly. fedvm's dtypes map to BOOL, U8, I32, I64, U32, F32
 * and F64.
 *
 * A state is a tensor or a tree of structs of tensors, possibly placed
 * (T@SERVER, or an all-equal T@CLIENTS, which is the T value itself). Each
 * leaf is named by its path of field names from the root joined by "."; a
 * positional field is named by its index: state <model=<w1=f32[784,200],
 * b1=f32[200]>, opt=<f32[],i32[]>> has tensors "model.w1", "model.b1",
 * "opt.0" and "opt.1". A state that is a single tensor is named "value".
 * Sequences, {T}@CLIENTS and functions have no safetensors form: they are
 * FVM_ERR_TYPE errors naming their path. */
#ifndef FVM_SAFETENSORS_H
#define FVM_SAFETENSORS_H

#include <stdint.h>

#include "../vm/ir/types.h"
#include "../vm/ir/value.h"
#include "atomic.h"

/* The largest header a file may declare (the reference implementation's limit). */
#define FVM_SAFETENSORS_MAX_HEADER 100000000
/* The largest file read: 64 GiB. A file is read whole into memory (and the
 * values made from it are copies), so a state past this is far beyond what
 * fedvm can hold (a tensor may have 4 GiB, FVM_MAX_TENSOR_BYTES); the cap
 * turns a runaway or sparse file into an error before anything is read. */
#define FVM_SAFETENSORS_MAX_FILE (UINT64_C(1) << 36)

/* The safetensors name of a dtype ("F32"); "?" for an invalid one. */
FVM_API const char *fvm_safetensors_dtype_name(fvm_dtype t);

/* Writes value v of type t to path, replacing it atomically (format/atomic.h:
 * a temporary beside path, fsync, rename, fsync of the directory), so a
 * reader sees the old file or the whole new one. meta holds nmeta key/value
 * pairs (2 * nmeta strings: key0, value0, key1, value1, ...), stored as
 * "__metadata__" (left out when nmeta is 0). Everything is borrowed.
 *
 * The bytes depend only on the value and the metadata, laid out as the
 * reference writer (huggingface/safetensors) lays them out: "__metadata__"
 * first (keys sorted, strcmp), then the tensors in the order of their data,
 * which is by dtype, widest first (I64, F64, F32, U32, I32, U8, BOOL: the
 * reference's dtype order, descending), then by name (strcmp); each entry's
 * keys in the order dtype, shape, data_offsets; no whitespace but the spaces
 * that pad the header to a multiple of 8 bytes. So the data buffer starts
 * 8-byte aligned and every tensor's data starts at a multiple of its element
 * size (what zero-copy readers such as PyTorch's need).
 *
 * Errors name path: FVM_ERR_TYPE for a sequence, {T}@CLIENTS or function in
 * t (naming its path in the state); FVM_ERR_USAGE when v does not have type
 * t, a metadata key repeats, or a key, value or field name is NULL or not
 * UTF-8; FVM_ERR_NAME when two leaves get the same name; FVM_ERR_IO when the
 * file cannot be written (path is then unchanged). */
FVM_API fvm_status fvm_safetensors_save(const char *path, const fvm_value *v, const fvm_type *t, int nmeta,
                                        const char *const *meta, fvm_diag *d);

/* The same, but the file is left written and synced in its temporary, *out
 * (atomic.h), for the caller to commit (fvm_atomic_end) or drop
 * (fvm_atomic_abort): for steps that replace several files all or none. On
 * error nothing is left behind and *out is clear. */
FVM_API fvm_status fvm_safetensors_stage(const char *path, const fvm_value *v, const fvm_type *t, int nmeta,
                                         const char *const *meta, fvm_atomic *out, fvm_diag *d);

/* The bytes fvm_safetensors_save would write, in memory: *out (malloc'd,
 * the caller frees it) holds *len of them. Errors as fvm_safetensors_save's,
 * naming "a value". */
FVM_API fvm_status fvm_safetensors_bytes(const fvm_value *v, const fvm_type *t, int nmeta, const char *const *meta,
                                         void **out, size_t *len, fvm_diag *d);

/* A loaded, validated file. Owns its bytes and its strings. */
typedef struct fvm_safetensors fvm_safetensors;

/* One tensor of a file. */
typedef struct fvm_safetensors_entry {
    const char *name; /* owned by the file object */
    fvm_dtype dtype;
    fvm_dims shape; /* concrete; rank <= FVM_MAX_RANK */
    uint64_t begin, end; /* its bytes in the data buffer */
} fvm_safetensors_entry;

/* Reads and validates the whole file at path; *out (the caller frees it with
 * fvm_safetensors_free) holds its bytes. The file must be a regular file
 * (a FIFO, a device or a directory is refused by name, format/file.h) of
 * at most FVM_SAFETENSORS_MAX_FILE bytes; its header is read and checked
 * first, against the file's size, and then the data it describes. The
 * tensors' data need not be aligned (files of older fedvm versions are
 * not). Checked: the header length is at
 * least 2, at most FVM_SAFETENSORS_MAX_HEADER and within the file; the header
 * is UTF-8 JSON, an object, with no key twice (trailing spaces allowed);
 * "__metadata__", if present, is an object of strings; every other member
 * is an object with "dtype" (a name above; F16, BF16 and the other dtypes
 * fedvm lacks are errors), "shape" (at most FVM_MAX_RANK non-negative
 * integers, the tensor within FVM_MAX_TENSOR_BYTES) and "data_offsets"
 * ([begin, end] with end - begin = element count x dtype size); other
 * members of an entry are ignored, as the reference reader does. The
 * tensors must cover the data buffer exactly: no byte of it in two tensors,
 * none in no tensor. The header need not be padded.
 *
 * Every failure is one error naming the file and, where it is about one,
 * the tensor: FVM_ERR_IO (unreadable), FVM_ERR_SYNTAX (not JSON, with the
 * byte offset in the file), FVM_ERR_FORMAT (anything else above),
 * FVM_ERR_LIMIT (header or tensor too large), FVM_ERR_NOMEM. No input makes
 * it crash or read outside the file. *out is NULL on failure. */
FVM_API fvm_status fvm_safetensors_load(const char *path, fvm_safetensors **out, fvm_diag *d);

/* The same for len bytes in memory (copied; the caller keeps them); name is
 * the file name errors give (borrowed, copied). */
FVM_API fvm_status fvm_safetensors_parse(const char *name, const void *bytes, size_t len, fvm_safetensors **out,
                                         fvm_diag *d);

/* Frees f and everything it owns; NULL is a no-op. Values built from f do
 * not depend on it. */
FVM_API void fvm_safetensors_free(fvm_safetensors *f);

/* The file's bytes as they were read (*len of them; owned by f): what was
 * checked is what a digest of them covers. */
FVM_API const void *fvm_safetensors_image(const fvm_safetensors *f, size_t *len);

/* The metadata value of key, or NULL when absent (owned by f). */
FVM_API const char *fvm_safetensors_meta(const fvm_safetensors *f, const char *key);
/* The number of metadata pairs, and pair i (0 <= i < count) in key order
 * (strcmp); the strings are owned by f. */
FVM_API int fvm_safetensors_meta_count(const fvm_safetensors *f);
FVM_API void fvm_safetensors_meta_at(const fvm_safetensors *f, int i, const char **key, const char **value);

/* The number of tensors, and tensor i (0 <= i < count, owned by f) in the
 * order of their data in the buffer (for files fedvm writes, the order
 * fvm_safetensors_save describes). */
FVM_API int fvm_safetensors_count(const fvm_safetensors *f);
FVM_API const fvm_safetensors_entry *fvm_safetensors_entry_at(const fvm_safetensors *f, int i);
/* The index of the tensor named name, or -1. */
FVM_API int fvm_safetensors_find(const fvm_safetensors *f, const char *name);

/* A copy of tensor i as a new tensor (the caller releases it), in host byte
 * order. FVM_ERR_NOMEM or FVM_ERR_LIMIT on failure (*out zeroed). */
FVM_API fvm_status fvm_safetensors_tensor(const fvm_safetensors *f, int i, fvm_tensor *out, fvm_diag *d);

/* A new value of type t (the caller releases it) from the file: every leaf
 * of t must be a tensor of the file under its path name, of t's dtype, with
 * t's rank and dims (a '?' dim takes any size); placements are stripped as
 * in the value representation. Tensors of the file that t does not name
 * are an error too (a checkpoint of another program or state), listing
 * them. All problems are reported: FVM_ERR_NAME for missing or extra
 * tensors, FVM_ERR_TYPE for a wrong dtype or shape, or for a part of t that
 * cannot be saved. The tensors are copies: f may be freed afterwards. */
FVM_API fvm_status fvm_safetensors_value(const fvm_safetensors *f, const fvm_type *t, fvm_value **out, fvm_diag *d);

/* A new value (the caller releases it) equal to v, of type t, except that
 * the leaves the file has are replaced by its tensors; *replaced (optional)
 * gets how many. Unreplaced parts of v are shared (retained), not copied;
 * v is not changed. This serves initialising a state from a file that holds
 * only part of it, e.g. a model's weights but not the optimizer's state.
 *
 * File tensors are matched to leaves of v as a whole file, one way:
 *   1. full paths: when every tensor name of the file is a leaf path of v
 *      ("model.w1"), each goes to that leaf; otherwise
 *   2. below one top-level field F of v (a struct, possibly placed): when
 *      every name N of the file is such that "F.N" is a leaf path ("w1" for
 *      "model.w1", "layer.w" for "model.layer.w"), for exactly one F, name N
 *      goes to leaf "F.N". Two or more such F (say "model" and "ema" of the
 *      same structure) is an ambiguity error naming them; the file must
 *      then use full paths.
 * A file that fits neither (names that are no leaf, or a mix of forms) is
 * FVM_ERR_NAME listing the names that match nothing and a few of v's leaf
 * paths. Each matched tensor must have the dtype and shape of v's tensor
 * (FVM_ERR_TYPE otherwise; all are reported). A file with no tensors
 * replaces nothing. FVM_ERR_TYPE for a part of t that cannot be saved,
 * FVM_ERR_USAGE when v does not have type t. */
FVM_API fvm_status fvm_safetensors_overlay(const fvm_safetensors *f, fvm_value *v, const fvm_type *t, fvm_value **out,
                                           int *replaced, fvm_diag *d);

/* fvm_safetensors_overlay from the file at path onto *state (of type t),
 * which it replaces: the old value is released, *state is the new one (a
 * new reference). On error *state is left as it was. */
FVM_API fvm_status fvm_safetensors_overlay_file(const char *path, const fvm_type *t, fvm_value **state, int *replaced,
                                                fvm_diag *d);

#endif
