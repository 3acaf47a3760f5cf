/* The cuBLASLt matmul descriptors (tensor/cuda/lt_desc.h) against
 * hand-computed expectations: stored layouts of each operand (rows, cols,
 * leading dims) with and without transposes, batch counts and strides,
 * compute types under TF32 and autocast, epilogue mapping, the reduction
 * restriction, the workspace size, the errors, the algorithm cache's key
 * and lookups (lt_cache.h), and the CPU kernel refusing an epilogue but
 * taking a bias gradient. Runs in
 * every build (no CUDA needed). */
#include "tensor/cuda/lt_cache.h"
#include "testutil.h"

static CtLtDesc desc(CtMatmulParams p, CtDType dt, bool tf32, bool det)
{
    CtLtDesc d;
    memset(&d, 0xff, sizeof d);
    ck_assert_int_eq(ct_lt_desc(&p, dt, tf32, det, &d), CT_OK);
    return d;
}

static void assert_layout(CtLtLayout l, uint64_t rows, uint64_t cols, int64_t ld,
                          int32_t batch, int64_t stride)
{
    ck_assert_uint_eq(l.rows, rows);
    ck_assert_uint_eq(l.cols, cols);
    ck_assert_int_eq(l.ld, ld);
    ck_assert_int_eq(l.batch, batch);
    ck_assert_int_eq(l.stride, stride);
}

START_TEST(test_layouts_plain_and_transposed)
{
    /* C(2,3) = A(2,4)·B(4,3): Lt's D is Cᵀ (3,2) col-major = Bᵀ(3,4)·Aᵀ(4,2);
     * B stored row-major (4,3) is col-major (3,4) with ld 3 */
    CtLtDesc d = desc((CtMatmulParams){.batch = 1, .m = 2, .n = 3, .k = 4, .alpha = 1},
                      CT_F32, false, false);
    assert_layout(d.a, 3, 4, 3, 1, 0);
    assert_layout(d.b, 4, 2, 4, 1, 0);
    assert_layout(d.c, 3, 2, 3, 1, 0);
    /* both transposed: A stored (4,2) is col-major (2,4), ld 2; B stored
     * (3,4) is col-major (4,3), ld 4; Lt applies T to each */
    d = desc(
        (CtMatmulParams){
            .batch = 1, .m = 2, .n = 3, .k = 4, .trans_a = true, .trans_b = true},
        CT_F32, false, false);
    ck_assert_int_eq(d.gemm.op_a, CT_GEMM_OP_T);
    ck_assert_int_eq(d.gemm.op_b, CT_GEMM_OP_T);
    assert_layout(d.a, 4, 3, 4, 1, 0);
    assert_layout(d.b, 2, 4, 2, 1, 0);
    assert_layout(d.c, 3, 2, 3, 1, 0);
}
END_TEST

START_TEST(test_batch_strides)
{
    /* 5 matrices; B shared (stride 0): Lt's A is our B */
    CtLtDesc d = desc((CtMatmulParams){.batch = 5,
                                       .m = 2,
                                       .n = 3,
                                       .k = 4,
                                       .stride_a = 8,
                                       .stride_b = 0,
                                       .stride_c = 6},
                      CT_BF16, false, false);
    assert_layout(d.a, 3, 4, 3, 5, 0);
    assert_layout(d.b, 4, 2, 4, 5, 8);
    assert_layout(d.c, 3, 2, 3, 5, 6);
    ck_assert_int_eq(d.gemm.dtype, CT_BF16);
    ck_assert_int_eq(d.gemm.compute, CT_GEMM_COMPUTE_32F);
}
END_TEST

START_TEST(test_compute_types)
{
    CtMatmulParams p = {.batch = 1, .m = 1, .n = 1, .k = 1};
    ck_assert_int_eq(desc(p, CT_F32, false, false).gemm.compute, CT_GEMM_COMPUTE_32F);
    ck_assert_int_eq(desc(p, CT_F32, true, false).gemm.compute,
                     CT_GEMM_COMPUTE_32F_FAST_TF32);
    ck_assert_int_eq(desc(p, CT_F16, true, false).gemm.compute, CT_GEMM_COMPUTE_32F);
    ck_assert_int_eq(desc(p, CT_F64, true, false).gemm.compute, CT_GEMM_COMPUTE_64F);
    /* autocast wins over TF32: the operands are rounded to the low type */
    p.autocast = CT_BF16;
    ck_assert_int_eq(desc(p, CT_F32, true, false).gemm.compute,
                     CT_GEMM_COMPUTE_32F_FAST_16BF);
    p.autocast = CT_F16;
    ck_assert_int_eq(desc(p, CT_F32, false, false).gemm.compute,
                     CT_GEMM_COMPUTE_32F_FAST_16F);
}
END_TEST

START_TEST(test_epilogues)
{
    ck_assert_int_eq(ct_lt_epilogue(false, CT_MATMUL_ACT_NONE, false), CT_LT_EPI_DEFAULT);
    ck_assert_int_eq(ct_lt_epilogue(true, CT_MATMUL_ACT_NONE, false), CT_LT_EPI_BIAS);
    ck_assert_int_eq(ct_lt_epilogue(false, CT_MATMUL_ACT_RELU, false), CT_LT_EPI_RELU);
    ck_assert_int_eq(ct_lt_epilogue(true, CT_MATMUL_ACT_RELU, false),
                     CT_LT_EPI_RELU_BIAS);
    ck_assert_int_eq(ct_lt_epilogue(false, CT_MATMUL_ACT_GELU_TANH, false),
                     CT_LT_EPI_GELU);
    ck_assert_int_eq(ct_lt_epilogue(true, CT_MATMUL_ACT_GELU_TANH, false),
                     CT_LT_EPI_GELU_BIAS);
    CtLtDesc d = desc((CtMatmulParams){.batch = 1,
                                       .m = 8,
                                       .n = 16,
                                       .k = 4,
                                       .bias = true,
                                       .act = CT_MATMUL_ACT_GELU_TANH},
                      CT_F16, false, false);
    ck_assert_int_eq(d.epilogue, CT_LT_EPI_GELU_BIAS);
    ck_assert_uint_eq(d.c.rows, 16); /* the bias has n = 16 entries, D's rows */
    ck_assert_int_eq(d.aux_ld, 0);
}
END_TEST

/* GELU stores its input in an aux matrix laid out as C: ld = n, which
 * cuBLASLt wants a multiple of 8, over one matrix; nothing else has one. */
START_TEST(test_gelu_aux)
{
    ck_assert_int_eq(ct_lt_epilogue(false, CT_MATMUL_ACT_GELU_TANH, true),
                     CT_LT_EPI_GELU_AUX);
    ck_assert_int_eq(ct_lt_epilogue(true, CT_MATMUL_ACT_GELU_TANH, true),
                     CT_LT_EPI_GELU_AUX_BIAS);
    CtMatmulParams p = {.batch = 1,
                        .m = 5,
                        .n = 24,
                        .k = 3,
                        .trans_b = true,
                        .bias = true,
                        .act = CT_MATMUL_ACT_GELU_TANH,
                        .aux = true};
    ck_assert(ct_lt_aux_ok(&p));
    CtLtDesc d = desc(p, CT_BF16, false, false);
    ck_assert_int_eq(d.epilogue, CT_LT_EPI_GELU_AUX_BIAS);
    ck_assert_int_eq(d.aux_ld, 24);
    ck_assert_int_eq(d.aux_ld, d.c.ld);
    /* the aux word is in the algorithm cache's key */
    CtLtKey with, without;
    ct_lt_key(&with, &d);
    d.aux_ld = 0;
    ct_lt_key(&without, &d);
    ck_assert(memcmp(&with, &without, sizeof with) != 0);
    CtMatmulParams bad[] = {p, p, p};
    bad[0].n = 20;                   /* ld not a multiple of 8 */
    bad[1].batch = 2;                /* a batch */
    bad[2].act = CT_MATMUL_ACT_RELU; /* ReLU has no aux of that form */
    for (int i = 0; i < 3; i++) {
        ck_assert(!ct_lt_aux_ok(&bad[i]));
        CtLtDesc e;
        ck_assert_int_eq(ct_lt_desc(&bad[i], CT_F32, false, false, &e),
                         CT_ERR_UNSUPPORTED);
    }
    tu_assert_error(CT_ERR_UNSUPPORTED,
                    "matmul: cuBLASLt stores a pre-activation only for "
                    "GELU over one matrix with a multiple of 8 columns "
                    "(got 24) on cuda");
    p.aux = false;
    p.n = 20; /* no aux asked: any n */
    ck_assert(ct_lt_aux_ok(&p));
}
END_TEST

START_TEST(test_determinism_and_workspace)
{
    CtMatmulParams p = {.batch = 1, .m = 64, .n = 32, .k = 8};
    ck_assert(!desc(p, CT_F32, false, false).reduction_free);
    ck_assert(desc(p, CT_F32, false, true).reduction_free);
    /* small D: the floor */
    ck_assert_uint_eq(desc(p, CT_F32, false, false).workspace, CT_LT_WORKSPACE_MIN);
    /* 512×1024 f32 D, 4 slices: 8 MiB */
    p.m = 512, p.n = 1024;
    ck_assert_uint_eq(desc(p, CT_F32, false, false).workspace, (size_t)8 << 20);
    /* f64 accumulates in 8 bytes: 16 MiB */
    ck_assert_uint_eq(desc(p, CT_F64, false, false).workspace, (size_t)16 << 20);
    /* large D: the cap */
    p.m = 8192, p.n = 8192;
    ck_assert_uint_eq(desc(p, CT_BF16, false, false).workspace, CT_LT_WORKSPACE_MAX);
}
END_TEST

START_TEST(test_errors)
{
    CtLtDesc d;
    CtMatmulParams p = {.batch = 1, .m = 2, .n = 2, .k = 2, .act = CT_MATMUL_ACT_RELU};
    ck_assert_int_eq(ct_lt_desc(&p, CT_F64, false, false, &d), CT_ERR_UNSUPPORTED);
    tu_assert_error(CT_ERR_UNSUPPORTED,
                    "matmul: cuBLASLt has no bias/activation epilogue for f64 on cuda");
    ck_assert_int_eq(ct_lt_desc(&p, CT_I64, false, false, &d), CT_ERR_DTYPE);
    tu_assert_error(CT_ERR_DTYPE, "matmul: cuBLAS has no GEMM for i64 on cuda");
}
END_TEST

/* A bias gradient (a linear layer's weight gradient gᵀ·x with g's column
 * sums): BGRADB, whose vector has Lt's N = our m entries, the columns of
 * Lt's D; its own cache key; one matrix, no other epilogue, not f64. */
START_TEST(test_bias_grad)
{
    /* dw (4, 5) = gᵀ (4, 6) · x (6, 5): g stored (6, 4), so A goes in
     * transposed; Lt's B is our A */
    CtMatmulParams p = {.batch = 1,
                        .m = 4,
                        .n = 5,
                        .k = 6,
                        .trans_a = true,
                        .alpha = 1,
                        .bias_grad = true};
    CtLtDesc d = desc(p, CT_F32, false, false);
    ck_assert_int_eq(d.epilogue, CT_LT_EPI_BGRADB);
    ck_assert_int_eq(d.gemm.op_b, CT_GEMM_OP_T);
    assert_layout(d.b, 4, 6, 4, 1, 0); /* g as stored: col-major (4, 6), ld 4 */
    ck_assert_uint_eq(d.c.cols, 4);    /* the sums: one per column of Lt's D */
    ck_assert_int_eq(d.aux_ld, 0);
    CtLtKey fused, plain;
    ct_lt_key(&fused, &d);
    p.bias_grad = false;
    d = desc(p, CT_F32, false, false);
    ck_assert_int_eq(d.epilogue, CT_LT_EPI_DEFAULT);
    ct_lt_key(&plain, &d);
    ck_assert(memcmp(&fused, &plain, sizeof fused) != 0);
    p.bias_grad = true;
    CtMatmulParams bad[] = {p, p, p, p};
    bad[0].batch = 2;
    bad[1].bias = true;
    bad[2].act = CT_MATMUL_ACT_RELU;
    bad[3].aux = true;
    for (int i = 0; i < 4; i++) {
        CtLtDesc e;
        ck_assert_int_eq(ct_lt_desc(&bad[i], CT_F32, false, false, &e),
                         CT_ERR_UNSUPPORTED);
        tu_assert_error(CT_ERR_UNSUPPORTED, "matmul: a bias gradient epilogue takes one "
                                            "matrix and no other epilogue on cuda");
    }
    CtLtDesc e;
    ck_assert_int_eq(ct_lt_desc(&p, CT_F64, false, false, &e), CT_ERR_UNSUPPORTED);
    tu_assert_error(CT_ERR_UNSUPPORTED, "no bias/activation epilogue for f64");
    /* our A row-major: Lt's op(B) = N, which cuBLASLt refuses for BGRADB */
    p.trans_a = false;
    ck_assert_int_eq(ct_lt_desc(&p, CT_F32, false, false, &e), CT_ERR_UNSUPPORTED);
    tu_assert_error(CT_ERR_UNSUPPORTED, "matmul: a bias gradient epilogue sums a "
                                        "transposed left operand on cuda");
}
END_TEST

/* The heuristic's answer: an algorithm only from a successful call with a
 * usable first result; NOT_SUPPORTED and an empty answer both mean none
 * (the caller's fallback runs); any other status is an error. */
START_TEST(test_heuristic_answer)
{
    ck_assert_int_eq(ct_lt_heuristic(CT_LT_STATUS_SUCCESS, 1, CT_LT_STATUS_SUCCESS),
                     CT_LT_HEUR_FOUND);
    ck_assert_int_eq(ct_lt_heuristic(CT_LT_STATUS_SUCCESS, 0, CT_LT_STATUS_SUCCESS),
                     CT_LT_HEUR_NONE);
    ck_assert_int_eq(ct_lt_heuristic(CT_LT_STATUS_SUCCESS, 1, CT_LT_STATUS_NOT_SUPPORTED),
                     CT_LT_HEUR_NONE);
    ck_assert_int_eq(ct_lt_heuristic(CT_LT_STATUS_NOT_SUPPORTED, 0, CT_LT_STATUS_SUCCESS),
                     CT_LT_HEUR_NONE);
    ck_assert_int_eq(ct_lt_heuristic(7 /* INVALID_VALUE */, 0, CT_LT_STATUS_SUCCESS),
                     CT_LT_HEUR_ERROR);
    ck_assert_int_eq(ct_lt_heuristic(3 /* ALLOC_FAILED */, 1, CT_LT_STATUS_SUCCESS),
                     CT_LT_HEUR_ERROR);
}
END_TEST

/* The operands' alignment: the largest power of two up to 256 bytes that
 * divides every matrix's address (the base and, over a batch, the stride),
 * 256 until set; each alignment is its own word of the cache key. */
START_TEST(test_alignment)
{
    ck_assert_uint_eq(ct_lt_alignment(0), 256);
    ck_assert_uint_eq(ct_lt_alignment(0x7f0000001000u), 256);
    ck_assert_uint_eq(ct_lt_alignment(0x7f0000001004u), 4);
    ck_assert_uint_eq(ct_lt_alignment(0x7f0000001030u), 16);
    ck_assert_uint_eq(ct_lt_alignment(0x7f0000001080u), 128);
    ck_assert_uint_eq(ct_lt_alignment(0x7f0000001006u), 2);
    ck_assert_uint_eq(ct_lt_alignment(0x7f0000001001u), 1);
    /* an aligned base whose batch stride (3 f32 = 12 bytes) is not */
    ck_assert_uint_eq(ct_lt_batch_alignment(0x1000, 3, 4, 2), 4);
    ck_assert_uint_eq(ct_lt_batch_alignment(0x1000, 3, 4, 1), 256); /* one matrix */
    ck_assert_uint_eq(ct_lt_batch_alignment(0x1000, 0, 4, 5), 256); /* shared */
    ck_assert_uint_eq(ct_lt_batch_alignment(0x1000, 64, 2, 5), 128);

    /* C(2,3) = A(2,4)·B(4,3), batch 2: Lt's A is our B */
    CtMatmulParams p = {.batch = 2,
                        .m = 2,
                        .n = 3,
                        .k = 4,
                        .stride_a = 8,
                        .stride_b = 12,
                        .stride_c = 6,
                        .alpha = 1};
    CtLtDesc d = desc(p, CT_F32, false, false);
    ck_assert_uint_eq(d.align_a, 256);
    ck_assert_uint_eq(d.align_b, 256);
    ck_assert_uint_eq(d.align_c, 256);
    CtLtKey before, after;
    ct_lt_key(&before, &d);
    /* our B at a parameter's offset of 5 floats; our A's matrices 32 bytes
     * apart; C's 24 */
    ck_assert_uint_eq(d.align_e, 256);
    ct_lt_desc_align(&d, 0x10000 + 20, 0x20000, 0x30000, 0);
    ck_assert_uint_eq(d.align_a, 4);
    ck_assert_uint_eq(d.align_b, 32);
    ck_assert_uint_eq(d.align_c, 8);
    ck_assert_uint_eq(d.align_e, 256); /* no epilogue pointer */
    ct_lt_key(&after, &d);
    ck_assert(memcmp(&before, &after, sizeof before) != 0);
    /* a bias 16 bytes past a 256-byte boundary beside an aligned aux: the
     * lesser, and a key of its own */
    ct_lt_desc_align(&d, 0x10000 + 20, 0x20000, 0x30000, 0x40010 | 0x50000);
    ck_assert_uint_eq(d.align_e, 16);
    ct_lt_key(&before, &d);
    ck_assert(memcmp(&before, &after, sizeof before) != 0);
    ck_assert_uint_eq(CT_LT_EPILOGUE_ALIGN, 16);
}
END_TEST

/* Every field of the descriptor lands in its own word of the cache key. */
START_TEST(test_cache_key_covers_every_field)
{
    CtLtDesc d;
    memset(&d, 0, sizeof d);
    int64_t v = 1000;
    CtGemmDesc *g = &d.gemm;
    g->op_a = (CtGemmOp)v++, g->op_b = (CtGemmOp)v++;
    g->m = (int)v++, g->n = (int)v++, g->k = (int)v++;
    g->lda = (int)v++, g->ldb = (int)v++, g->ldc = (int)v++;
    g->stride_a = v++, g->stride_b = v++, g->stride_c = v++;
    g->batch = (int)v++;
    g->dtype = (CtDType)v++, g->compute = (CtGemmCompute)v++;
    g->scale_f64 = true; /* a bool: the word 1 */
    CtLtLayout *l[3] = {&d.a, &d.b, &d.c};
    for (int i = 0; i < 3; i++) {
        l[i]->rows = (uint64_t)v++, l[i]->cols = (uint64_t)v++;
        l[i]->ld = v++, l[i]->batch = (int32_t)v++, l[i]->stride = v++;
    }
    d.epilogue = (CtLtEpilogue)v++;
    d.aux_ld = v++;
    d.reduction_free = true;
    d.workspace = (size_t)v++;
    d.align_a = (uint32_t)v++, d.align_b = (uint32_t)v++, d.align_c = (uint32_t)v++;
    d.align_e = (uint32_t)v++;
    CtLtKey k;
    memset(&k, 0xAB, sizeof k);
    ct_lt_key(&k, &d);
    int ones = 0;
    bool seen[64] = {false};
    for (int i = 0; i < CT_LT_KEY_WORDS; i++) {
        if (k.w[i] == 1) {
            ones++;
            continue;
        }
        ck_assert_msg(k.w[i] >= 1000 && k.w[i] < v, "word %d is %lld", i,
                      (long long)k.w[i]);
        ck_assert(!seen[k.w[i] - 1000]);
        seen[k.w[i] - 1000] = true;
    }
    ck_assert_int_eq(ones, 2);
    ck_assert_int_eq(CT_LT_KEY_WORDS, (int)(v - 1000) + ones);
}
END_TEST

/* The same product finds its algorithm whatever the descriptor's padding
 * held; another dtype, setting, shape or epilogue does not. */
START_TEST(test_algorithm_cache)
{
    static CtLtCache cache; /* zeroed: empty */
    CtMatmulParams p = {.batch = 1, .m = 32, .n = 128, .k = 784, .trans_b = true};
    CtLtDesc d = desc(p, CT_F32, false, false); /* built over 0xff bytes */
    CtLtKey k, k2;
    ct_lt_key(&k, &d);
    CtLtChoice got, v = {.found = true, .workspace = 4096};
    for (int i = 0; i < CT_LT_ALGO_BYTES; i++) v.algo[i] = (unsigned char)(i * 7);
    ck_assert(!ct_lt_cache_get(&cache, &k, &got));
    ck_assert(ct_lt_cache_put(&cache, &k, &v));
    CtLtDesc same;
    memset(&same, 0, sizeof same);
    ck_assert_int_eq(ct_lt_desc(&p, CT_F32, false, false, &same), CT_OK);
    ct_lt_key(&k2, &same);
    ck_assert(ct_lt_cache_get(&cache, &k2, &got));
    ck_assert(got.found);
    ck_assert_uint_eq(got.workspace, 4096);
    ck_assert_int_eq(memcmp(got.algo, v.algo, sizeof v.algo), 0);
    const struct {
        CtMatmulParams p;
        CtDType dt;
        bool tf32, det;
    } others[] = {
        {p, CT_BF16, false, false},
        {p, CT_F32, true, false},
        {p, CT_F32, false, true},
        {(CtMatmulParams){.batch = 1, .m = 33, .n = 128, .k = 784, .trans_b = true},
         CT_F32, false, false},
        {(CtMatmulParams){.batch = 1, .m = 32, .n = 128, .k = 784}, CT_F32, false, false},
        {(CtMatmulParams){
             .batch = 1, .m = 32, .n = 128, .k = 784, .trans_b = true, .bias = true},
         CT_F32, false, false},
        {(CtMatmulParams){.batch = 2, .m = 32, .n = 128, .k = 784, .trans_b = true},
         CT_F32, false, false},
    };
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        CtLtDesc o = desc(others[i].p, others[i].dt, others[i].tf32, others[i].det);
        ct_lt_key(&k2, &o);
        ck_assert_msg(!ct_lt_cache_get(&cache, &k2, &got), "case %zu", i);
    }
    ck_assert_int_eq(cache.n, 1);
}
END_TEST

/* The key hash spreads keys that differ only in high bits of a word (the
 * sizes of a layer family, m = i << 16) over the table's slots, and sees
 * bytes past the last whole word. Slots are hash % 256: without the final
 * mix, all these keys would land in one slot. */
START_TEST(test_key_hash_spreads)
{
    enum { KEYS = 200 };
    bool seen[CT_LT_CACHE_SLOTS] = {0};
    int distinct = 0;
    for (int i = 0; i < KEYS; i++) {
        CtMatmulParams p = {.batch = 1, .m = (int64_t)(i + 1) << 16, .n = 64, .k = 64};
        CtLtDesc d = desc(p, CT_F32, false, false);
        CtLtKey k;
        ct_lt_key(&k, &d);
        uint64_t slot = ct_key_hash(&k, sizeof k) % CT_LT_CACHE_SLOTS;
        distinct += !seen[slot];
        seen[slot] = true;
    }
    /* 200 random keys fill about 139 of 256 slots */
    ck_assert_int_ge(distinct, 100);
    unsigned char a[13] = {0}, b[13] = {0};
    b[12] = 1;
    ck_assert_uint_ne(ct_key_hash(a, sizeof a), ct_key_hash(b, sizeof b));
}
END_TEST

/* The CPU kernel has no fused epilogue: its supports rejects one, so a
 * caller (linear) falls back to the unfused form. */
START_TEST(test_cpu_rejects_epilogue)
{
    CtScope *s = ct_scope_open();
    Tensor *a = tensor_ones(1, (int64_t[]){6}, CT_F32, ct_cpu());
    Tensor *b = tensor_ones(1, (int64_t[]){6}, CT_F32, ct_cpu());
    Tensor *bias = tensor_ones(1, (int64_t[]){3}, CT_F32, ct_cpu());
    Tensor *c = tensor_zeros(1, (int64_t[]){6}, CT_F32, ct_cpu());
    CtMatmulParams p = {.batch = 1, .m = 2, .n = 3, .k = 2, .alpha = 1, .bias = true};
    CtOpCall call = {.op = CT_OP_MATMUL, .out = {c}, .in = {a, b, bias}, .params = &p};
    ck_assert(!ct_backend_supports(ct_backend_for(ct_cpu()), &call));
    ck_assert_int_eq(ct_dispatch(&call), CT_ERR_UNSUPPORTED);
    tu_assert_error(CT_ERR_UNSUPPORTED, "matmul: not supported on cpu");
    p.bias = false;
    p.act = CT_MATMUL_ACT_RELU;
    ck_assert(!ct_backend_supports(ct_backend_for(ct_cpu()), &call));
    p.act = CT_MATMUL_ACT_NONE;
    p.aux = true;
    ck_assert(!ct_backend_supports(ct_backend_for(ct_cpu()), &call));
    p.aux = false;
    ck_assert(ct_backend_supports(ct_backend_for(ct_cpu()), &call));
    /* a bias gradient it sums after the product, as a REDUCE: f32 and f64
     * without autocast, into a contiguous vector of m entries */
    Tensor *db = tensor_zeros(1, (int64_t[]){2}, CT_F32, ct_cpu());
    Tensor *db3 = tensor_zeros(1, (int64_t[]){3}, CT_F32, ct_cpu());
    CtOpCall grad = {.op = CT_OP_MATMUL, .out = {c, db}, .in = {a, b}, .params = &p};
    p.bias_grad = true;
    ck_assert(ct_backend_supports(ct_backend_for(ct_cpu()), &grad));
    grad.out[1] = db3;
    ck_assert(!ct_backend_supports(ct_backend_for(ct_cpu()), &grad));
    grad.out[1] = db;
    p.autocast = CT_BF16;
    ck_assert(!ct_backend_supports(ct_backend_for(ct_cpu()), &grad));
    ct_scope_close(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_lt_desc");
    TCase *tc = tcase_create("lt_desc");
    tcase_add_test(tc, test_layouts_plain_and_transposed);
    tcase_add_test(tc, test_batch_strides);
    tcase_add_test(tc, test_compute_types);
    tcase_add_test(tc, test_epilogues);
    tcase_add_test(tc, test_gelu_aux);
    tcase_add_test(tc, test_determinism_and_workspace);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_bias_grad);
    tcase_add_test(tc, test_heuristic_answer);
    tcase_add_test(tc, test_alignment);
    tcase_add_test(tc, test_cache_key_covers_every_field);
    tcase_add_test(tc, test_algorithm_cache);
    tcase_add_test(tc, test_key_hash_spreads);
    tcase_add_test(tc, test_cpu_rejects_epilogue);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
