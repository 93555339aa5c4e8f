/* plan.c - the list of plan formats and the choice of the function a plan is made of. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/core/suggest.h"
#include "../vm/core/doc.h"
#include "plan.h"
#include "plan_beam.h"
#include "plan_dot.h"
#include "../vm/transform/plan_form.h"
#include "xdev.h"

/* The one list of formats (PLANS.md describes each). */
const fvm_plan_format fvm_plan_formats[] = {
    {"dot", "a Graphviz picture of a function's dataflow", fvm_plan_dot},
    {"mapreduce", "TFF's MapReduce form, as a fedvm program", fvm_plan_mapreduce},
    {"distribute-aggregate", "TFF's Distribute-Aggregate form, as a fedvm program",
     fvm_plan_distribute_aggregate},
    {"cross-device", "a client phase and a server phase, for devices (fedvm device, fedvm server)",
     fvm_plan_cross_device},
    {"beam", "an Apache Beam pipeline (JavaScript) running the rounds with fedvm", fvm_plan_beam},
};
const int fvm_plan_nformats = (int)(sizeof fvm_plan_formats / sizeof fvm_plan_formats[0]);

const fvm_plan_format *fvm_plan_format_lookup(const char *name)
{
    for (int i = 0; name && i < fvm_plan_nformats; i++)
        if (!strcmp(fvm_plan_formats[i].name, name))
            return &fvm_plan_formats[i];
    return NULL;
}

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
