/* Threads per rank. N ranks on a machine each running an all-core OpenMP
 * pool oversubscribe it, and the parallel GEMM path is many times slower
 * with a busy core than with fewer threads: each rank gets its share. */
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime_internal.h"

void rt_set_rank_threads(int local_world_size)
{
    const char *user = getenv("OMP_NUM_THREADS");
    if (user && *user) return; /* the user's choice wins */
    /* a launcher that bound the rank to some cores already gave it its
     * share; otherwise the machine's cores are split evenly */
    int allowed = omp_get_num_procs();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = allowed < online
                ? allowed
                : (int)online / (local_world_size > 0 ? local_world_size : 1);
    omp_set_num_threads(n >= 1 ? n : 1);
}
