/* fuzz_ir_json.c - libFuzzer target: bytes as a JSON program through the loader and the checker;
 * a program that checks is written in canonical JSON and YAML, each of which must load, check and
 * write back to the same text (fuzz_ir_yaml.c is the same target for YAML input). */
#include "fuzz_util.h"

#include "../../vm/fedvm.h"

#ifndef FUZZ_IR_YAML
#define FUZZ_IR_YAML 0
#endif

/* Included files resolve beside the input: the programs' own directory, so
 * "lib/optim.json" and "models/mlp_2nn.json" are there to include. */
#ifndef FUZZ_REPO
#define FUZZ_REPO "."
#endif
#define FUZZ_PROGRAMS FUZZ_REPO "/programs"

static fvm_program *load(const char *name, const char *text, size_t len, fvm_diag *d)
{
    fvm_program *p = NULL;
    fvm_status s = fvm_program_load_text(name, text, len, &p, d);
    fuzz_check_errors(s, d, 1);
    if (s != FVM_OK && p && !p->load_errors)
        FUZZ_FAIL("the load failed but the program does not say so");
    return p;
}

/* The canonical text of p's root module, which must load and check again and
 * be its own canonical text. */
static char *canonical(const fvm_program *p, bool yaml, size_t *len)
{
    fvm_diag d = {0};
    char *text = NULL;
    fvm_status s = fvm_module_write(p->root, yaml, &text, len, &d);
    if (s != FVM_OK) {
        fuzz_check_errors(s, &d, 0);
        if (s != FVM_ERR_NOMEM && s != FVM_ERR_LIMIT)
            FUZZ_FAIL("a program that checks cannot be written (%s): %s", fvm_status_name(s), d.n ? d.errs[0].msg : "");
        fvm_diag_clear(&d);
        return NULL;
    }
    const char *name = yaml ? FUZZ_PROGRAMS "/canonical.yaml" : FUZZ_PROGRAMS "/canonical.json";
    fvm_program *q = load(name, text, *len, &d);
    if (!q || fvm_compile(q, &d) != FVM_OK) {
        char *e = d.n ? fvm_error_format(&d.errs[0]) : NULL;
        fprintf(stderr, "canonical %s text:\n%s\n", yaml ? "YAML" : "JSON", text);
        FUZZ_FAIL("the canonical %s text does not load and check: %s", yaml ? "YAML" : "JSON", e ? e : "");
    }
    char *again = NULL;
    size_t again_len = 0;
    if (fvm_module_write(q->root, yaml, &again, &again_len, &d) != FVM_OK || again_len != *len ||
        memcmp(again, text, *len)) {
        fprintf(stderr, "canonical:\n%s\nwritten again:\n%s\n", text, again ? again : "(nothing)");
        FUZZ_FAIL("the canonical %s text is not its own canonical text", yaml ? "YAML" : "JSON");
    }
    free(again);
    fvm_program_free(q);
    fvm_diag_clear(&d);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fvm_diag d = {0};
    const char *name = FUZZ_IR_YAML ? FUZZ_PROGRAMS "/fuzz.yaml" : FUZZ_PROGRAMS "/fuzz.json";
    fvm_program *p = load(name, (const char *)data, size, &d);
    if (p) {
        fvm_status s = fvm_compile(p, &d);
        fuzz_check_errors(s, &d, 0);
        if (s == FVM_OK && !p->load_errors) {
            size_t jlen = 0, ylen = 0;
            char *json = canonical(p, false, &jlen), *yaml = canonical(p, true, &ylen);
            /* The YAML text, loaded, is the same program: its JSON is the JSON one. */
            if (json && yaml) {
                fvm_diag e = {0};
                fvm_program *q = load(FUZZ_PROGRAMS "/canonical.yaml", yaml, ylen, &e);
                char *from_yaml = NULL;
                size_t len = 0;
                if (!q || fvm_module_write(q->root, false, &from_yaml, &len, &e) != FVM_OK || len != jlen ||
                    memcmp(from_yaml, json, jlen)) {
                    fprintf(stderr, "JSON:\n%s\nYAML:\n%s\nJSON of the YAML:\n%s\n", json, yaml,
                            from_yaml ? from_yaml : "(nothing)");
                    FUZZ_FAIL("the canonical YAML is another program than the canonical JSON");
                }
                free(from_yaml);
                fvm_program_free(q);
                fvm_diag_clear(&e);
            }
            free(json);
            free(yaml);
        }
    }
    fvm_program_free(p);
    fvm_diag_clear(&d);
    return 0;
}
