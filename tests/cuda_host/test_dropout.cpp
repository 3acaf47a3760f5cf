/* cuda_host_dropout: dropout's mask on CUDA is the CPU's. Dropout's mask is
 * a Bernoulli draw (1/(1-p) with probability 1-p, else 0) from the
 * generator's Philox stream, in the input's dtype, and tensor_dropout runs
 * it as one RNG call that multiplies the input by it. The RNG thread body
 * (tensor/cuda/random_body.h) given the same generator state draws the
 * same mask bit for bit (f32, f64, bf16, f16; a generator already
 * advanced; sizes cutting the last Philox block and thread block), and
 * with the input gives tensor_dropout's output, which is also the mask
 * times the input by the BINARY mul body (tensor/cuda/elementwise_body.h),
 * in every float dtype. */
#include "data.h"
#include "tensor/cuda/elementwise_body.h"
#include "tensor/cuda/random_body.h"

static const int64_t sizes[] = {1, 5, 257, 1023, 4099};
static const double probs[] = {0.1, 0.5, 0.9, 1.0};

/* The mask's draw as tensor_dropout asks for it, from generator state g. */
static CtRngParams mask_params(const CtGenerator &g, double p)
{
    CtRngParams r = {CT_RNG_BERNOULLI, 1 - p,    p == 1 ? 0.0 : 1 / (1 - p),
                     g.seed,           g.stream, g.offset};
    return r;
}

/* The RNG body into out: the mask, or x times it when x is given. */
static void draw_mask(const ChShape &sh, Tensor *out, const CtRngParams &rp,
                      const Tensor *x = NULL)
{
    int64_t n = tensor_numel(out);
    CtDType dt = tensor_dtype(out);
    int per = ct_rng_per_block(rp.kind, dt == CT_F64);
    int64_t nb = (n + per - 1) / per;
    void *o = ct_ptr(out);
    const void *xp = x ? ct_ptr(x) : NULL;
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        switch (dt) {
        case CT_F32: ct_rng_thread<CT_F32>(t, o, xp, n, nb, per, rp); break;
        case CT_F64: ct_rng_thread<CT_F64>(t, o, xp, n, nb, per, rp); break;
        case CT_BF16: ct_rng_thread<CT_BF16>(t, o, xp, n, nb, per, rp); break;
        default: ct_rng_thread<CT_F16>(t, o, xp, n, nb, per, rp); break;
        }
    });
}

template <int DT>
static void mul_body_as(const ChShape &sh, Tensor *out, const Tensor *a, const Tensor *b)
{
    typedef typename CtHdType<DT>::S T;
    CtCudaIndex ix;
    const Tensor *ops[3] = {out, a, b};
    int64_t n = ct_cuda_index_init(&ix, tensor_ndim(out), tensor_shape(out), 3, ops);
    ch_launch(sh.grid, sh.block, [&](CtThread t) {
        ct_arith_thread<DT, CT_BIN_MUL>(t, (T *)ct_ptr(out), (const T *)ct_ptr(a),
                                        (const T *)ct_ptr(b), ix, n);
    });
}

/* The MUL body for out's dtype. */
static void mul_body(const ChShape &sh, Tensor *out, const Tensor *a, const Tensor *b)
{
    switch (tensor_dtype(out)) {
    case CT_F32: mul_body_as<CT_F32>(sh, out, a, b); break;
    case CT_F64: mul_body_as<CT_F64>(sh, out, a, b); break;
    case CT_BF16: mul_body_as<CT_BF16>(sh, out, a, b); break;
    default: mul_body_as<CT_F16>(sh, out, a, b); break;
    }
}

/* The CPU's mask: dropout of ones (the mask itself) where the CPU
 * multiplies in dt (f32, f64), else the CPU's RNG kernel run with the
 * params tensor_dropout would give it. Scope-owned. */
static Tensor *cpu_mask(CtGenerator *gen, int64_t n, CtDType dt, double p)
{
    if (dt == CT_F32 || dt == CT_F64) {
        Tensor *m = tensor_dropout(tensor_ones(1, &n, dt, ct_cpu()), p, true, gen);
        ck_assert_msg(m, "%s", ct_last_error());
        return m;
    }
    CtRngParams rp = mask_params(*gen, p);
    Tensor *m = tensor_empty(1, &n, dt, ct_cpu());
    CtOpCall call = {CT_OP_RNG, {m}, {}, &rp, NULL, NULL};
    ch_cpu(call);
    return m;
}

/* CPU and body masks, in every float dtype. */
START_TEST(test_mask_matches_cpu)
{
    int checked = 0, dropped = 0, kept = 0;
    for (int dt = CT_F32; dt <= CT_F16; dt++)
        for (int64_t n : sizes)
            for (double p : probs) {
                CtScope *scope = ct_scope_open();
                CtGenerator gen = ct_generator(41, 2);
                gen.offset = 9; /* as after earlier draws */
                CtRngParams rp = mask_params(gen, p);
                Tensor *want = cpu_mask(&gen, n, (CtDType)dt, p);
                ChShape sh[2];
                int per = ct_rng_per_block(CT_RNG_BERNOULLI, dt == CT_F64);
                ch_shapes((n + per - 1) / per, sh);
                for (int s = 0; s < 2; s++) {
                    Tensor *got = ch_out(1, &n, (CtDType)dt);
                    draw_mask(sh[s], got, rp);
                    char what[64];
                    snprintf(what, sizeof what, "%s n %lld p %g launch %d",
                             ct_dtype_name((CtDType)dt), (long long)n, p, s);
                    ch_assert_same_bytes(want, got, what);
                    tensor_free(got);
                    checked++;
                }
                if (dt == CT_F32 && p == 0.5) {
                    const float *m = (const float *)ct_ptr(want);
                    for (int64_t i = 0; i < n; i++) {
                        ck_assert(m[i] == 0.0f || m[i] == 2.0f);
                        dropped += m[i] == 0.0f, kept += m[i] == 2.0f;
                    }
                }
                ct_scope_close(scope);
            }
    ck_assert_int_eq(checked, 4 * 5 * 4 * 2);
    ck_assert_int_gt(dropped, 2000); /* about half of 5385 */
    ck_assert_int_gt(kept, 2000);
}
END_TEST

/* The whole op against tensor_dropout: the RNG body with the input, and
 * the mask body then the mul body, in every float dtype (the CPU's output
 * is also its mask times the input). */
START_TEST(test_dropout_output_matches_cpu)
{
    int checked = 0;
    int64_t shape[2] = {3, 70};
    for (int dt = CT_F32; dt <= CT_F16; dt++)
        for (double p : probs) {
            CtScope *scope = ct_scope_open();
            CtGenerator gen = ct_generator(5, 7);
            gen.offset = 3;
            CtRngParams rp = mask_params(gen, p);
            Tensor *x = ch_rand(2, shape, (CtDType)dt, -2, 2, 3);
            Tensor *want = tensor_dropout(x, p, true, &gen);
            ck_assert_msg(want, "%s", ct_last_error());
            ck_assert_int_eq(gen.offset, 3 + (dt == CT_F64 ? 105 : 53));
            Tensor *m = tensor_empty(2, shape, (CtDType)dt, ct_cpu());
            CtOpCall call = {CT_OP_RNG, {m}, {}, &rp, NULL, NULL};
            ch_cpu(call); /* the mask alone, from the same state */
            ch_assert_same_bytes(want, tensor_mul(x, m), "dropout = x * mask (cpu)");
            ChShape sh[2];
            ch_shapes(210, sh);
            for (int s = 0; s < 2; s++) {
                Tensor *mask = ch_out(2, shape, (CtDType)dt);
                Tensor *got = ch_out(2, shape, (CtDType)dt);
                draw_mask(sh[s], got, rp, x);
                ch_assert_same_bytes(want, got, "dropout output");
                draw_mask(sh[s], mask, rp);
                mul_body(sh[s], got, x, mask);
                ch_assert_same_bytes(want, got, "mask, then mul");
                tensor_free(mask);
                tensor_free(got);
                checked++;
            }
            tensor_free(x);
            ct_scope_close(scope);
        }
    ck_assert_int_eq(checked, 4 * 4 * 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_host_dropout");
    TCase *tc = tcase_create("dropout");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_mask_matches_cpu);
    tcase_add_test(tc, test_dropout_output_matches_cpu);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
