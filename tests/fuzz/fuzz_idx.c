/* fuzz_idx.c - libFuzzer target: bytes as an IDX file (Fashion-MNIST's format, format/idx.c), plain or
 * gzip-compressed; a tensor read must have the bytes its header promised. */
#include "fuzz_util.h"

#include "../../format/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_write(fuzz_path(path, sizeof path, "fuzz-idx"), data, size);
    fvm_diag d = {0};
    fvm_tensor t;
    fvm_status s = fvm_idx_read(path, &t, &d);
    fuzz_check_errors(s, &d, 1);
    if (s == FVM_OK) {
        if (t.shape.rank < 1 || t.shape.rank > FVM_MAX_RANK)
            FUZZ_FAIL("a tensor of rank %d", t.shape.rank);
        /* Plain files hold the header and exactly the data. */
        if (size >= 4 && data[0] == 0 && data[1] == 0 && fvm_tensor_bytes(&t) != size - 4 - 4 * (size_t)data[3])
            FUZZ_FAIL("%zu bytes of data from a file of %zu", fvm_tensor_bytes(&t), size);
        fvm_tensor_release(&t);
    }
    fvm_diag_clear(&d);
    return 0;
}
