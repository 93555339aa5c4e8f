/* stand-ins.c - what the WebAssembly build of fedvm device links instead of the libraries Emscripten lacks:
 * the SQLite datasets and YAML documents as clear errors (a device there reads its data from a .json file, one
 * member per client). Its CBLAS calls are those of the build without BLAS (vm/kernels/noblas/). */
#include <stdlib.h>
#include <string.h>

#include "../../format/data_bind.h"
#include "../../format/dataset.h"
#include "../../format/doc_io.h"

/* ---- datasets and YAML: not in this build ------------------------------------------------ */

static fvm_status missing(const char *what, const char *path, fvm_diag *d)
{
    fvm_loc loc = {.file = path};
    return fvm_diag_add(d, FVM_ERR_USAGE, &loc, "%s are not in the WebAssembly build; give the data as a .json file",
                        what);
}

fvm_status fvm_data_spec(const char *text, char **file, char **split, fvm_diag *d)
{
    *split = NULL;
    if (!(*file = strdup(text)))
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    return FVM_OK;
}

fvm_status fvm_data_bind(const char *path, const char *split, const char *param, const fvm_type *t, fvm_value **out,
                         fvm_diag *d)
{
    *out = NULL;
    return missing("SQLite datasets", path, d);
}

fvm_status fvm_dataset_open(const char *path, const char *split, fvm_dataset **out, fvm_diag *d)
{
    *out = NULL;
    return missing("SQLite datasets", path, d);
}

void fvm_dataset_close(fvm_dataset *ds)
{
    (void)ds;
}

fvm_status fvm_dataset_client(fvm_dataset *ds, int64_t i, const void **id, size_t *id_len, int64_t *examples,
                              fvm_diag *d)
{
    return missing("SQLite datasets", NULL, d);
}

int64_t fvm_dataset_find(fvm_dataset *ds, const void *id, size_t id_len)
{
    return -1;
}

fvm_status fvm_yaml_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d)
{
    *out = NULL;
    return missing("YAML documents", src->file, d);
}
