/* Per-element-size copy loops of the indexing kernels (index_select,
 * gather); included by index.c once per size with T (an unsigned integer
 * of the element's size: the dtype does not matter to a copy) and SFX
 * (name suffix: u64, u32, u16, u8) defined. Not a standalone header. */

#define IC_CAT_(a, b) a##_##b
#define IC_CAT(a, b)  IC_CAT_(a, b)
#define FN(name)      IC_CAT(name, SFX)

static void FN(select)(const CtIndexParams *p, const int64_t *ix, const T *src, T *out)
{
    int64_t size = p->size, inner = p->inner, k = p->k, rows = p->outer * p->k;
    bool par = rows * inner >= CT_CPU_PAR_MIN;
#pragma omp parallel for if (par)
    for (int64_t r = 0; r < rows; r++) {
        const T *sr = src + ((r / k) * size + ix[r % k]) * inner;
        T *orow = out + r * inner;
        for (int64_t q = 0; q < inner; q++) orow[q] = sr[q];
    }
}

static void FN(gather)(const GatherGeom *g, const int64_t *ix, const T *src, T *out)
{
    int64_t rows = g->outer * g->j;
    bool par = rows * g->inner >= CT_CPU_PAR_MIN;
#pragma omp parallel for if (par)
    for (int64_t r = 0; r < rows; r++) {
        const T *sb = src + g->outer_off[r / g->j];
        const int64_t *xr = ix + r * g->inner;
        T *orow = out + r * g->inner;
        for (int64_t q = 0; q < g->inner; q++)
            orow[q] = sb[xr[q] * g->dstride + g->inner_off[q]];
    }
}

#undef FN
#undef IC_CAT
#undef IC_CAT_

/* the parameters too, so the next instantiation defines them afresh */
#undef T
#undef SFX
