/* fuzz_metrics.c - libFuzzer target: bytes as a metrics file (JSON lines, format/metrics.c). What it
 * reads must hold together: series found by name, rounds strictly increasing, and each series no
 * longer than the rounds read. */
#include "fuzz_util.h"

#include "../../format/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fvm_diag d = {0};
    fvm_metrics *m = NULL;
    fvm_status s = fvm_metrics_parse("fuzz.jsonl", (const char *)data, size, &m, &d);
    fuzz_check_errors(s, &d, 1);
    if (s == FVM_OK) {
        if (m->nseries == 0 || m->rounds == 0)
            FUZZ_FAIL("read with %zu series and %zu rounds", m->nseries, m->rounds);
        for (size_t i = 0; i < m->nseries; i++) {
            const fvm_series *x = &m->series[i];
            if (fvm_metrics_get(m, x->name) != x)
                FUZZ_FAIL("series '%s' is not found by its name", x->name);
            if (x->n > m->rounds)
                FUZZ_FAIL("series '%s' has %zu points in %zu rounds", x->name, x->n, m->rounds);
            for (size_t k = 1; k < x->n; k++)
                if (x->rounds[k] <= x->rounds[k - 1])
                    FUZZ_FAIL("series '%s': round %lld after %lld", x->name, (long long)x->rounds[k],
                              (long long)x->rounds[k - 1]);
        }
    }
    fvm_metrics_free(m);
    fvm_diag_clear(&d);
    return 0;
}
