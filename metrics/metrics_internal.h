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

/* CT_ERR_INVALID unless 2 <= num_classes <= 2^24 (torchmetrics wants >= 2). */
CtStatus metric_check_num_classes(const char *name, int64_t num_classes);

/* Classification inputs: preds (N, C) scores or (N) indices, target (N)
 * indices in [0, C). Checks shapes, dtypes and ranges (and that index preds
 * are not combined with top_k > 1); records errors prefixed with `name`. */
CtStatus metric_class_check(const char *name, MetricBatch *b, int64_t num_classes,
                            int top_k);

/* After a successful check: true when preds are (N, C) scores. */
bool metric_class_has_scores(const MetricBatch *b);

/* Binary inputs (task BINARY): preds and target of one shape (N, ...);
 * preds float scores or 0/1 labels, target 0/1 (index dtypes or float).
 * Records errors prefixed with `name`. */
CtStatus metric_binary_check(const char *name, MetricBatch *b);

/* After a successful check: adds the batch's true positives, false positives
 * and false negatives to tp_fp_fn[0 .. 3). Scores are thresholded like
 * torchmetrics' _binary_stat_scores_format: the sigmoid first when a score of
 * the batch is outside [0, 1], then score > threshold, in the preds' dtype. */
void metric_binary_count(MetricBatch *b, double threshold, double *tp_fp_fn);

/* Index of the highest of row[0 .. c) (first one on ties; NaN counts as the
 * highest, like torch.argmax). */
int64_t metric_argmax(const double *row, int64_t c);

/* Marks in `in` (c bytes) the k highest of row[0 .. c); ties go to the lower
 * index. */
void metric_topk_mask(const double *row, int64_t c, int k, unsigned char *in);

#endif
