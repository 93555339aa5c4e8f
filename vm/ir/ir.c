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

fvm_status fvm_program_add_func(fvm_program *p, fvm_func *f)
{
    if (p->nfuncs + 1 > p->cap_funcs) {
        int cap = p->nfuncs < 8 ? 16 : p->nfuncs * 2;
        fvm_func **fs = fvm_arena_array(&p->arena, (size_t)cap, sizeof *fs);
        if (!fs)
            return FVM_ERR_NOMEM;
        if (p->nfuncs)
            memcpy(fs, p->funcs, (size_t)p->nfuncs * sizeof *fs);
        p->funcs = fs;
        p->cap_funcs = cap;
    }
    p->funcs[p->nfuncs++] = f;
    return FVM_OK;
}

fvm_alias *fvm_program_alias(const fvm_program *p, const char *name)
{
    for (int i = 0; i < p->naliases; i++)
        if (strcmp(p->aliases[i]->name, name) == 0)
            return p->aliases[i];
    return NULL;
}

fvm_hparam *fvm_program_hparam(const fvm_program *p, const char *name)
{
    for (int i = 0; i < p->nhparams; i++)
        if (strcmp(p->hparams[i]->name, name) == 0)
            return p->hparams[i];
    return NULL;
}

fvm_status fvm_ir_decode_func(const fvm_program *p, fvm_arena *a, fvm_func *f, fvm_diag *d)
{
    fvm_status first = FVM_OK;
    for (int i = 0; i < f->ninstrs; i++) {
        fvm_status s = p->decode_attrs(p, a, &f->instrs[i], d);
        if (s && !first)
            first = s;
    }
    return first;
}

void fvm_program_free(fvm_program *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nmodules; i++)
        for (int j = 0; j < p->modules[i]->nhparams; j++)
            fvm_tensor_release(&p->modules[i]->hparams[j].value);
    for (int i = 0; i < p->nfuncs; i++) {
        for (int j = 0; j < p->funcs[i]->ninstrs; j++)
            fvm_tensor_release(&p->funcs[i]->instrs[j].konst);
        const fvm_func *g = p->funcs[i]->inlined;
        for (int j = 0; g && j < g->ninstrs; j++)
            fvm_tensor_release(&g->instrs[j].konst);
    }
    fvm_arena_free(&p->arena);
    free(p);
}
