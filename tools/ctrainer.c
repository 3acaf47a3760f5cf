/* ctrainer: configure, launch and describe ctrainer runs.
 *
 *     ctrainer config [--default] [--config_file F] [--force]
 *     ctrainer launch [options] PROGRAM [ARGS...]
 *     ctrainer env    [--config_file F]
 *     ctrainer plot   RUN.jsonl|RUN.csv [-o curves.svg]
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ctrainer <command> [options]\n"
            "\n"
            "commands:\n"
            "  config   write a config file (questions, or --default)\n"
            "  launch   run a training program on several processes (mpirun)\n"
            "  env      print versions, build options, devices and the config file\n"
            "  plot     draw the loss and metric curves of a MetricsLogger file (SVG)\n"
            "\n"
            "`ctrainer <command> --help` describes a command's options.\n");
}

bool cli_is(const char *arg, const char *name)
{
    if (strncmp(arg, "--", 2) != 0) return false;
    arg += 2;
    for (; *name; arg++, name++) {
        char a = *arg == '-' ? '_' : *arg;
        if (a != *name) return false;
    }
    return *arg == '\0' || *arg == '=';
}

const char *cli_value(int argc, char **argv, int *i)
{
    const char *eq = strchr(argv[*i], '=');
    if (eq) return eq + 1;
    if (*i + 1 < argc) return argv[++*i];
    fprintf(stderr, "ctrainer: error: %s needs a value\n", argv[*i]);
    return NULL;
}

bool cli_config_path(const char *given, char *buf, size_t size, bool *exists)
{
    struct stat st;
    if (given) {
        snprintf(buf, size, "%s", given);
    } else if (runtime_config_default_path(buf, size) != CT_OK) {
        cli_fail();
        return false;
    }
    *exists = stat(buf, &st) == 0;
    if (given && !*exists) {
        fprintf(stderr, "ctrainer: error: the config file %s does not exist\n", buf);
        return false;
    }
    return true;
}

int cli_fail(void)
{
    fprintf(stderr, "ctrainer: error: %s\n", ct_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ctrainer %s\n", CTRAINER_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "config") == 0) return cli_config(argc - 1, argv + 1);
    if (strcmp(argv[1], "launch") == 0) return cli_launch(argc - 1, argv + 1);
    if (strcmp(argv[1], "env") == 0) return cli_env(argc - 1, argv + 1);
    if (strcmp(argv[1], "plot") == 0) return cli_plot(argc - 1, argv + 1);
    fprintf(stderr, "ctrainer: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
