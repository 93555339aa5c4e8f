/* plan_form.h - a round (an iterative process's 'next') in TFF's round forms, as fedvm programs (format/PLANS.md).
 *
 * Both forms are written as one self-contained program: the source
 * program's types and functions, the form's parts as generated functions
 * named "<fn>.<part>", the planned function rewritten to run them, and a
 * top-level "form" member naming the parts. `fedvm run` runs it and must
 * give what the source gives. A function that cannot be put in the form
 * (a second broadcast that depends on an aggregate, a result at the
 * clients, ...) is an error naming the instructions at fault. */
#ifndef FVM_PLAN_FORM_H
#define FVM_PLAN_FORM_H

#include <stddef.h>

#include "../ir/ir.h"
#include "plan.h"

/* The fvm_plan_writers of the two forms, for the function
 * fvm_plan_entry(p, o->fn) picks (o may be NULL), which must be federated.
 * *out: the JSON text (malloc'd; the caller frees it). p must be checked.
 *
 * MapReduce form: prepare, work, zero, accumulate, merge, report, update
 * (local functions) and the secure sums' bit widths. */
fvm_status fvm_plan_mapreduce(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len, fvm_diag *d);

/* Distribute-Aggregate form: server_prepare, server_to_client_broadcast,
 * client_work, client_to_server_aggregation, server_result (federated
 * functions, each at one placement; the broadcast and aggregation stages
 * only intrinsics). */
fvm_status fvm_plan_distribute_aggregate(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len,
                                         fvm_diag *d);

/* fedplan's writer (an fvm_plan_writer): the cross-device plan of the
 * iterative process's next (o->fn may name it; it must be 'next' of a
 * program with 'initialize'). A round that has no MapReduce form, a server
 * input other than the state and the round key, or a value exchanged
 * between server and devices that safetensors cannot hold (a sequence, an
 * unknown dimension) is refused with its location and the reason. */
fvm_status fvm_plan_cross_device(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len, fvm_diag *d);

#endif
