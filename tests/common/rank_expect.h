/* Checks for the programs run under mpirun, where every rank checks its own
 * results: EXPECT(cond, fmt, ...) prints "rank R: FILE:LINE: check failed:
 * <message>" to stderr and counts the failure. The including program
 * defines `int R` (its rank) and `int failures` (exit non-zero when > 0). */
#ifndef CTRAINER_RANK_EXPECT_H
#define CTRAINER_RANK_EXPECT_H

#include <stdio.h>

#define EXPECT(cond, ...)                                                                \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "rank %d: %s:%d: check failed: ", R, __FILE__, __LINE__);    \
            fprintf(stderr, __VA_ARGS__);                                                \
            fprintf(stderr, "\n");                                                       \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

#endif
