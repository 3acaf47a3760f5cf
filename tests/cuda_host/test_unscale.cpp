/* cuda_host_unscale: the UNSCALE thread body (tensor/cuda/unscale_body.h)
 * against the CPU backend's kernel, bit for bit (a NaN matches any NaN):
 * block sizes from empty to many blocks with tails, finite blocks and
 * blocks holding inf, -inf or NaN at the start, middle or end, and a flag
 * that starts clear or already set. */
#include "tensor/cuda/unscale_body.h"
#include "layouts.h"
#include "values.h"

static const int64_t sizes[] = {0, 1, 257, 600, 1890};
#define NSIZES ((int)(sizeof sizes / sizeof *sizes))

/* Where a non-finite value goes (none, first, middle, last). */
enum { CLEAN, AT_START, AT_MIDDLE, AT_END, NPLACES };

static void cpu_unscale(Tensor *g, Tensor *flag, double inv)
{
    CtUnscaleParams p = {inv};
    CtOpCall call = {};
    call.op = CT_OP_UNSCALE;
    call.out[0] = g;
    call.out[1] = flag;
    call.params = &p;
    ck_assert_int_eq(ct_dispatch(&call), CT_OK);
}

START_TEST(test_unscale_sizes_and_non_finite)
{
    const float bad[3] = {INFINITY, -INFINITY, NAN};
    int checked = 0;
    for (int si = 0; si < NSIZES; si++) {
        int64_t n = sizes[si];
        for (int place = 0; place < NPLACES; place++) {
            for (int b = 0; b < 3; b++) {
                for (int set = 0; set < 2; set++) {
                    if (n == 0 && place != CLEAN) continue;
                    Tensor *r = tu_rand64(1, &n, -1e4, 1e4, 61 + si, false);
                    Tensor *gw = ch_buffer(n > 0 ? n : 1, CT_F32);
                    CtScope *scope = ct_scope_open();
                    Tensor *view = tensor_slice(gw, 0, 0, n, 1);
                    ck_assert_int_eq(tensor_copy_(view, r), CT_OK);
                    float *v = (float *)ct_ptr(gw);
                    if (place != CLEAN)
                        v[place == AT_START    ? 0
                          : place == AT_MIDDLE ? n / 2
                                               : n - 1] = bad[b];
                    Tensor *gg = ch_clone(gw);
                    Tensor *fw = ch_buffer(1, CT_F32);
                    *(float *)ct_ptr(fw) = set ? 1.0f : 0.0f;
                    Tensor *fg = ch_clone(fw);
                    cpu_unscale(view, fw, 1.0 / 65536.0 * 3);
                    ChShape shapes[2];
                    int ns = ch_shapes(n, shapes);
                    for (int s = 0; s < ns; s++) {
                        Tensor *g2 = ch_clone(gg);
                        ch_launch(shapes[s].grid, shapes[s].block, [&](CtThread t) {
                            ct_unscale_thread(t, (float *)ct_ptr(g2), (float *)ct_ptr(fg),
                                              (float)(1.0 / 65536.0 * 3), n);
                        });
                        char what[64];
                        snprintf(what, sizeof what, "n %lld, place %d, value %d, set %d",
                                 (long long)n, place, b, set);
                        ch_assert_same_values(gw, g2, what);
                        ch_assert_same_bytes(fw, fg, what);
                        ck_assert_float_eq(*(float *)ct_ptr(fg),
                                           place != CLEAN || set ? 1.0f : 0.0f);
                        tensor_free(g2);
                        checked++;
                    }
                    ct_scope_close(scope);
                    tensor_free(r);
                    tensor_free(gw);
                    tensor_free(gg);
                    tensor_free(fw);
                    tensor_free(fg);
                }
            }
        }
    }
    ck_assert_int_gt(checked, 200);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_unscale");
    TCase *tc = tcase_create("unscale");
    tcase_add_test(tc, test_unscale_sizes_and_non_finite);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
