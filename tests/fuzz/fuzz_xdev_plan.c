/* fuzz_xdev_plan.c - libFuzzer target: bytes as a cross-device plan (format/xdev.c, with its client and
 * server programs through the loader and the checker), both phases read. */
#include "fuzz_util.h"

#include "../../format/xdev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_write(fuzz_path(path, sizeof path, "plan.json"), data, size);
    fvm_diag d = {0};
    fvm_xdev_plan *plan = NULL;
    fvm_status s = fvm_xdev_open(path, FVM_XDEV_CLIENT | FVM_XDEV_SERVER, &plan, &d);
    fuzz_check_errors(s, &d, 1);
    if (s == FVM_OK && strlen(fvm_xdev_id(plan)) != 64)
        FUZZ_FAIL("a plan id of %zu characters", strlen(fvm_xdev_id(plan)));
    fvm_xdev_close(plan);
    fvm_diag_clear(&d);
    return 0;
}
