/* Heap entry points with allocation-failure injection (mem.h). */
#include <stdlib.h>

#include "mem.h"

static _Thread_local int64_t fail_at; /* 0: disarmed */
static _Thread_local int64_t counted;

bool ct_alloc_injected(void)
{
    if (__builtin_expect(fail_at == 0, 1)) return false;
    return ++counted == fail_at;
}

void ct_alloc_fail_at(int64_t n)
{
    fail_at = n > 0 ? n : 0;
    counted = 0;
}

int64_t ct_alloc_counted(void)
{
    return counted;
}

void *ct_malloc(size_t nbytes)
{
    return ct_alloc_injected() ? NULL : malloc(nbytes);
}

void *ct_calloc(size_t n, size_t size)
{
    return ct_alloc_injected() ? NULL : calloc(n, size);
}

void *ct_realloc(void *p, size_t nbytes)
{
    return ct_alloc_injected() ? NULL : realloc(p, nbytes);
}
