/* doc_read.c - text to a document tree by file name (JSON or YAML), and the text files fedvm reads. */
#include "doc_io.h"

#include <string.h>

#include "file.h"

fvm_status fvm_read_file(const char *path, char **out_text, size_t *out_len, fvm_diag *d)
{
    /* a regular file only: a FIFO without a writer would block for ever and
     * /dev/zero would be read to the cap */
    return fvm_file_read(path, "a program, a value or a list", FVM_MAX_TEXT_FILE, out_text, out_len, d);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

fvm_status fvm_doc_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d)
{
    if (src->file && (ends_with(src->file, ".yaml") || ends_with(src->file, ".yml")))
        return fvm_yaml_parse(a, src, out, d);
    return fvm_json_parse(a, src, out, d);
}
