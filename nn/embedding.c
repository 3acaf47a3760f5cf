/* Embedding: a lookup table weight (num_embeddings, embedding_dim). */
#include "nn_internal.h"

typedef struct Embedding {
    Module base;
    int64_t num, dim;
    Tensor *weight;
} Embedding;

static Tensor *embedding_forward(Module *m, Tensor *x)
{
    /* tensor_embedding names out-of-range indices with their position */
    return tensor_embedding(((Embedding *)m)->weight, x);
}

static void embedding_extra_repr(const Module *m, char *buf, size_t n)
{
    const Embedding *e = (const Embedding *)m;
    snprintf(buf, n, "%lld, %lld", (long long)e->num, (long long)e->dim);
}

static const ModuleVtable embedding_vt = {.type = "Embedding",
                                          .forward = embedding_forward,
                                          .extra_repr = embedding_extra_repr};

Module *nn_embedding(int64_t num_embeddings, int64_t embedding_dim, CtGenerator *g)
{
    if (num_embeddings <= 0 || embedding_dim <= 0 || !g) {
        ct_error(g ? CT_ERR_INVALID : CT_ERR_NULL,
                 "Embedding: need positive sizes and a generator, got %lld, %lld, %s",
                 (long long)num_embeddings, (long long)embedding_dim, g ? "g" : "NULL");
        return NULL;
    }
    Embedding *e = (Embedding *)nn_module_alloc(sizeof(Embedding), &embedding_vt);
    if (!e) return NULL;
    e->num = num_embeddings;
    e->dim = embedding_dim;
    Tensor *w = NULL;
    CtScope *s = ct_scope_open();
    if (s) {
        w = nn_keep(tensor_normal(g, 2, (const int64_t[]){num_embeddings, embedding_dim},
                                  0, 1, CT_F32, ct_cpu()));
        ct_scope_close(s);
    }
    const NnSlot slot = {"weight", w, &e->weight, false};
    if (nn_register_slots(&e->base, 1, &slot) != CT_OK) {
        nn_module_free(&e->base);
        return NULL;
    }
    return &e->base;
}
