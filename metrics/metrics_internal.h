/* Private helpers of the metrics layer. */
#ifndef CTRAINER_METRICS_INTERNAL_H
#define CTRAINER_METRICS_INTERNAL_H

#include "ctrainer/metrics.h"

/* The inputs of one update and their lazily made host copies. */
struct MetricBatch {
    Tensor *preds, *target;
    double *preds_f64, *target_f64;
    int64_t *target_i64;
};

/* Frees the host copies (not the tensors). */
void metric_batch_release(MetricBatch *b);

/* The vtable's check (OK when it has none) and update, for collections. */
CtStatus metric_check_batch(Metric *m, MetricBatch *b);
CtStatus metric_update_batch(Metric *m, MetricBatch *b);

/* Records "<what> is NULL" unless an error is already recorded (sticky NULL
 * inputs keep the first message); returns CT_ERR_NULL. */
CtStatus metric_null(const char *name, const char *what);

/* Writes "[8, 4]" into buf (>= 128 bytes); returns buf. */
const char *metric_shape_str(const Tensor *t, char *buf);

/* True for i64, i32, u8 and bool (what comparisons give): the dtypes of
 * class indices and labels, named in messages by METRIC_INDEX_DTYPES. */
bool metric_dtype_is_index(CtDType dt);
#define METRIC_INDEX_DTYPES "i64, i32, u8 or bool"

/* MetricClassArgs' ignore_index: targets equal to index are dropped when on. */
typedef struct MetricIgnore {
    bool on;
    int64_t index;
} MetricIgnore;

static inline MetricIgnore metric_ignore_of(const MetricClassArgs *a)
{
    return (MetricIgnore){a->use_ignore_index, a->ignore_index};
}

static inline bool metric_ignored(MetricIgnore ig, int64_t target)
{
    return ig.on && target == ig.index;
}

/* CT_ERR_INVALID unless 2 <= num_classes <= 2^24 (torchmetrics wants >= 2). */
CtStatus metric_check_num_classes(const char *name, int64_t num_classes);

/* Classification inputs: preds (N, C) scores or (N) indices, target (N)
 * indices in [0, C) or ig's index. Checks shapes, dtypes and ranges (index
 * preds only of kept samples, and that they are not combined with
 * top_k > 1); records errors prefixed with `name`. */
CtStatus metric_class_check(const char *name, MetricBatch *b, int64_t num_classes,
                            int top_k, MetricIgnore ig);

/* After a successful check: true when preds are (N, C) scores. */
bool metric_class_has_scores(const MetricBatch *b);

/* Per-element inputs: task BINARY (num_labels 0): preds and target of one
 * shape (N, ...); task MULTILABEL (num_labels L >= 2): one shape (N, L, ...).
 * preds float scores or 0/1 labels, target 0/1 (index dtypes or float) or
 * ig's index. Records errors prefixed with `name`. */
CtStatus metric_label_check(const char *name, MetricBatch *b, int64_t num_labels,
                            MetricIgnore ig);

/* After a successful check: adds the batch's counts per label to counts,
 * 4 L doubles {tp[L], fp[L], fn[L], kept[L]} (L = 1 for binary), kept being
 * the elements of the label whose target is not ig's index. Scores are
 * thresholded like torchmetrics' _binary/_multilabel_stat_scores_format: the
 * sigmoid first when a score of the batch (ignored elements included) is
 * outside [0, 1], then score > threshold, in the preds' dtype. */
void metric_label_count(MetricBatch *b, int64_t num_labels, double threshold,
                        MetricIgnore ig, double *counts);

/* v rounded to dt (through f32 for the half types); v itself for f64. */
double metric_round_to(CtDType dt, double v);

/* A (score, target) pair of an exact AUROC; target is 1 (positive) or 0. */
typedef struct MetricScorePair {
    double score, target;
} MetricScorePair;

/* Sorts p[0 .. n) by score, descending (O(n log n)), and returns the area
 * under the ROC curve, tied scores forming one point, as torchmetrics'
 * _binary_roc_compute + trapezoid; 0 without positives or without negatives
 * (torchmetrics' zero fpr or tpr curve). */
double metric_roc_auc(MetricScorePair *p, int64_t n);

/* A CONCAT state in *buf (*cap doubles allocated): buf[0] = k, then k
 * values. concat_reserve makes room for `more` values past the k; on
 * failure (CT_ERR_OOM naming `what`) the state is untouched. concat_append
 * appends the k values of `other` (a state of the same layout), which may
 * be this very state (metric_merge(m, metric_state(m))): a growing buffer
 * is copied, not realloc'd, so other stays readable. */
CtStatus metric_concat_reserve(double **buf, int64_t *cap, int64_t more,
                               const char *what);
CtStatus metric_concat_append(double **buf, int64_t *cap, const double *other,
                              const char *what);

/* Index of the highest of row[0 .. c) (first one on ties; NaN counts as the
 * highest, like torch.argmax). */
int64_t metric_argmax(const double *row, int64_t c);

/* Marks in `in` (c bytes) the k highest of row[0 .. c); ties go to the lower
 * index. */
void metric_topk_mask(const double *row, int64_t c, int k, unsigned char *in);

#endif
