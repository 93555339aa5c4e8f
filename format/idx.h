/* idx.h - reading IDX files (the MNIST / Fashion-MNIST image and label format), gzip-compressed or not. */
#ifndef FVM_IDX_H
#define FVM_IDX_H

#include "../vm/ir/tensor.h"

/* Reads an IDX file: two zero bytes, a type byte, the number of dims, each
 * dim as a big-endian uint32, then the values in C order (big-endian).
 * Types: 0x08 unsigned byte -> u8, 0x0C int32 -> i32, 0x0D float32 -> f32,
 * 0x0E float64 -> f64 (0x09 signed byte and 0x0B int16 have no fedvm dtype
 * and are errors). A gzip-compressed file (told by its magic bytes, whatever
 * its name) is inflated through zlib. *out is a new tensor of the file's shape owned by the
 * caller. Errors (FVM_ERR_IO unreadable, FVM_ERR_FORMAT bad header or a size
 * that does not match the dims, FVM_ERR_LIMIT too large) name the file. */
FVM_API fvm_status fvm_idx_read(const char *path, fvm_tensor *out, fvm_diag *d);

#endif
