/* runtime_launch from a program: the training function runs on every rank,
 * the parent only launches and waits. */
#include <stdio.h>
#include <stdlib.h>

#include "ctrainer/ctrainer.h"

static int train(void *user)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    printf("train on rank %s with %s\n", rank ? rank : "?", (const char *)user);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    CtStatus st = runtime_launch(train, "user data", n);
    if (st != CT_OK) {
        fprintf(stderr, "launch_in_program: %s\n", ct_last_error());
        return 1;
    }
    if (!runtime_is_launched_rank()) printf("parent: all ranks finished\n");
    return 0;
}
