/* The `ctrainer` command line tool: its subcommands and the helpers they
 * share. Every subcommand returns the process exit status. */
#ifndef CTRAINER_CLI_H
#define CTRAINER_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ctrainer/runtime.h"

int cli_config(int argc, char **argv);
int cli_launch(int argc, char **argv);
int cli_env(int argc, char **argv);
int cli_plot(int argc, char **argv);

/* Option parsing. argv[*i] is the current argument. When it is --name
 * (with '-' and '_' alike) returns true; cli_value then takes its value,
 * from "--name=VALUE" or the next argument (advancing *i). */
bool cli_is(const char *arg, const char *name);
/* The value of the option at argv[*i], or NULL (with a message on stderr)
 * when it has none. */
const char *cli_value(int argc, char **argv, int *i);
/* For a flag (an option without a value) that cli_is matched: true when
 * it was given one anyway ("--cpu=false", which must not read as --cpu),
 * after printing the usage error for subcommand cmd to stderr; the caller
 * then exits with status 2. */
static inline bool cli_flag_has_value(const char *cmd, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq) return false;
    fprintf(stderr,
            "ctrainer %s: %.*s is a flag and takes no value (got %s; see --help)\n", cmd,
            (int)(eq - arg), arg, arg);
    return true;
}

/* The config file to read: `given` when not NULL, else the default path.
 * *exists tells whether it is there; an explicit file must exist. Prints
 * the error and returns false on failure. */
bool cli_config_path(const char *given, char *buf, size_t size, bool *exists);

/* Prints "ctrainer: error: <last error>" to stderr and returns 1. */
int cli_fail(void);

#endif
