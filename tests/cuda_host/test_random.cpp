/* cuda_host_random: the RNG thread body (tensor/cuda/random_body.h) against
 * tensor_uniform / tensor_normal / tensor_bernoulli on the CPU, f32, f64,
 * bf16 and f16,
 * sizes that cut the last Philox block and the last thread block, and a
 * non-zero generator offset. */
#include "tensor/cuda/random_body.h"
#include "layouts.h"

static const int64_t sizes[] = {0, 1, 3, 5, 257, 1023, 4099};

/* Draws n values with the body as random.cu launches it. */
template <int DT> static void draw(const ChShape &g, Tensor *out, const CtRngParams &p)
{
    int64_t n = tensor_numel(out);
    int per = ct_rng_per_block(p.kind, DT == CT_F64);
    int64_t nblocks = (n + per - 1) / per;
    ch_launch(g.grid, g.block, [&](CtThread t) {
        ct_rng_thread<DT>(t, ct_ptr(out), NULL, n, nblocks, per, p);
    });
}

/* The body for out's dtype (f32, f64, bf16, f16). */
static void draw_any(const ChShape &g, Tensor *out, const CtRngParams &p)
{
    switch (tensor_dtype(out)) {
    case CT_F32: draw<CT_F32>(g, out, p); break;
    case CT_F64: draw<CT_F64>(g, out, p); break;
    case CT_BF16: draw<CT_BF16>(g, out, p); break;
    default: draw<CT_F16>(g, out, p); break;
    }
}

START_TEST(test_rng_matches_cpu)
{
    int checked = 0;
    for (int kind = CT_RNG_UNIFORM; kind <= CT_RNG_BERNOULLI; kind++) {
        for (int dt = CT_F32; dt <= CT_F16; dt++) {
            for (int64_t n : sizes) {
                CtGenerator gen = ct_generator(11, 3);
                gen.offset = 5; /* as after earlier draws */
                CtRngParams p = {(CtRngKind)kind, 0, 0, 11, gen.stream, gen.offset};
                Tensor *want;
                if (kind == CT_RNG_UNIFORM) {
                    p.a = -1, p.b = 2;
                    want = tensor_uniform(&gen, 1, &n, -1, 2, (CtDType)dt, ct_cpu());
                } else if (kind == CT_RNG_NORMAL) {
                    p.a = 0.5, p.b = 2;
                    want = tensor_normal(&gen, 1, &n, 0.5, 2, (CtDType)dt, ct_cpu());
                } else {
                    p.a = 0.3, p.b = 1;
                    want = tensor_bernoulli(&gen, 1, &n, 0.3, (CtDType)dt, ct_cpu());
                }
                ck_assert_msg(want, "%s", ct_last_error());
                ChShape shapes[2];
                int per = ct_rng_per_block((CtRngKind)kind, dt == CT_F64);
                int ns = ch_shapes((n + per - 1) / per, shapes);
                for (int k = 0; k < ns; k++) {
                    Tensor *got = ch_buffer(n, (CtDType)dt);
                    draw_any(shapes[k], got, p);
                    char what[64];
                    snprintf(what, sizeof what, "rng kind %d %s n %lld", kind,
                             ct_dtype_name((CtDType)dt), (long long)n);
                    ch_assert_same_bytes(want, got, what);
                    tensor_free(got);
                    checked++;
                }
                tensor_free(want);
            }
        }
    }
    ck_assert_int_eq(checked, 3 * 4 * 7 * 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_random");
    TCase *tc = tcase_create("rng");
    tcase_add_test(tc, test_rng_matches_cpu);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
