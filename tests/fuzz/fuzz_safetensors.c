/* fuzz_safetensors.c - libFuzzer target: bytes as a safetensors file (format/safetensors.c). A file
 * that validates gives every tensor; when its metadata names a state type (fedvm.state, as in
 * checkpoints and cross-device states), its value of that type is built, overlaid on itself, saved
 * and loaded back (the same bits), and resumed from as a checkpoint (format/checkpoint.c). */
#include "fuzz_util.h"

#include <inttypes.h>
#include <sys/stat.h>

#include "../../format/checkpoint.h"
#include "../../format/safetensors.h"
#include "../../vm/ir/types.h"

static void same_value(const fvm_value *a, const fvm_value *b, const char *what)
{
    if (!fvm_value_identical(a, b))
        FUZZ_FAIL("%s is not the value of the file", what);
}

/* The value of state type t from f, and everything that must agree with it. */
static void state(const fvm_safetensors *f, const fvm_type *t)
{
    fvm_diag d = {0};
    fvm_value *v = NULL, *again = NULL;
    fvm_status s = fvm_safetensors_value(f, t, &v, &d);
    fuzz_check_errors(s, &d, 1);
    if (s == FVM_OK) {
        int replaced = -1;
        fvm_status o = fvm_safetensors_overlay(f, v, t, &again, &replaced, &d);
        if (o != FVM_OK || replaced != fvm_safetensors_count(f))
            FUZZ_FAIL("the file does not overlay the value read from it (%s, %d of %d tensors)", fvm_status_name(o),
                      replaced, fvm_safetensors_count(f));
        same_value(again, v, "the file overlaid on its own value");
        fvm_value_release(again);
        again = NULL;

        /* Saved and loaded again: the same value and metadata. */
        char path[512];
        fuzz_path(path, sizeof path, "again.safetensors");
        int nmeta = fvm_safetensors_meta_count(f);
        const char **meta = calloc((size_t)(2 * nmeta + 1), sizeof *meta);
        for (int i = 0; i < nmeta; i++)
            fvm_safetensors_meta_at(f, i, &meta[2 * i], &meta[2 * i + 1]);
        fvm_safetensors *g = NULL;
        if ((s = fvm_safetensors_save(path, v, t, nmeta, meta, &d)) != FVM_OK)
            FUZZ_FAIL("the value read from the file cannot be saved (%s): %s", fvm_status_name(s),
                      d.n ? d.errs[d.n - 1].msg : "");
        if ((s = fvm_safetensors_load(path, &g, &d)) != FVM_OK || (s = fvm_safetensors_value(g, t, &again, &d)))
            FUZZ_FAIL("a file fedvm saved does not read back (%s): %s", fvm_status_name(s),
                      d.n ? d.errs[d.n - 1].msg : "");
        same_value(again, v, "the value saved and loaded again");
        if (fvm_safetensors_meta_count(g) != nmeta)
            FUZZ_FAIL("the metadata saved and loaded again differs");
        for (int i = 0; i < nmeta; i++) {
            const char *k, *val;
            fvm_safetensors_meta_at(g, i, &k, &val);
            if (strcmp(k, meta[2 * i]) || strcmp(val, meta[2 * i + 1]))
                FUZZ_FAIL("metadata '%s' saved and loaded again differs", meta[2 * i]);
        }
        free(meta);
        fvm_safetensors_free(g);
        fvm_value_release(again);
        again = NULL;
    }
    fvm_value_release(v);
    fvm_diag_clear(&d);
}

/* The file as a training run's last checkpoint, resumed with the settings it records. */
static void checkpoint(const uint8_t *data, size_t size, const fvm_safetensors *f, const fvm_type *t)
{
    char dir[512], path[600];
    fuzz_path(dir, sizeof dir, "ckpt");
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/round-000007.safetensors", dir);
    fuzz_write(path, data, size);
    const char *seed = fvm_safetensors_meta(f, "fedvm.seed"), *per = fvm_safetensors_meta(f, "fedvm.clients_per_round");
    fvm_run_info run = {.seed = seed ? strtoull(seed, NULL, 10) : 0,
                        .clients_per_round = per ? strtoll(per, NULL, 10) : -1,
                        .program = "fuzz.json"};
    fvm_diag d = {0};
    fvm_value *v = NULL;
    int64_t round = -1;
    fvm_status s = fvm_checkpoint_last(dir, t, &run, &round, &v, &d);
    fuzz_check_errors(s, &d, 1);
    if (s == FVM_OK && round != 7)
        FUZZ_FAIL("resumed from round %" PRId64 ", not 7", round);
    fvm_value_release(v);
    fvm_diag_clear(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fvm_diag d = {0};
    fvm_safetensors *f = NULL;
    fvm_status s = fvm_safetensors_parse("fuzz.safetensors", data, size, &f, &d);
    fuzz_check_errors(s, &d, 1);
    if (s != FVM_OK) {
        fvm_diag_clear(&d);
        return 0;
    }
    for (int i = 0; i < fvm_safetensors_count(f); i++) {
        const fvm_safetensors_entry *e = fvm_safetensors_entry_at(f, i);
        if (fvm_safetensors_find(f, e->name) != i)
            FUZZ_FAIL("tensor '%s' is not found by its name", e->name);
        fvm_tensor x;
        if ((s = fvm_safetensors_tensor(f, i, &x, &d)) == FVM_OK) {
            if (fvm_tensor_bytes(&x) != e->end - e->begin)
                FUZZ_FAIL("tensor '%s' has %zu bytes, its entry %" PRIu64, e->name, fvm_tensor_bytes(&x),
                          e->end - e->begin);
            fvm_tensor_release(&x);
        }
        fuzz_check_errors(s, &d, 1);
    }
    const char *text = fvm_safetensors_meta(f, "fedvm.state");
    fvm_arena a = {0};
    const fvm_type *t = NULL;
    fvm_loc loc = {.file = "fuzz.safetensors"};
    if (text && fvm_type_parse(&a, text, NULL, &loc, &t, &d) == FVM_OK) {
        state(f, t);
        checkpoint(data, size, f, t);
    }
    fvm_arena_free(&a);
    fvm_safetensors_free(f);
    fvm_diag_clear(&d);
    return 0;
}
