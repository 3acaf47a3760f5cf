/* Embedding: a lookup table weight (num_embeddings, embedding_dim), with an
 * optional padding row that starts at zero and gets no gradient. */
#include "nn_internal.h"

typedef struct Embedding {
    Module base;
    int64_t num, dim;
    int64_t padding_idx; /* in [0, num), or -1: none */
    Tensor *weight;
} Embedding;

/* y = weight[x], with the rows looked up at padding_idx taken from a
 * detached view of weight, so no gradient reaches that row (PyTorch's
 * embedding backward skips those indices). x: any shape, y: (*x, dim). */
static Tensor *embedding_padded(Embedding *e, Tensor *x)
{
    Tensor *y = tensor_embedding(e->weight, x);
    if (!y || !tensor_requires_grad(y)) return y;
    Tensor *pad = tensor_full(0, NULL, (double)e->padding_idx, CT_I64, tensor_device(x));
    Tensor *keep = tensor_unsqueeze(tensor_ne(x, pad), -1); /* (*x, 1) */
    return tensor_where(keep, y, tensor_detach(y));
}

static Tensor *embedding_forward(Module *m, Tensor *x)
{
    Embedding *e = (Embedding *)m;
    /* tensor_embedding names out-of-range indices with their position */
    if (e->padding_idx < 0) return tensor_embedding(e->weight, x);
    return embedding_padded(e, x);
}

static void embedding_extra_repr(const Module *m, char *buf, size_t n)
{
    const Embedding *e = (const Embedding *)m;
    int len = snprintf(buf, n, "%lld, %lld", (long long)e->num, (long long)e->dim);
    if (e->padding_idx >= 0 && len >= 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, ", padding_idx=%lld",
                 (long long)e->padding_idx);
}

static const ModuleVtable embedding_vt = {.type = "Embedding",
                                          .forward = embedding_forward,
                                          .extra_repr = embedding_extra_repr};

/* The padding row in [0, num), -1 for none, or -2 (error recorded). */
static int64_t padding_row(int64_t num, const NnEmbeddingArgs *args)
{
    if (!args || !args->use_padding_idx) return -1;
    int64_t p = args->padding_idx;
    if (p < -num || p >= num) {
        ct_error(CT_ERR_INVALID,
                 "Embedding: padding_idx %lld is out of range for %lld embeddings "
                 "(need -%lld <= padding_idx < %lld)",
                 (long long)p, (long long)num, (long long)num, (long long)num);
        return -2;
    }
    return p < 0 ? p + num : p;
}

/* weight ~ N(0, 1), the padding row (if any) zeroed after the draw. */
static Tensor *embedding_weight(int64_t num, int64_t dim, int64_t pad, CtGenerator *g)
{
    Tensor *w = NULL;
    CtScope *s = ct_scope_open();
    if (!s) return NULL;
    Tensor *t = tensor_normal(g, 2, (const int64_t[]){num, dim}, 0, 1, CT_F32, ct_cpu());
    if (t && pad >= 0) {
        float *row = (float *)tensor_data(t) + pad * dim;
        for (int64_t j = 0; j < dim; j++) row[j] = 0.0f;
    }
    w = nn_keep(t);
    ct_scope_close(s);
    return w;
}

Module *nn_embedding_ex(int64_t num_embeddings, int64_t embedding_dim,
                        const NnEmbeddingArgs *args, CtGenerator *g)
{
    if (num_embeddings <= 0 || embedding_dim <= 0 || !g) {
        ct_error(g ? CT_ERR_INVALID : CT_ERR_NULL,
                 "Embedding: need positive sizes and a generator, got %lld, %lld, %s",
                 (long long)num_embeddings, (long long)embedding_dim, g ? "g" : "NULL");
        return NULL;
    }
    int64_t pad = padding_row(num_embeddings, args);
    if (pad == -2) return NULL;
    Embedding *e = (Embedding *)nn_module_alloc(sizeof(Embedding), &embedding_vt);
    if (!e) return NULL;
    e->num = num_embeddings;
    e->dim = embedding_dim;
    e->padding_idx = pad;
    Tensor *w = embedding_weight(num_embeddings, embedding_dim, pad, g);
    const NnSlot slot = {"weight", w, &e->weight, false};
    if (nn_register_slots(&e->base, 1, &slot) != CT_OK) {
        nn_module_free(&e->base);
        return NULL;
    }
    return &e->base;
}

Module *nn_embedding(int64_t num_embeddings, int64_t embedding_dim, CtGenerator *g)
{
    return nn_embedding_ex(num_embeddings, embedding_dim, NULL, g);
}
