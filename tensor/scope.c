/* Scopes: per-thread stack of tensor lists released together. */
#include <stdlib.h>

#include "internal.h"

struct CtScope {
    Tensor **items;
    size_t n, cap;
    CtScope *parent;
};

static _Thread_local CtScope *current;

CtScope *ct_scope_open(void)
{
    CtScope *s = ct_calloc(1, sizeof *s);
    if (!s) {
        ct_error(CT_ERR_OOM, "ct_scope_open: out of memory");
        return NULL;
    }
    s->parent = current;
    current = s;
    return s;
}

static void close_innermost(void)
{
    CtScope *s = current;
    current = s->parent;
    /* newest first: later tensors reference earlier ones, so this keeps
     * each release shallow */
    for (size_t i = s->n; i-- > 0;) tensor_free(s->items[i]);
    free(s->items);
    free(s);
}

void ct_scope_close(CtScope *s)
{
    if (!s) return;
    for (CtScope *c = current; c; c = c->parent) {
        if (c == s) {
            while (current != s) close_innermost();
            close_innermost();
            return;
        }
    }
}

size_t ct_scope_count(const CtScope *s)
{
    return s ? s->n : 0;
}

Tensor *ct_scope_adopt(Tensor *t)
{
    CtScope *s = current;
    if (!t || !s) return t;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        Tensor **items = ct_realloc(s->items, cap * sizeof *items);
        if (!items) {
            tensor_free(t);
            ct_error(CT_ERR_OOM, "scope: out of memory registering a tensor");
            return NULL;
        }
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = t;
    return t;
}

Tensor *ct_op_discard(Tensor *out)
{
    CtScope *s = current;
    if (!out) return NULL;
    if (!s) {
        tensor_free(out);
    } else if (s->n && s->items[s->n - 1] == out) {
        s->n--;
        tensor_free(out);
    }
    return NULL;
}
