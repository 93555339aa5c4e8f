/* plans.c - the list of plan formats (see plans.h). */
#include "plans.h"

#include <stdlib.h>
#include <string.h>

#include "plan_beam.h"
#include "plan_dot.h"
#include "../vm/transform/plan_form.h"

/* beam: the cross-device plan, carried by the pipeline as data. A program
 * that keeps a state on each client has a plan, but no pipeline: Beam's
 * workers keep nothing of a client from one round to the next. */
static fvm_status plan_beam(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len, fvm_diag *d)
{
    char *plan = NULL;
    size_t n = 0;
    *out = NULL;
    fvm_status s = fvm_plan_cross_device(p, o, &plan, &n, d);
    const fvm_func *ic = fvm_program_func(p, "initialize_client");
    if (s == FVM_OK && ic)
        s = fvm_diag_add(d, FVM_ERR_USAGE, &ic->loc,
                         "this program keeps a state on each client (initialize_client), and a Beam pipeline's "
                         "workers keep nothing of a client from one round to the next: the pipeline has no "
                         "place for the clients' states. Deploy its cross-device plan ('--to cross-device') on "
                         "devices that keep their state files ('fedvm device --state')");
    if (s == FVM_OK)
        s = fvm_plan_beam(plan, n, out, len, d);
    free(plan);
    return s;
}

/* The one list of formats (PLANS.md describes each). */
const fvm_plan_format fvm_plan_formats[] = {
    {"dot", "a Graphviz picture of a function's dataflow", fvm_plan_dot},
    {"mapreduce", "TFF's MapReduce form, as a fedvm program", fvm_plan_mapreduce},
    {"distribute-aggregate", "TFF's Distribute-Aggregate form, as a fedvm program", fvm_plan_distribute_aggregate},
    {"cross-device", "a client phase and a server phase, for devices (fedvm device, fedvm server)",
     fvm_plan_cross_device},
    {"beam", "an Apache Beam pipeline (JavaScript) running the rounds with fedvm", plan_beam},
};
const int fvm_plan_nformats = (int)(sizeof fvm_plan_formats / sizeof fvm_plan_formats[0]);

const fvm_plan_format *fvm_plan_format_lookup(const char *name)
{
    for (int i = 0; name && i < fvm_plan_nformats; i++)
        if (!strcmp(fvm_plan_formats[i].name, name))
            return &fvm_plan_formats[i];
    return NULL;
}
