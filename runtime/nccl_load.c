/* Finding and opening the NCCL module (nccl_module.h) on first use.
 *
 * Where it is looked for, in order:
 *   1. $CTRAINER_NCCL_MODULE, when set (then only there);
 *   2. the folder of the object holding this code (libctrainer.so's, or the
 *      program's when it links libctrainer statically);
 *   3. the folders the build put it in (CTRAINER_NCCL_MODULE_DIRS).
 * A candidate with no file is skipped; one that exists but does not load
 * (libnccl or the CUDA runtime missing) ends the search with dlerror(). A
 * failure is remembered: every later NCCL collective reports the same
 * reason. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm_nccl.h"

#ifndef CTRAINER_NCCL_MODULE_DIRS
#define CTRAINER_NCCL_MODULE_DIRS ""
#endif

static const CtNcclHost nccl_host = {.abi = CT_NCCL_MODULE_ABI, .error = ct_error};

static struct {
    pthread_once_t once;
    const CtNcclModule *module;
    char why[2048];
} loaded = {.once = PTHREAD_ONCE_INIT};

static void why_add(const char *fmt, const char *a, const char *b)
{
    size_t len = strlen(loaded.why);
    if (len >= sizeof loaded.why - 1) return;
    snprintf(loaded.why + len, sizeof loaded.why - len, "%s", len ? "; " : "");
    len = strlen(loaded.why);
    snprintf(loaded.why + len, sizeof loaded.why - len, fmt, a, b);
}

/* 1: loaded; 0: no file at path; -1: there but unusable (noted). */
static int open_at(const char *path)
{
    if (access(path, F_OK) != 0) {
        why_add("%.1000s%s: no such file", path, "");
        return 0;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        why_add("%.1000s%s", dlerror(), "");
        return -1;
    }
    CtNcclModuleEntry entry;
    *(void **)&entry = dlsym(h, CT_NCCL_MODULE_ENTRY);
    const CtNcclModule *m = entry ? entry(&nccl_host) : NULL;
    if (!m || m->abi != CT_NCCL_MODULE_ABI) {
        why_add(
            "%.1000s: not a ctrainer NCCL module of this version (no %s or another ABI)",
            path, CT_NCCL_MODULE_ENTRY);
        dlclose(h);
        return -1;
    }
    loaded.module = m;
    return 1;
}

/* Tries the module file in the folder dir[0, len). */
static int open_in(const char *dir, size_t len)
{
    char path[4096];
    if (len == 0 || len + sizeof CT_NCCL_MODULE_FILE + 1 > sizeof path) return 0;
    snprintf(path, sizeof path, "%.*s/%s", (int)len, dir, CT_NCCL_MODULE_FILE);
    return open_at(path);
}

static void search(void)
{
    const char *env = getenv("CTRAINER_NCCL_MODULE");
    if (env && env[0]) {
        (void)open_at(env);
        return;
    }
    int r = 0;
    Dl_info self;
    if (dladdr((void *)&nccl_host, &self) && self.dli_fname) {
        const char *slash = strrchr(self.dli_fname, '/');
        if (slash) r = open_in(self.dli_fname, (size_t)(slash - self.dli_fname));
    }
    for (const char *d = CTRAINER_NCCL_MODULE_DIRS; r == 0 && *d;) {
        size_t len = strcspn(d, ":");
        r = open_in(d, len);
        d += len + (d[len] == ':');
    }
    if (r == 0 && CTRAINER_NCCL_MODULE_DIRS[0] == '\0')
        why_add("%s%s",
                "this build of ctrainer has no NCCL module (configure with "
                "-DCTRAINER_NCCL=ON)",
                "");
}

const CtNcclModule *rt_nccl_module(int rank)
{
    pthread_once(&loaded.once, search);
    if (!loaded.module)
        ct_error(
            CT_ERR_UNSUPPORTED,
            "rank %d: NCCL collectives of CUDA tensors: the NCCL module could not be "
            "loaded: %s",
            rank, loaded.why);
    return loaded.module;
}
