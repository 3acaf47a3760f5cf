/* The `ctrainer` command line tool: its subcommands and the helpers they
 * share. Every subcommand returns the process exit status. */
#ifndef CTRAINER_CLI_H
#define CTRAINER_CLI_H

#include <stdbool.h>
#include <stddef.h>

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

/* The config file to read: `given` when not NULL, else the default path.
 * *exists tells whether it is there; an explicit file must exist. Prints
 * the error and returns false on failure. */
bool cli_config_path(const char *given, char *buf, size_t size, bool *exists);

/* Prints "ctrainer: error: <last error>" to stderr and returns 1. */
int cli_fail(void);

#endif
