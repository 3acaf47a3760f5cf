/* Threads per rank. N ranks on a machine each running an all-core OpenMP
 * pool oversubscribe it, and the parallel GEMM path is many times slower
 * with a busy core than with fewer threads: each rank gets its share. */
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime_internal.h"

void rt_set_rank_threads(int local_world_size, int sharers)
{
    const char *user = getenv("OMP_NUM_THREADS");
    if (user && *user) return; /* the user's choice wins */
    omp_set_num_threads(rt_rank_threads(
        omp_get_num_procs(), sysconf(_SC_NPROCESSORS_ONLN), local_world_size, sharers));
}
