/* ir.c - program lookups and freeing. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

fvm_func *fvm_program_func(const fvm_program *p, const char *name)
{
    for (int i = 0; i < p->nfuncs; i++)
        if (strcmp(p->funcs[i]->name, name) == 0)
            return p->funcs[i];
    return NULL;
}

fvm_alias *fvm_program_alias(const fvm_program *p, const char *name)
{
    for (int i = 0; i < p->naliases; i++)
        if (strcmp(p->aliases[i]->name, name) == 0)
            return p->aliases[i];
    return NULL;
}

void fvm_program_free(fvm_program *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nfuncs; i++)
        for (int j = 0; j < p->funcs[i]->ninstrs; j++)
            fvm_tensor_release(&p->funcs[i]->instrs[j].konst);
    fvm_arena_free(&p->arena);
    free(p);
}
