/* plan.c - the choice of the function a plan is made of. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/suggest.h"
#include "../core/doc.h"
#include "plan.h"

/* Where the program's functions are written: its "functions" object. */
static fvm_loc functions_loc(const fvm_program *p)
{
    fvm_loc loc = {0};
    if (!p->root)
        return loc;
    loc.file = p->root->path;
    const fvm_doc *funcs = p->root->root ? fvm_doc_get(p->root->root, "functions") : NULL;
    if (funcs) {
        loc.line = funcs->line;
        loc.col = funcs->col;
        loc.ptr = "/functions";
    }
    return loc;
}

/* The names of the functions the program's own file defines, comma-separated
 * (malloc'd; NULL when out of memory). */
static char *own_functions(const fvm_program *p)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        return NULL;
    for (int i = 0; p->root && i < p->root->nfuncs; i++)
        fprintf(f, "%s%s", i ? ", " : "", p->root->funcs[i]->name);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

fvm_status fvm_plan_entry(const fvm_program *p, const char *fn, const fvm_func **out, fvm_diag *d)
{
    *out = fvm_program_func(p, fn ? fn : "next");
    if (!*out && !fn)
        *out = fvm_program_func(p, "main");
    if (*out)
        return FVM_OK;
    fvm_loc loc = functions_loc(p);
    if (fn) {
        fvm_suggest s;
        fvm_suggest_init(&s, fn);
        for (int i = 0; i < p->nfuncs; i++)
            fvm_suggest_add(&s, p->funcs[i]->name);
        if (s.best)
            return fvm_diag_add(d, FVM_ERR_NAME, &loc, "no function '%s'; did you mean '%s'?", fn, s.best);
    }
    char *names = own_functions(p);
    if (!names)
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    if (!*names) {
        free(names);
        names = strdup("(none)");
        if (!names)
            return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    fvm_status s;
    if (fn)
        s = fvm_diag_add(d, FVM_ERR_NAME, &loc, "no function '%s'; expected one of the program's functions: %s", fn,
                         names);
    else
        s = fvm_diag_add(d, FVM_ERR_NAME, &loc,
                         "no function 'next' or 'main' to make the plan of; name one of the program's functions: %s",
                         names);
    free(names);
    return s;
}
