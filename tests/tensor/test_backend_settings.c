/* The process-wide backend settings (tensor.h): defaults from
 * CTRAINER_DETERMINISTIC / CTRAINER_ALLOW_TF32 / CTRAINER_CUDNN_BENCHMARK
 * read on first use, setters
 * returning the previous value, and RuntimeArgs.deterministic turning the
 * switch on. */
#include <stdlib.h>

#include "ctrainer/runtime.h"
#include "testutil.h"

START_TEST(test_env_defaults_and_setters)
{
    /* main() set CTRAINER_DETERMINISTIC=1, CTRAINER_ALLOW_TF32=0 and
     * CTRAINER_CUDNN_BENCHMARK=1 */
    ck_assert(ct_deterministic());
    ck_assert(!ct_allow_tf32());
    ck_assert(ct_cudnn_benchmark());
    ck_assert(ct_set_cudnn_benchmark(false));
    ck_assert(!ct_cudnn_benchmark());
    ck_assert(!ct_set_cudnn_benchmark(true));
    ck_assert(ct_cudnn_benchmark());
    ck_assert(ct_set_deterministic(false));
    ck_assert(!ct_deterministic());
    ck_assert(!ct_set_allow_tf32(true));
    ck_assert(ct_allow_tf32());
    ck_assert(ct_set_allow_tf32(false));
    ck_assert(!ct_allow_tf32());
}
END_TEST

START_TEST(test_runtime_turns_it_on)
{
    ct_set_deterministic(false);
    Runtime *rt = runtime_create(&(RuntimeArgs){.use_cpu = true});
    ck_assert_ptr_nonnull(rt);
    ck_assert(!ct_deterministic());
    runtime_free(rt);
    rt = runtime_create(&(RuntimeArgs){.use_cpu = true, .deterministic = true});
    ck_assert_ptr_nonnull(rt);
    ck_assert(ct_deterministic());
    runtime_free(rt);
    ct_set_deterministic(false);
}
END_TEST

int main(void)
{
    setenv("CTRAINER_DETERMINISTIC", "1", 1);
    setenv("CTRAINER_ALLOW_TF32", "0", 1);
    setenv("CTRAINER_CUDNN_BENCHMARK", "1", 1);
    Suite *s = suite_create("tensor_backend_settings");
    TCase *tc = tcase_create("settings");
    tcase_add_test(tc, test_env_defaults_and_setters);
    tcase_add_test(tc, test_runtime_turns_it_on);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
