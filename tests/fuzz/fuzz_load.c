/* fuzz_load.c - libFuzzer target: arbitrary bytes through the JSON or YAML loader, the checker and
 * the canonical writer. Build: make fuzz (needs clang with its sanitizer runtime). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../vm/fedvm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* The first byte picks the syntax, so one corpus exercises both readers. */
    const char *name = (data[0] & 1) ? "fuzz.yaml" : "fuzz.json";
    fvm_diag d = {0};
    fvm_program *p = NULL;
    fvm_program_load_text(name, (const char *)data + 1, size - 1, &p, &d);
    if (p && fvm_check(p, &d) == FVM_OK) {
        char *text = NULL;
        size_t len = 0;
        if (fvm_module_write(p->root, data[0] & 2, &text, &len, &d) == FVM_OK) {
            fvm_program *q = NULL;
            /* The canonical form must load and check again. */
            if (fvm_program_load_text((data[0] & 2) ? "again.yaml" : "again.json", text, len, &q, &d) != FVM_OK ||
                fvm_check(q, &d) != FVM_OK)
                abort();
            fvm_program_free(q);
        }
        free(text);
    }
    fvm_program_free(p);
    fvm_diag_clear(&d);
    return 0;
}
