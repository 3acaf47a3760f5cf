/* ResNets: torchvision's resnet18/34/50 and timm's resnet50d.
 *
 * torchvision (v1.5): a 7x7 stride-2 stem conv, bn, relu, 3x3 max-pool, four
 * stages of BasicBlocks (18, 34) or Bottlenecks (50, stride on the 3x3 conv),
 * adaptive average pool, fc. A block's shortcut is downsample =
 * Sequential(conv1x1 stride s, bn) when the shape changes.
 *
 * ResNet-D (timm's resnet50d): the stem is three 3x3 convs (3->32 s2,
 * 32->32, 32->64) as Sequential conv1.{0..6}, and the shortcut averages
 * before its stride-1 1x1 conv: downsample = Sequential(AvgPool2d(2, 2,
 * ceil_mode, count_include_pad=False) or Identity, conv1x1, bn).
 *
 * Initialisation: convs kaiming_normal_(fan_out, relu), batch norms weight 1
 * bias 0, fc PyTorch's Linear default. torchvision leaves the last BN of a
 * block at 1 (zero_init_residual=False); timm zeroes it for resnet50d
 * (zero_init_last=True), and so do we. */
#include <stdlib.h>

#include "zoo_internal.h"

typedef struct ResNetSpec {
    const char *name; /* for errors: "resnet18" */
    bool bottleneck;  /* Bottleneck (expansion 4) instead of BasicBlock */
    int depth[4];     /* blocks per stage */
    bool deep;        /* ResNet-D stem and shortcut; zero-init the last BN */
} ResNetSpec;

/* ------------------------------------------------------------- blocks */

typedef struct Block {
    Module base;
    /* Borrowed children; conv3/bn3 only in a Bottleneck, downsample NULL when
     * the shortcut is the identity. The "relu" child is registered for
     * torchvision's layout; the forward fuses every ReLU into the op before
     * it. */
    Module *conv1, *bn1, *conv2, *bn2, *conv3, *bn3, *downsample;
} Block;

/* BasicBlock: relu(bn2(conv2(relu(bn1(conv1 x)))) + shortcut x).
 * Bottleneck: one more relu, conv3, bn3 before the sum. */
static Tensor *block_forward(Module *m, Tensor *x)
{
    Block *b = (Block *)m;
    if (!x) return NULL;
    /* each bn + relu is one op (nn_forward_relu) */
    Tensor *h = nn_forward_relu(b->bn1, nn_forward(b->conv1, x));
    if (b->conv3) {
        h = nn_forward_relu(b->bn2, nn_forward(b->conv2, h));
        h = nn_forward(b->bn3, nn_forward(b->conv3, h));
    } else {
        h = nn_forward(b->bn2, nn_forward(b->conv2, h));
    }
    Tensor *shortcut = b->downsample ? nn_forward(b->downsample, x) : x;
    return tensor_add_relu(h, shortcut);
}

static const ModuleVtable basic_block_vt = {.type = "BasicBlock",
                                            .forward = block_forward};
static const ModuleVtable bottleneck_vt = {.type = "Bottleneck",
                                           .forward = block_forward};

static Module *bn(int64_t c)
{
    return nn_batch_norm2d(c, 1e-5, 0.1);
}

/* The shortcut projection from in to out channels at stride s. */
static Module *downsample_new(const ResNetSpec *spec, int64_t in, int64_t out, int s,
                              CtGenerator *g)
{
    if (!spec->deep) {
        Module *mods[2] = {zoo_conv_kaiming(in, out, 1, s, g), bn(out)};
        return zoo_sequential(2, mods);
    }
    CtPool2dArgs pool = {.kernel = {2, 2},
                         .stride = {s, s},
                         .ceil_mode = true,
                         .count_include_pad = false};
    Module *mods[3] = {s != 1 ? nn_avg_pool2d(&pool) : nn_identity(),
                       zoo_conv_kaiming(in, out, 1, 1, g), bn(out)};
    return zoo_sequential(3, mods);
}

/* Children in torchvision's registration order (it fixes the state-dict
 * order): BasicBlock conv1 bn1 relu conv2 bn2 downsample; Bottleneck conv1
 * bn1 conv2 bn2 conv3 bn3 relu downsample. */
static bool block_add_children(Block *b, const ResNetSpec *spec, int64_t in,
                               int64_t planes, int s, CtGenerator *g)
{
    Module *m = &b->base;
    int64_t out = spec->bottleneck ? 4 * planes : planes;
    if (spec->bottleneck) {
        if (!(b->conv1 = zoo_child(m, "conv1", zoo_conv_kaiming(in, planes, 1, 1, g))) ||
            !(b->bn1 = zoo_child(m, "bn1", bn(planes))) ||
            !(b->conv2 =
                  zoo_child(m, "conv2", zoo_conv_kaiming(planes, planes, 3, s, g))) ||
            !(b->bn2 = zoo_child(m, "bn2", bn(planes))) ||
            !(b->conv3 = zoo_child(m, "conv3", zoo_conv_kaiming(planes, out, 1, 1, g))) ||
            !(b->bn3 = zoo_child(m, "bn3", bn(out))) || !zoo_child(m, "relu", nn_relu()))
            return false;
    } else {
        if (!(b->conv1 = zoo_child(m, "conv1", zoo_conv_kaiming(in, planes, 3, s, g))) ||
            !(b->bn1 = zoo_child(m, "bn1", bn(planes))) ||
            !zoo_child(m, "relu", nn_relu()) ||
            !(b->conv2 =
                  zoo_child(m, "conv2", zoo_conv_kaiming(planes, planes, 3, 1, g))) ||
            !(b->bn2 = zoo_child(m, "bn2", bn(planes))))
            return false;
    }
    if (s != 1 || in != out) {
        b->downsample = zoo_child(m, "downsample", downsample_new(spec, in, out, s, g));
        if (!b->downsample) return false;
    }
    if (spec->deep && spec->bottleneck)
        return nn_init_constant_(nn_module_get(b->bn3, "weight"), 0.0) == CT_OK;
    return true;
}

static Module *block_new(const ResNetSpec *spec, int64_t in, int64_t planes, int s,
                         CtGenerator *g)
{
    Block *b = calloc(1, sizeof *b);
    if (!b) {
        ct_error(CT_ERR_OOM, "%s: out of memory", spec->name);
        return NULL;
    }
    if (nn_module_init(&b->base, spec->bottleneck ? &bottleneck_vt : &basic_block_vt) !=
        CT_OK) {
        free(b);
        return NULL;
    }
    if (!block_add_children(b, spec, in, planes, s, g)) {
        nn_module_free(&b->base);
        return NULL;
    }
    return &b->base;
}

/* torchvision's _make_layer: n blocks, the first at stride s taking *in
 * channels; *in becomes the stage's output width. */
static Module *stage_new(const ResNetSpec *spec, int64_t *in, int64_t planes, int n,
                         int s, CtGenerator *g)
{
    Module *blocks[8] = {0}; /* the largest stage here has 6 blocks */
    if (n < 1 || n > 8) {
        ct_error(CT_ERR_INVALID, "%s: %d blocks per stage (1..8)", spec->name, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        blocks[i] = block_new(spec, *in, planes, i == 0 ? s : 1, g);
        if (!blocks[i]) {
            zoo_free_all(i, blocks);
            return NULL;
        }
        *in = spec->bottleneck ? 4 * planes : planes;
    }
    return nn_sequential(n, blocks);
}

/* ------------------------------------------------------------- network */

typedef struct ResNet {
    Module base;
    const ResNetSpec *spec;
    int64_t in_channels;
    bool channels_last; /* NnResNetArgs.channels_last */
    /* Borrowed children. The "relu" child is registered for torchvision's
     * layout and repr; the forward fuses it into bn1 (nn_forward_relu). */
    Module *conv1, *bn1, *maxpool, *layer[4], *avgpool, *fc;
} ResNet;

/* x: (N, in_channels, H, W) -> logits (N, num_classes). */
static Tensor *resnet_forward(Module *m, Tensor *x)
{
    ResNet *r = (ResNet *)m;
    if (zoo_check_input(r->spec->name, x, r->in_channels, -1, -1) != CT_OK) return NULL;
    Tensor *h = nn_forward(r->conv1, x);
    if (r->channels_last) h = tensor_channels_last(h);
    h = nn_forward(r->maxpool, nn_forward_relu(r->bn1, h));
    for (int i = 0; i < 4; i++) h = nn_forward(r->layer[i], h);
    h = tensor_flatten(nn_forward(r->avgpool, h), 1, -1);
    return nn_forward(r->fc, h);
}

static const ModuleVtable resnet_vt = {.type = "ResNet", .forward = resnet_forward};

/* 7x7 stride-2 conv, or ResNet-D's three 3x3 convs. */
static Module *stem_new(const ResNetSpec *spec, int64_t in, CtGenerator *g)
{
    if (!spec->deep) return zoo_conv_kaiming(in, 64, 7, 2, g);
    Module *mods[7] = {zoo_conv_kaiming(in, 32, 3, 2, g), bn(32), nn_relu(),
                       zoo_conv_kaiming(32, 32, 3, 1, g), bn(32), nn_relu(),
                       zoo_conv_kaiming(32, 64, 3, 1, g)};
    return zoo_sequential(7, mods);
}

static bool resnet_add_children(ResNet *r, int64_t num_classes, CtGenerator *g)
{
    static const char *const names[4] = {"layer1", "layer2", "layer3", "layer4"};
    const ResNetSpec *spec = r->spec;
    Module *m = &r->base;
    CtPool2dArgs pool = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    if (!(r->conv1 = zoo_child(m, "conv1", stem_new(spec, r->in_channels, g))) ||
        !(r->bn1 = zoo_child(m, "bn1", bn(64))) || !zoo_child(m, "relu", nn_relu()) ||
        !(r->maxpool = zoo_child(m, "maxpool", nn_max_pool2d(&pool))))
        return false;
    int64_t width = 64;
    for (int i = 0; i < 4; i++) {
        Module *stage = stage_new(spec, &width, 64 << i, spec->depth[i], i ? 2 : 1, g);
        if (!(r->layer[i] = zoo_child(m, names[i], stage))) return false;
    }
    return (r->avgpool = zoo_child(m, "avgpool", nn_adaptive_avg_pool2d(1, 1))) &&
           (r->fc = zoo_child(m, "fc", nn_linear(width, num_classes, true, g)));
}

static Module *resnet_new(const ResNetSpec *spec, const NnResNetArgs *args,
                          CtGenerator *g)
{
    int64_t num_classes = args && args->num_classes ? args->num_classes : 1000;
    int64_t in_channels = args && args->in_channels ? args->in_channels : 3;
    if (num_classes < 0 || in_channels < 0) {
        ct_error(CT_ERR_INVALID,
                 "%s: num_classes %lld and in_channels %lld must be positive", spec->name,
                 (long long)num_classes, (long long)in_channels);
        return NULL;
    }
    if (zoo_check_generator(spec->name, g) != CT_OK) return NULL;
    ResNet *r = calloc(1, sizeof *r);
    if (!r) {
        ct_error(CT_ERR_OOM, "%s: out of memory", spec->name);
        return NULL;
    }
    if (nn_module_init(&r->base, &resnet_vt) != CT_OK) {
        free(r);
        return NULL;
    }
    r->spec = spec;
    r->in_channels = in_channels;
    r->channels_last = args && args->channels_last;
    if (!resnet_add_children(r, num_classes, g)) {
        nn_module_free(&r->base);
        return NULL;
    }
    return &r->base;
}

static const ResNetSpec resnet18_spec = {"resnet18", false, {2, 2, 2, 2}, false};
static const ResNetSpec resnet34_spec = {"resnet34", false, {3, 4, 6, 3}, false};
static const ResNetSpec resnet50_spec = {"resnet50", true, {3, 4, 6, 3}, false};
static const ResNetSpec resnet50d_spec = {"resnet50d", true, {3, 4, 6, 3}, true};

Module *nn_model_resnet18(const NnResNetArgs *args, CtGenerator *g)
{
    return resnet_new(&resnet18_spec, args, g);
}

Module *nn_model_resnet34(const NnResNetArgs *args, CtGenerator *g)
{
    return resnet_new(&resnet34_spec, args, g);
}

Module *nn_model_resnet50(const NnResNetArgs *args, CtGenerator *g)
{
    return resnet_new(&resnet50_spec, args, g);
}

Module *nn_model_resnet50d(const NnResNetArgs *args, CtGenerator *g)
{
    return resnet_new(&resnet50d_spec, args, g);
}
