/* Loading the CUDA module: a CPU-only run never maps a CUDA library (and
 * stays small), and a module that does not load is a clear error at first
 * use of a GPU, naming the file and the loader's reason.
 *
 * Loading happens once per process, so the two cases run as separate
 * processes: test_cpu_run_maps_no_cuda here, test_broken_module in a child
 * started with CTRAINER_CUDA_MODULE pointing at a file that is not a shared
 * object. The peak RSS bound is generous (a CPU run of this test measured
 * 5.7 MiB in a CUDA-enabled build; linking cudart and cuBLAS used to cost
 * over 100 MiB); what matters most is that no CUDA library is mapped. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define MAX_RSS_MIB 32

/* Whether /proc/self/maps names a file containing `needle`. */
static bool mapped(const char *needle)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

START_TEST(test_cpu_run_maps_no_cuda)
{
    CtScope *s = ct_scope_open();
    /* a small training step's worth of CPU work: matmul, bias, loss, backward */
    CtGenerator g = ct_generator(1, 0);
    Tensor *w = tensor_normal(&g, 2, (const int64_t[]){64, 32}, 0, 0.1, CT_F32, ct_cpu());
    Tensor *x = tensor_normal(&g, 2, (const int64_t[]){16, 64}, 0, 1, CT_F32, ct_cpu());
    ck_assert_int_eq(tensor_set_requires_grad(w, true), CT_OK);
    Tensor *loss = tensor_mean_all(tensor_mul(tensor_matmul(x, w), tensor_matmul(x, w)));
    ck_assert_int_eq(tensor_backward(loss, NULL), CT_OK);
    ck_assert_ptr_nonnull(tensor_grad(w));
    ct_scope_close(s);

    ck_assert(!ct_cuda_initialized());
    const char *libs[] = {"libcuda.",         "libcudart", "libcublas",
                          "libctrainer_cuda", "libnccl",   "libcudnn"};
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++)
        ck_assert_msg(!mapped(libs[i]), "a CPU-only run mapped %s", libs[i]);
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    fprintf(stderr, "cpu run: peak RSS %.1f MiB\n", ru.ru_maxrss / 1024.0);
    ck_assert_int_lt(ru.ru_maxrss, MAX_RSS_MIB * 1024);
}
END_TEST

/* In the child: the module at $CTRAINER_CUDA_MODULE is a text file. */
static int broken_module_child(void)
{
    if (ct_cuda_device_count() != 0) return 1;
    if (tensor_zeros(1, (const int64_t[]){2}, CT_F32, ct_cuda(0))) return 2;
    if (ct_last_status() != CT_ERR_DEVICE) return 3;
    const char *e = ct_last_error();
    fprintf(stderr, "broken module: %s\n", e);
#ifdef CTRAINER_HAVE_CUDA
    if (!strstr(e, "cuda:0: the CUDA backend module could not be loaded: ")) return 4;
    if (!strstr(e, getenv("CTRAINER_CUDA_MODULE"))) return 5; /* dlerror names the file */
#else
    if (!strstr(e, "built without CUDA")) return 4;
#endif
    return 0;
}

START_TEST(test_broken_module)
{
    char path[] = "/tmp/ctrainer_cuda_moduleXXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "not a shared object\n", 20), 20);
    close(fd);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("CTRAINER_CUDA_MODULE", path, 1);
        _exit(broken_module_child());
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    unlink(path);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_cuda_module");
    TCase *tc = tcase_create("module");
    tcase_add_test(tc, test_broken_module); /* forks before anything is loaded */
    tcase_add_test(tc, test_cpu_run_maps_no_cuda);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
