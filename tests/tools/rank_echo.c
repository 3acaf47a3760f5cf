/* A trivial program for launch tests: prints what its rank was given and
 * its network namespace, then exits with the status given by --exit (0 by
 * default). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v ? v : "unset";
}

int main(int argc, char **argv)
{
    int status = argc == 3 && strcmp(argv[1], "--exit") == 0 ? atoi(argv[2]) : 0;
    char ns[64] = "unknown";
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    ns[n > 0 ? n : 7] = '\0';
    printf(
        "rank %s of %s: seed %s, mixed_precision %s, use_cpu %s, threads %s, netns %s\n",
        env("OMPI_COMM_WORLD_RANK"), env("OMPI_COMM_WORLD_SIZE"), env("CTRAINER_SEED"),
        env("CTRAINER_MIXED_PRECISION"), env("CTRAINER_USE_CPU"), env("OMP_NUM_THREADS"),
        ns);
    return status;
}
