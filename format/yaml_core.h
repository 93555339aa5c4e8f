/* yaml_core.h - YAML 1.2 core-schema resolution of plain scalars, shared by the YAML reader and writer. */
#ifndef FVM_YAML_CORE_H
#define FVM_YAML_CORE_H

#include <stddef.h>

#include "../vm/core/doc.h"
#include "doc_io.h"

/* The kind a plain (unquoted, untagged) YAML scalar with these len bytes
 * resolves to under the core schema, as fvm_yaml_parse resolves it:
 * FVM_DOC_NULL   "", ~, null, Null, NULL
 * FVM_DOC_BOOL   true, True, TRUE, false, False, FALSE
 * FVM_DOC_INT    [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+
 * FVM_DOC_REAL   [-+]?(.[0-9]+|[0-9]+(.[0-9]*)?)([eE][-+]?[0-9]+)?,
 *                [-+]?.inf (also .Inf, .INF), .nan (also .NaN, .NAN)
 * FVM_DOC_STRING anything else.
 * Only the form is checked: an integer too big for int64 still gives
 * FVM_DOC_INT (the reader then refuses it). s need not be NUL-terminated. */
fvm_doc_kind fvm_yaml_plain_kind(const char *s, size_t len);

#endif
