/* The host-synchronisation counter (tensor.h, ct_host_sync_count). Per
 * thread: the training loop and its reads run on one thread. */
#include "internal.h"

static _Thread_local uint64_t host_syncs;

void ct_host_sync_note(void)
{
    host_syncs++;
}

uint64_t ct_host_sync_count(void)
{
    return host_syncs;
}
