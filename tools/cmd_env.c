/* ctrainer env: what a bug report needs, without loading CUDA (versions come
 * from the build and from /proc, devices from the NVIDIA driver's files). */
#include <cblas.h>
#include <cyaml/cyaml.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "cli.h"

/* The first line of a file that starts with prefix (after it), or NULL. */
static const char *file_line(const char *path, const char *prefix, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    const char *found = NULL;
    size_t plen = strlen(prefix);
    while (!found && fgets(buf, (int)n, f)) {
        if (strncmp(buf, prefix, plen) != 0) continue;
        buf[strcspn(buf, "\n")] = '\0';
        found = buf + plen + strspn(buf + plen, " \t:");
    }
    fclose(f);
    return found;
}

static void print_mpi(const RuntimeHost *h)
{
    if (!h->mpirun[0]) {
        printf("- mpirun: not found\n");
        return;
    }
    char cmd[RUNTIME_SETTING_MAX + 32], line[256] = "";
    snprintf(cmd, sizeof cmd, "'%s' --version 2>&1", h->mpirun);
    FILE *p = popen(cmd, "r");
    if (p) {
        if (!fgets(line, sizeof line, p)) line[0] = '\0';
        pclose(p);
    }
    line[strcspn(line, "\n")] = '\0';
    printf("- mpirun: %s (%s)\n", h->mpirun, line[0] ? line : "version unknown");
}

static void print_gpus(const RuntimeHost *h)
{
    char buf[256];
    const char *drv =
        file_line("/proc/driver/nvidia/version", "NVRM version", buf, sizeof buf);
    printf("- NVIDIA driver: %s\n", drv ? drv : "none");
    printf("- GPUs: %d\n", h->gpu_count);
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", e->d_name);
        const char *model = file_line(path, "Model", buf, sizeof buf);
        printf("  - %s: %s\n", e->d_name, model ? model : "unknown model");
    }
    if (d) closedir(d);
}

static void print_build(void)
{
    printf("- ctrainer version: %s\n", CTRAINER_VERSION);
    printf("- build: %s, compiler %s, sanitize '%s'\n", CTRAINER_BUILD_TYPE, __VERSION__,
           CTRAINER_SANITIZE_FLAGS);
    printf("- CUDA backend: %s\n", CTRAINER_CUDA_VERSION);
    printf("- cuDNN: not used by this build\n");
    printf("- NCCL: not used by this build\n");
    printf("- MPI collectives: %s\n", CTRAINER_MPI_STATE);
    printf("- BLAS: %s (%d threads)\n", openblas_get_config(),
           openblas_get_num_threads());
    printf("- libcyaml: %s\n", cyaml_version_str);
}

static void print_config(const char *given)
{
    char path[RUNTIME_SETTING_MAX + 1];
    bool exists = false;
    if (!cli_config_path(given, path, sizeof path, &exists)) return;
    printf("- config file: %s%s\n", path, exists ? "" : " (none)");
    FILE *f = exists ? fopen(path, "r") : NULL;
    char line[RUNTIME_SETTING_MAX + 2];
    while (f && fgets(line, sizeof line, f))
        if (line[0] != '#') printf("  %s", line);
    if (f) fclose(f);
    RuntimeSettings s;
    if (exists && runtime_config_load(path, &s) != CT_OK)
        printf("  (not valid: %s)\n", ct_last_error());
}

int cli_env(int argc, char **argv)
{
    const char *given = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "config_file")) {
            if (!(given = cli_value(argc, argv, &i))) return 2;
        } else {
            fprintf(stderr, "usage: ctrainer env [--config_file F]\n");
            return cli_is(argv[i], "help") && !strchr(argv[i], '=') ? 0 : 2;
        }
    }
    struct utsname u;
    RuntimeHost h;
    (void)runtime_host_probe(&h); /* a missing mpirun is reported below */
    ct_clear_error();
    printf("Copy and paste the text below in a bug report.\n\n");
    print_build();
    if (uname(&u) == 0) printf("- platform: %s %s %s\n", u.sysname, u.release, u.machine);
    char cpu[256];
    const char *model = file_line("/proc/cpuinfo", "model name", cpu, sizeof cpu);
    printf("- CPU: %s, %d usable cores\n", model ? model : "unknown", h.cpu_count);
    print_mpi(&h);
    print_gpus(&h);
    print_config(given);
    return 0;
}
