/* suggest.c - edit-distance suggestions for misspelt names. */
#include "suggest.h"

#include <string.h>

/* Optimal-string-alignment distance: insertions, deletions, substitutions and
 * swaps of adjacent characters ("f23" is one edit from "f32"). */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return (size_t)-1;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

void fvm_suggest_init(fvm_suggest *s, const char *word)
{
    s->word = word;
    s->best = NULL;
    size_t l = strlen(word) / 3;
    s->best_dist = (l > 1 ? l : 1) + 1; /* strictly below this */
}

void fvm_suggest_add(fvm_suggest *s, const char *candidate)
{
    size_t d = distance(s->word, candidate);
    if (d < s->best_dist && d > 0) {
        s->best = candidate;
        s->best_dist = d;
    }
}

/* Names from the systems fedvm's users come from, with the fedvm op of the
 * same meaning: TFF, DrJAX/FAX, JAX's collectives, NumPy and TensorFlow. */
static const struct {
    const char *name, *op, *who;
} synonyms[] = {
    {"federated_avg", "federated_mean", "an average of client values"},
    {"federated_average", "federated_mean", "an average of client values"},
    {"federated_weighted_avg", "federated_weighted_mean", "a weighted average of client values"},
    {"reduce_mean", "federated_mean", "DrJAX's reduce_mean; a local mean is 'mean'"},
    {"reduce_sum", "federated_sum", "DrJAX's reduce_sum; a local sum is 'sum'"},
    {"reduce_weighted_mean", "federated_weighted_mean", "DrJAX's reduce_weighted_mean"},
    {"broadcast", "federated_broadcast", "DrJAX's broadcast; broadcasting a tensor's shape is 'broadcast_to'"},
    {"map_fn", "federated_map", "DrJAX's map_fn"},
    {"psum", "federated_sum", "JAX's psum across devices"},
    {"pmean", "federated_mean", "JAX's pmean across devices"},
    {"pmax", "federated_max", "JAX's pmax across devices"},
    {"pmin", "federated_min", "JAX's pmin across devices"},
    {"federated_reduce", "federated_aggregate", "TFF's older federated_reduce"},
    {"federated_secure_mod_sum", "federated_secure_modular_sum", "a secure sum modulo a modulus"},
    {"secure_sum", "federated_secure_sum", "TFF's federated_secure_sum (values in [0, max_input])"},
    {"dot", "matmul", "NumPy's dot"},
    {"einsum", "matmul", "matrix products"},
    {"concatenate", "concat", "NumPy's concatenate"},
    {"where", "select", "NumPy's where"},
    {"floor_divide", "floor_div", "NumPy's floor_divide"},
    {"remainder", "mod", "NumPy's remainder"},
    {"fmod", "mod", "its remainder has the divisor's sign, C's fmod the dividend's"},
    {"clip_by_norm", "clip_by_global_norm", "TensorFlow's clipping by norm"},
    {"reduce_max", "max", "TensorFlow's reduce_max"},
    {"reduce_min", "min", "TensorFlow's reduce_min"},
    {"while_loop", "while", "JAX's while_loop"},
    {"fori_loop", "fori", "JAX's fori_loop"},
    {"foldl", "sequence_reduce", "a reduction over a sequence"},
    {"take", "gather", "NumPy's take; the first n elements of a sequence are sequence_take"},
    {"skip", "sequence_skip", "tf.data.Dataset.skip"},
    {"filter", "sequence_filter", "tf.data.Dataset.filter"},
    {"shape", "dim", "one axis's size, as tf.shape(x)[axis]"},
};

const char *fvm_suggest_synonym(const char *name, const char **why)
{
    for (size_t i = 0; i < sizeof synonyms / sizeof *synonyms; i++)
        if (!strcmp(name, synonyms[i].name)) {
            if (why)
                *why = synonyms[i].who;
            return synonyms[i].op;
        }
    return NULL;
}
