/* wire.h - runtime values and diagnostics as bytes, for sending them between the processes of a run (the mpi backend's own encoding; internal).
 *
 * The layout is the processes' own (host byte order, no padding): it is for
 * processes of one run on machines of one kind (a distributed backend's
 * ranks), not a file format, so it lives beside the backend in exec rather
 * than in format/ (docs/ARCHITECTURE.md). A value is a tag byte, then
 *   tensor:        dtype (1 byte), rank (1 byte), rank dims (int64), the
 *                  elements in C order (a bool is the byte 0 or 1);
 *   struct, list-stored sequence, {T}@CLIENTS:
 *                  n (int64), then n values (members read on demand are read
 *                  and written out);
 *   column-stored sequence: n (int64), then its columns as one value: a
 *                  tensor or a struct (of structs) of tensors, each with a
 *                  leading axis of n;
 *   none:          the tag alone (a NULL value).
 * A diagnostics list is its count and dropped count (int32), then per error
 * the code (1 byte), line and col (int32), file, pointer and message (each
 * a uint32 length, 0xffffffff for NULL, and its bytes). Decoding checks
 * every count and size against the bytes it has: bad bytes give an error,
 * never a read past the end or a huge allocation. */
#ifndef FVM_WIRE_H
#define FVM_WIRE_H

#include "../core/bytebuf.h"
#include "../ir/value.h"

/* Appends v (borrowed; NULL allowed) to b. Fails when out of memory or when
 * reading a member of a {T}@CLIENTS value read on demand fails (errors in d);
 * b's length is then unspecified. */
fvm_status fvm_wire_put_value(fvm_bytes *b, const fvm_value *v, fvm_diag *d);

/* Reads one value at *at of the len bytes at p into *out (a new reference,
 * NULL for none) and moves *at past it. FVM_ERR_FORMAT in d for bytes that
 * are not a value. */
fvm_status fvm_wire_get_value(const unsigned char *p, size_t len, size_t *at, fvm_value **out, fvm_diag *d);

/* Appends the errors of src (borrowed) to b. */
fvm_status fvm_wire_put_diag(fvm_bytes *b, const fvm_diag *src, fvm_diag *d);

/* Reads a diagnostics list at *at and appends its errors to into (into and
 * d may be the same list). */
fvm_status fvm_wire_get_diag(const unsigned char *p, size_t len, size_t *at, fvm_diag *into, fvm_diag *d);

#endif
