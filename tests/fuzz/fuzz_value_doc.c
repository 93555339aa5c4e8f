/* fuzz_value_doc.c - libFuzzer target: a type and a document as an argument value ('--arg NAME=VALUE',
 * format/value_doc.c, the type string through vm/ir/types.c). The input is a flag byte (bit 0: the
 * document is YAML, else JSON), the type, a newline and the document. A value read is written back as
 * a document (JSON and YAML), which must read back to a value written as the same text. */
#include "fuzz_util.h"
#include "../../format/doc_io.h"

#include "../../vm/core/doc.h"
#include "../../format/value_doc.h"
#include "../../vm/ir/types.h"

/* The value as a document's text. */
static char *text_of(const fvm_value *v, const fvm_type *t, bool yaml, size_t *len)
{
    fvm_arena a = {0};
    fvm_diag d = {0};
    char *out = NULL;
    fvm_doc *doc = fvm_value_to_doc(&a, v, t);
    if (!doc)
        FUZZ_FAIL("a value read has no document");
    fvm_status s = yaml ? fvm_yaml_write(doc, &out, len, &d) : fvm_json_write(doc, &out, len, &d);
    if (s != FVM_OK)
        FUZZ_FAIL("a value's document cannot be written (%s): %s", fvm_status_name(s), d.n ? d.errs[0].msg : "");
    fvm_diag_clear(&d);
    fvm_arena_free(&a);
    return out;
}

static fvm_status read_value(const char *name, const char *text, size_t len, const fvm_type *t, fvm_value **v,
                             fvm_diag *d)
{
    fvm_arena a = {0};
    fvm_doc *doc = NULL;
    fvm_doc_src src = {.file = name, .text = text, .len = len};
    int64_t nclients = -1;
    *v = NULL;
    fvm_status s = fvm_doc_parse(&a, &src, &doc, d);
    if (s == FVM_OK)
        s = fvm_value_from_doc(doc, t, name, "", &nclients, v, d);
    fvm_arena_free(&a);
    return s;
}

/* Written as text, read back and written again: the same text. */
static void round_trip(const fvm_value *v, const fvm_type *t, bool yaml)
{
    size_t len = 0, len2 = 0;
    char *text = text_of(v, t, yaml, &len);
    fvm_diag d = {0};
    fvm_value *w = NULL;
    fvm_status s = read_value(yaml ? "again.yaml" : "again.json", text, len, t, &w, &d);
    if (s != FVM_OK) {
        char *e = d.n ? fvm_error_format(&d.errs[0]) : NULL;
        fprintf(stderr, "written:\n%s\n", text);
        FUZZ_FAIL("a value written as %s does not read back: %s", yaml ? "YAML" : "JSON", e ? e : "");
    }
    char *again = text_of(w, t, yaml, &len2);
    if (len2 != len || memcmp(again, text, len)) {
        fprintf(stderr, "written:\n%s\nread and written again:\n%s\n", text, again);
        FUZZ_FAIL("a value written as %s reads back as another", yaml ? "YAML" : "JSON");
    }
    free(again);
    free(text);
    fvm_value_release(w);
    fvm_diag_clear(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool yaml = data[0] & 1;
    const char *text = (const char *)data + 1;
    const char *nl = memchr(text, '\n', size - 1);
    if (!nl)
        return 0;
    char *type_text = strndup(text, (size_t)(nl - text));
    if (strlen(type_text) != (size_t)(nl - text)) { /* a NUL in the type */
        free(type_text);
        return 0;
    }
    fvm_arena a = {0};
    fvm_diag d = {0};
    const fvm_type *t = NULL;
    fvm_loc loc = {.file = "fuzz-type"};
    fvm_status s = fvm_type_parse(&a, type_text, NULL, &loc, &t, &d);
    fuzz_check_errors(s, &d, 1);
    if (s == FVM_OK) {
        char *canon = fvm_type_str(&a, t, false);
        const fvm_type *t2 = NULL;
        if (!canon || fvm_type_parse(&a, canon, NULL, &loc, &t2, &d) != FVM_OK || !fvm_type_equal(t, t2))
            FUZZ_FAIL("type '%s' is written as '%s', which is another type", type_text, canon ? canon : "");
        fvm_value *v = NULL;
        const char *rest = nl + 1;
        size_t len = size - 1 - (size_t)(rest - text);
        s = read_value(yaml ? "fuzz.yaml" : "fuzz.json", rest, len, t, &v, &d);
        fuzz_check_errors(s, &d, 1);
        if (s == FVM_OK) {
            round_trip(v, t, false);
            round_trip(v, t, true);
        }
        fvm_value_release(v);
    }
    fvm_arena_free(&a);
    fvm_diag_clear(&d);
    free(type_text);
    return 0;
}
