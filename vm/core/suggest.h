/* suggest.h - "did you mean" suggestions for misspelt names. */
#ifndef FVM_SUGGEST_H
#define FVM_SUGGEST_H

#include <stddef.h>

#include "api.h"

/* Incremental search for the candidate closest to 'word' by edit distance.
 * Feed candidates with fvm_suggest_add; best is NULL unless some candidate is
 * within distance max(1, strlen(word)/3). Strings are borrowed. */
typedef struct fvm_suggest {
    const char *word;
    const char *best;
    size_t best_dist;
} fvm_suggest;

FVM_API void fvm_suggest_init(fvm_suggest *s, const char *word);
FVM_API void fvm_suggest_add(fvm_suggest *s, const char *candidate);

/* The fedvm op meant by a name from TFF, DrJAX, JAX, NumPy or TensorFlow
 * (federated_avg, reduce_mean, psum, dot, ...), or NULL; *why (when why is
 * not NULL) says what the name is. */
FVM_API const char *fvm_suggest_synonym(const char *name, const char **why);

#endif
