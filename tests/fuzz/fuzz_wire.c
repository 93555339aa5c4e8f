/* fuzz_wire.c - libFuzzer target: bytes as the MPI backend's wire format (format/wire.c), read as a value
 * and as a diagnostics list. A value read must be written back to the same bytes, read again to an
 * identical value (every element of every sequence visited), and a list of errors read must be
 * written back to the same bytes. */
#include "fuzz_util.h"

#include "../../vm/exec/wire.h"

static void value(const uint8_t *data, size_t size)
{
    fvm_diag d = {0};
    fvm_value *v = NULL, *w = NULL;
    size_t at = 0;
    fvm_status s = fvm_wire_get_value(data, size, &at, &v, &d);
    fuzz_check_errors(s, &d, 0);
    if (s == FVM_OK) {
        if (at == 0 || at > size)
            FUZZ_FAIL("a value read from %zu of %zu bytes", at, size);
        fvm_bytes b = {0};
        if ((s = fvm_wire_put_value(&b, v, &d)) != FVM_OK)
            FUZZ_FAIL("a value read cannot be written (%s)", fvm_status_name(s));
        if (b.len != at || memcmp(b.data, data, at))
            FUZZ_FAIL("a value read from %zu bytes is written as %zu other bytes", at, b.len);
        size_t at2 = 0;
        if ((s = fvm_wire_get_value(b.data, b.len, &at2, &w, &d)) != FVM_OK || at2 != b.len)
            FUZZ_FAIL("a value written does not read back (%s)", fvm_status_name(s));
        if ((v != NULL) != (w != NULL) || (v && !fvm_value_identical(v, w)))
            FUZZ_FAIL("a value written reads back as another value");
        fvm_bytes_free(&b);
    }
    fvm_value_release(v);
    fvm_value_release(w);
    fvm_diag_clear(&d);
}

static void diag(const uint8_t *data, size_t size)
{
    fvm_diag d = {0}, got = {0};
    size_t at = 0;
    fvm_status s = fvm_wire_get_diag(data, size, &at, &got, &d);
    fuzz_check_errors(s, &d, 0);
    if (s == FVM_OK) {
        fvm_bytes b = {0};
        if ((s = fvm_wire_put_diag(&b, &got, &d)) != FVM_OK)
            FUZZ_FAIL("errors read cannot be written (%s)", fvm_status_name(s));
        /* Messages are read as C strings: a NUL inside one ends it, so the
         * bytes agree only without NULs. */
        size_t at2 = 0;
        fvm_diag again = {0};
        if ((s = fvm_wire_get_diag(b.data, b.len, &at2, &again, &d)) != FVM_OK || at2 != b.len || again.n != got.n ||
            again.dropped != got.dropped)
            FUZZ_FAIL("errors written do not read back (%s)", fvm_status_name(s));
        for (int i = 0; i < got.n; i++)
            if (again.errs[i].code != got.errs[i].code || strcmp(again.errs[i].msg, got.errs[i].msg))
                FUZZ_FAIL("error %d written reads back as another", i);
        fvm_diag_clear(&again);
        fvm_bytes_free(&b);
    }
    fvm_diag_clear(&got);
    fvm_diag_clear(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte picks what the rest is read as. */
    if (size < 1)
        return 0;
    if (data[0] & 1)
        diag(data + 1, size - 1);
    else
        value(data + 1, size - 1);
    return 0;
}
