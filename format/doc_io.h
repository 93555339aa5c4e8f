/* doc_io.h - document trees from and to text: JSON (jansson) and YAML (libyaml), and the text files fedvm reads. */
#ifndef FVM_DOC_IO_H
#define FVM_DOC_IO_H

#include "../vm/core/doc.h"

/* Parse JSON text (jansson). On error records a FVM_ERR_SYNTAX with file:line:col
 * in d and returns it. Duplicate keys are errors; nesting deeper than
 * FVM_MAX_DEPTH collections is FVM_ERR_LIMIT. *out lives in arena a. */
FVM_API fvm_status fvm_json_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d);

/* Parse YAML text (libyaml, UTF-8, exactly one document) into the same tree.
 * Plain scalars are resolved by YAML 1.2's core schema (null, true/false, ints,
 * floats incl. .inf/.nan; see yaml_core.h); quoted and block scalars are
 * strings. Tags: !!str, !!int, !!float, !!bool, !!null, !!map, !!seq (either
 * form) and the non-specific "!"; any other tag is FVM_ERR_FORMAT. An alias
 * shares its anchored node (the tree becomes a DAG); the size with aliases
 * expanded is limited to FVM_MAX_DOC_NODES and the nesting, also through
 * aliases, to FVM_MAX_DEPTH collections (FVM_ERR_LIMIT). FVM_ERR_SYNTAX for bad
 * YAML or UTF-8 and undefined aliases; FVM_ERR_CYCLE for an alias inside its
 * own anchor; FVM_ERR_FORMAT for no or several documents, keys that are not
 * strings, duplicate keys, ints outside int64, NUL in a string. "<<" is an
 * ordinary key (no YAML 1.1 merge). Errors carry file:line:col. */
FVM_API fvm_status fvm_yaml_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d);

/* Writers (output malloc'd and NUL-terminated; caller frees; *out is NULL on
 * error; out_len may be NULL). A collection with 'flow' set is written on one
 * line, and so is everything inside it ([a, b] / {"k": v} in JSON, [a, b] /
 * {k: v} in YAML); others one member per line, indented by two spaces. Empty
 * collections are [] and {}. Reals use fvm_format_real; non-finite reals
 * become the strings "nan", "inf", "-inf" in JSON (readers accept those
 * wherever a float is expected) and .nan/.inf/-.inf in YAML. JSON escapes
 * U+0085, U+2028 and U+2029 too. YAML strings that would read back as
 * something else (true, 12, null, ~, "", yes/no/on/off, "{T}@CLIENTS", " x",
 * multi-line text, ...) are double-quoted. Both end with a newline. A shared
 * node is written at every reference. The tree is checked first: FVM_ERR_USAGE
 * for a NULL node, a non-string key, a string that is not UTF-8 or holds a
 * NUL; FVM_ERR_LIMIT past FVM_MAX_DEPTH or FVM_MAX_DOC_NODES. Anything the
 * readers return can be written and reads back fvm_doc_equal (from JSON, bar
 * non-finite reals, which come back as the strings above). */
FVM_API fvm_status fvm_json_write(const fvm_doc *doc, char **out, size_t *out_len, fvm_diag *d);
FVM_API fvm_status fvm_yaml_write(const fvm_doc *doc, char **out, size_t *out_len, fvm_diag *d);

/* Parse by file name: ".yaml"/".yml" use YAML, everything else JSON. */
FVM_API fvm_status fvm_doc_parse(fvm_arena *a, const fvm_doc_src *src, fvm_doc **out, fvm_diag *d);

/* The largest program, value (--arg @FILE), metrics file or list fedvm reads. */
#define FVM_MAX_TEXT_FILE ((1ull << 31) - 1)

/* Read a whole file into a malloc'd NUL-terminated buffer (caller frees): a
 * regular file of at most FVM_MAX_TEXT_FILE bytes (file.h's fvm_file_read;
 * a FIFO, a device or a directory is refused by name). */
FVM_API fvm_status fvm_read_file(const char *path, char **out_text, size_t *out_len, fvm_diag *d);

#endif
