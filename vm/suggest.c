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
