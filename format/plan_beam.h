/* plan_beam.h - the 'beam' plan: an iterative process as an Apache Beam pipeline for Beam's TypeScript SDK, run with fedvm (format/PLANS.md).
 *
 * The pipeline is one plain JavaScript file (CommonJS, no compile step):
 * a header holding the program's cross-device plan (xdev.h) as one string
 * literal, then the same driver and pipeline for every program
 * (format/beam_pipeline.js). Each round, the driver has 'fedvm server'
 * prepare the broadcast; the pipeline groups the round's clients into the
 * aggregation's blocks of 16, runs 'fedvm device --partial' once per block,
 * gathers the partials with a CombineFn and has 'fedvm server merge' merge
 * them in block order and update the state, so the results are those of
 * 'fedvm run' bit for bit. Nothing from the program is ever written as
 * code: names and the IR are data inside the escaped plan literal. */
#ifndef FVM_PLAN_BEAM_H
#define FVM_PLAN_BEAM_H

#include <stddef.h>

#include "../vm/transform/plan.h"

/* The pipeline that runs the cross-device plan 'plan' (n bytes of JSON,
 * fvm_plan_cross_device's), as JavaScript text in *out (malloc'd; the
 * caller frees it). Format "beam" (vm/transform/plans.c) is the cross-device
 * plan written so, so it refuses whatever the cross-device plan refuses. */
fvm_status fvm_plan_beam(const char *plan, size_t n, char **out, size_t *len, fvm_diag *d);

/* The n bytes of s as a JavaScript double-quoted string literal, quotes
 * included, in ASCII only and with JSON's escapes only (so it is a JSON
 * string too): '"' and '\' escaped, control characters as \n, \t, ... or
 * \u00XX, every other character beyond ASCII as \uXXXX (a surrogate pair
 * past U+FFFF), a byte that is not part of valid UTF-8 as \ufffd.
 * Evaluated, it is the text of s. malloc'd; NULL when out of memory. */
char *fvm_plan_js_string(const char *s, size_t n);

#endif
