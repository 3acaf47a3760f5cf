/* Per-dtype accumulating loops of the indexing kernels (index_add,
 * scatter_add); included by index.c once per dtype with T (float, double)
 * and SFX (f32, f64) defined. Each output element belongs to one thread,
 * which adds its terms in index order. Not a standalone header. */

#define IA_CAT_(a, b) a##_##b
#define IA_CAT(a, b)  IA_CAT_(a, b)
#define FN(name)      IA_CAT(name, SFX)

/* Work units: (outer, row part, column block). Row parts split the `size`
 * destination rows so that a small `outer` still parallelises; each unit
 * scans the whole index and adds the rows it owns, in index order. */
static void FN(index_add)(const CtIndexParams *p, const int64_t *ix, const T *src, T *out)
{
    int64_t outer = p->outer, size = p->size, inner = p->inner, k = p->k;
    int64_t ncb = (inner + COL_BLOCK - 1) / COL_BLOCK;
    bool par = k * inner >= CT_CPU_PAR_MIN;
    int64_t nrp = par && outer * ncb < 64 ? (64 + outer * ncb - 1) / (outer * ncb) : 1;
    if (nrp > size) nrp = size > 0 ? size : 1;
    int64_t rows_per = (size + nrp - 1) / nrp;
    int64_t units = outer * nrp * ncb;
#pragma omp parallel for if (par)
    for (int64_t u = 0; u < units; u++) {
        int64_t cb = u % ncb, rp = (u / ncb) % nrp, oo = u / (ncb * nrp);
        int64_t c0 = cb * COL_BLOCK, c1 = c0 + COL_BLOCK < inner ? c0 + COL_BLOCK : inner;
        int64_t r0 = rp * rows_per, r1 = r0 + rows_per;
        for (int64_t j = 0; j < k; j++) {
            int64_t row = ix[j];
            if (row < r0 || row >= r1) continue;
            const T *sr = src + (oo * k + j) * inner;
            T *orow = out + (oo * size + row) * inner;
            for (int64_t q = c0; q < c1; q++) orow[q] += sr[q];
        }
    }
}

/* Units are (outer, column block); each loops over J in order, and distinct
 * (outer, column) pairs write distinct output elements. */
static void FN(scatter_add)(const GatherGeom *g, const int64_t *ix, const T *src, T *out)
{
    int64_t ncb = (g->inner + COL_BLOCK - 1) / COL_BLOCK;
    int64_t units = g->outer * ncb;
    bool par = g->outer * g->j * g->inner >= CT_CPU_PAR_MIN;
#pragma omp parallel for if (par)
    for (int64_t u = 0; u < units; u++) {
        int64_t oo = u / ncb, c0 = (u % ncb) * COL_BLOCK;
        int64_t c1 = c0 + COL_BLOCK < g->inner ? c0 + COL_BLOCK : g->inner;
        T *ob = out + g->outer_off[oo];
        for (int64_t j = 0; j < g->j; j++) {
            int64_t r = oo * g->j + j;
            const int64_t *xr = ix + r * g->inner;
            const T *sr = src + r * g->inner;
            for (int64_t q = c0; q < c1; q++)
                ob[xr[q] * g->dstride + g->inner_off[q]] += sr[q];
        }
    }
}

#undef FN
#undef IA_CAT
#undef IA_CAT_

/* the parameters too, so the next instantiation defines them afresh */
#undef T
#undef SFX
