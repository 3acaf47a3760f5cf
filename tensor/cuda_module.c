/* Loading the CUDA backend module (tensor/cuda/module.h), and the CUDA
 * entry points of the library, which forward to it.
 *
 * The module is looked for, in order:
 *   1. $CTRAINER_CUDA_MODULE, when set (then only there);
 *   2. next to the object holding this code: libctrainer.so's folder, or the
 *      program's when it links libctrainer statically;
 *   3. the folders the build put it in (CTRAINER_CUDA_MODULE_DIRS: the
 *      build tree, then the install libdir).
 * A path where no file exists is skipped; a file that exists but does not
 * load (a missing or broken CUDA install) ends the search with dlerror().
 * The module stays loaded until the process exits.
 */
#ifdef CTRAINER_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda.h"
#include "cuda/module.h"

#ifndef CTRAINER_CUDA_MODULE_DIRS
#define CTRAINER_CUDA_MODULE_DIRS ""
#endif

static const CtCudaHost host = {
    .abi = CT_CUDA_MODULE_ABI,
    .error = ct_error,
    .last_status = ct_last_status,
    .backend_for = ct_backend_for,
    .backend_peek = ct_backend_peek,
    .dtype_size = ct_dtype_size,
    .dtype_name = ct_dtype_name,
    .f32_to_bf16 = ct_f32_to_bf16,
    .f32_to_f16 = ct_f32_to_f16,
    .tensor_numel = tensor_numel,
    .tensor_is_contiguous = tensor_is_contiguous,
    .tensor_retain = tensor_retain,
    .tensor_free = tensor_free,
    .backend_alloc = ct_backend_alloc,
    .backend_free = ct_backend_free,
    .deterministic = ct_deterministic,
    .allow_tf32 = ct_allow_tf32,
    .cudnn_benchmark = ct_cudnn_benchmark,
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const CtCudaModule *module; /* atomic; set once by load */
static char why[2048];             /* set by load when module stays NULL */
static size_t why_len;

static void note(const char *fmt, const char *a, const char *b)
{
    if (why_len >= sizeof why) return;
    int n = snprintf(why + why_len, sizeof why - why_len, fmt, a, b);
    if (n > 0) why_len += (size_t)n;
}

/* Opens the module at path: 1 loaded, 0 no file there, -1 failed (noted). */
static int try_open(const char *path)
{
    if (access(path, F_OK) != 0) {
        note("%s%s: no such file", why_len ? "; " : "", path);
        return 0;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        note("%s%s", why_len ? "; " : "", dlerror());
        return -1;
    }
    CtCudaModuleEntry entry;
    *(void **)&entry = dlsym(h, CT_CUDA_MODULE_ENTRY);
    const CtCudaModule *m = entry ? entry(&host) : NULL;
    if (!m || m->abi != CT_CUDA_MODULE_ABI) {
        note("%s%s: not a ctrainer CUDA module of this version (no " CT_CUDA_MODULE_ENTRY
             " or another ABI)",
             why_len ? "; " : "", path);
        dlclose(h);
        return -1;
    }
    __atomic_store_n(&module, m, __ATOMIC_RELEASE);
    return 1;
}

/* Tries CT_CUDA_MODULE_FILE in dir; see try_open. */
static int try_dir(const char *dir, size_t len)
{
    char path[4096];
    if (len == 0 || len + sizeof CT_CUDA_MODULE_FILE + 1 > sizeof path) return 0;
    snprintf(path, sizeof path, "%.*s/%s", (int)len, dir, CT_CUDA_MODULE_FILE);
    return try_open(path);
}

static void load(void)
{
    const char *env = getenv("CTRAINER_CUDA_MODULE");
    if (env && env[0]) {
        (void)try_open(env);
        return;
    }
    Dl_info info;
    int r = 0;
    if (dladdr((void *)&host, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash) r = try_dir(info.dli_fname, (size_t)(slash - info.dli_fname));
    }
    for (const char *d = CTRAINER_CUDA_MODULE_DIRS; r == 0 && *d;) {
        size_t len = strcspn(d, ":");
        r = try_dir(d, len);
        d += len + (d[len] == ':');
    }
    if (r == 0 && why_len == 0) note("%s%s", "no folder to look in", "");
}

const CtCudaModule *ct_cuda_module(void)
{
    pthread_once(&load_once, load);
    return module;
}

const char *ct_cuda_module_error(void)
{
    return ct_cuda_module() ? "" : why;
}

int ct_cuda_device_count(void)
{
    const CtCudaModule *m = ct_cuda_module();
    return m ? m->device_count() : 0;
}

bool ct_cuda_initialized(void)
{
    /* without loading it: a module that is not loaded initialised nothing */
    const CtCudaModule *m = __atomic_load_n(&module, __ATOMIC_ACQUIRE);
    return m && m->initialized();
}

const CtBackendIface *ct_cuda_iface(void)
{
    const CtCudaModule *m = ct_cuda_module();
    if (!m) {
        ct_error(CT_ERR_DEVICE, "cuda: the CUDA backend module could not be loaded: %s",
                 why);
        return NULL;
    }
    return m->iface();
}

CtStatus ct_cuda_select_device(int device)
{
    const CtCudaModule *m = ct_cuda_module();
    if (!m)
        return ct_error(CT_ERR_DEVICE,
                        "cuda:%d: the CUDA backend module could not be loaded: %s",
                        device, why);
    return m->select_device(device);
}

void *ct_cuda_stream(const CtBackend *be)
{
    const CtCudaModule *m = ct_cuda_module();
    return m ? m->stream(be) : NULL;
}

#else /* built without CUDA */

#include "internal.h"

int ct_cuda_device_count(void)
{
    return 0;
}

bool ct_cuda_initialized(void)
{
    return false;
}

#endif
