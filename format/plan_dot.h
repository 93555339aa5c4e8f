/* plan_dot.h - the 'dot' plan: a function's dataflow as a Graphviz graph, SERVER and CLIENTS values as clusters.
 *
 * format/PLANS.md describes the picture: one node per parameter, per
 * instruction and for the result; the cluster of a node is the placement of
 * its value's checked type; federated intrinsics are filled, those that move
 * values between placements are hexagons; edges that cross placements are
 * drawn bold. Every string taken from the program is escaped, and the output
 * depends only on the program (nodes and edges in program order). */
#ifndef FVM_PLAN_DOT_H
#define FVM_PLAN_DOT_H

#include <stdio.h>

#include "../vm/transform/plan.h"

/* The fvm_plan_writer of format "dot": the dataflow of the function
 * fvm_plan_entry(p, o->fn) picks (o may be NULL) as DOT text in *out
 * (malloc'd; the caller frees it). p must be checked. */
fvm_status fvm_plan_dot(const fvm_program *p, const fvm_plan_opts *o, char **out, size_t *len, fvm_diag *d);

/* Writes s to f as the inside of a DOT double-quoted label: '"' and '\'
 * escaped (so "\n", "\l" and "\N" in s stay literal), control characters
 * and bytes that are not UTF-8 as visible escapes ("\n", "\x01"). */
void fvm_plan_dot_escape(FILE *f, const char *s);

#endif
