/* A ResNet built from a torchvision or timm state dict: the architecture is
 * read from the file's names and shapes, then the file is loaded into it. */
#include <stdio.h>
#include <string.h>

#include "zoo_internal.h"

typedef struct ResNetKind {
    const char *name;
    Module *(*create)(const NnResNetArgs *args, CtGenerator *g);
    bool deep, bottleneck;
    int depth[4];
} ResNetKind;

static const ResNetKind kinds[] = {
    {"resnet18", nn_model_resnet18, false, false, {2, 2, 2, 2}},
    {"resnet34", nn_model_resnet34, false, false, {3, 4, 6, 3}},
    {"resnet50", nn_model_resnet50, false, true, {3, 4, 6, 3}},
    {"resnet50d", nn_model_resnet50d, true, true, {3, 4, 6, 3}},
};

/* The number of blocks of stage s (1..4): layer<s>.<j>.conv1.weight for
 * j = 0, 1, ... */
static int stage_depth(const CtStateDict *d, int s)
{
    char key[64];
    int j = 0;
    for (;; j++) {
        snprintf(key, sizeof key, "layer%d.%d.conv1.weight", s, j);
        if (!ct_state_dict_get(d, key)) return j;
    }
}

static const ResNetKind *detect(const char *path, const CtStateDict *d)
{
    ResNetKind found = {.deep = ct_state_dict_get(d, "conv1.0.weight") != NULL,
                        .bottleneck =
                            ct_state_dict_get(d, "layer1.0.conv3.weight") != NULL};
    for (int s = 0; s < 4; s++) found.depth[s] = stage_depth(d, s + 1);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (kinds[k].deep == found.deep && kinds[k].bottleneck == found.bottleneck &&
            !memcmp(kinds[k].depth, found.depth, sizeof found.depth))
            return &kinds[k];
    }
    ct_error(CT_ERR_INVALID,
             "%s: a ResNet with a %s stem and %s blocks {%d, %d, %d, %d} per stage is "
             "none of resnet18, resnet34, resnet50 (torchvision) or resnet50d (timm)",
             path, found.deep ? "deep (conv1.0)" : "7x7 (conv1)",
             found.bottleneck ? "Bottleneck" : "BasicBlock", found.depth[0],
             found.depth[1], found.depth[2], found.depth[3]);
    return NULL;
}

/* The file's dimension dim of `name`, which must be a tensor of ndim dims;
 * -1 (recorded) otherwise. */
static int64_t file_dim(const char *path, const CtStateDict *d, const char *name,
                        int ndim, int dim)
{
    const Tensor *t = ct_state_dict_get(d, name);
    if (t && tensor_ndim(t) == ndim) return tensor_shape(t)[dim];
    ct_error(CT_ERR_INVALID, "%s: no %d-d tensor \"%s\": not a ResNet state dict", path,
             ndim, name);
    return -1;
}

/* Loads d into m; with new_head, everything but fc (fc.weight and fc.bias
 * are dropped from d beforehand). */
static CtStatus load_body(Module *m, CtStateDict *d, bool new_head, const char *path)
{
    NnLoadReport report;
    CtStatus st;
    if (!new_head) {
        st = nn_module_load_state_dict(m, d, true, &report);
    } else {
        ct_state_dict_remove(d, "fc.weight");
        ct_state_dict_remove(d, "fc.bias");
        st = nn_module_load_state_dict(m, d, false, &report);
        if (st == CT_OK &&
            (report.n_missing != 2 || report.n_unexpected || report.n_mismatched))
            st = ct_error(CT_ERR_INVALID,
                          "load_state_dict with a new head: %s (only fc may differ)",
                          report.message);
    }
    return st == CT_OK ? CT_OK : ct_error_wrap(st, "%s", path);
}

Module *nn_model_resnet_load(const char *path, const NnResNetArgs *args, CtGenerator *g,
                             const char **arch)
{
    if (!path) {
        ct_error(CT_ERR_NULL, "nn_model_resnet_load: path is NULL");
        return NULL;
    }
    CtStateDict *d = nn_safetensors_load(path, ct_cpu());
    const ResNetKind *kind = d ? detect(path, d) : NULL;
    const char *stem = kind && kind->deep ? "conv1.0.weight" : "conv1.weight";
    int64_t in_channels = kind ? file_dim(path, d, stem, 4, 1) : -1;
    int64_t classes = in_channels > 0 ? file_dim(path, d, "fc.weight", 2, 0) : -1;
    Module *m = NULL;
    if (classes > 0 && args && args->in_channels && args->in_channels != in_channels) {
        ct_error(CT_ERR_SHAPE, "%s: the stem takes %lld input channels, not %lld", path,
                 (long long)in_channels, (long long)args->in_channels);
    } else if (classes > 0) {
        bool new_head = args && args->num_classes;
        int64_t want = new_head ? args->num_classes : classes;
        m = kind->create(&(NnResNetArgs){.num_classes = want,
                                         .in_channels = in_channels,
                                         .channels_last = args && args->channels_last},
                         g);
        if (m && load_body(m, d, new_head, path) != CT_OK) {
            nn_module_free(m);
            m = NULL;
        }
    }
    ct_state_dict_free(d);
    if (m && arch) *arch = kind->name;
    return m;
}
