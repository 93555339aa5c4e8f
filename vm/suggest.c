/* suggest.c - edit-distance suggestions for misspelt names. */
#include "suggest.h"

#include <string.h>

static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
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
