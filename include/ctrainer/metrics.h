/* ctrainer — metrics: accumulate over batches, compute, merge across ranks.
 *
 * A Metric is fed batches with metric_update(m, preds, target) and answers
 * metric_compute(m, &value) at any point (usually once per epoch); reset
 * starts over. Values follow torchmetrics 1.2 (task="multiclass"/"binary"/
 * "multilabel",
 * multidim_average="global", optional ignore_index): the same formulas, the same
 * zero-division rule (a 0/0 score is 0) and the same classes left out of
 * macro averages. Inputs may live on any device and in any layout: each
 * update copies them to the host once; metric state is small and always on
 * the host, in f64.
 *
 * Distributed evaluation: every metric exposes its state as a flat f64 array
 * (metric_state) and merges another rank's state into its own
 * (metric_merge). The merge rule is element-wise SUM for every built-in but
 * Min/Max (MIN/MAX) and AUROC (CONCAT, see metric_merge_rule), so the
 * runtime can all-reduce:
 *
 *     int64_t n; const double *s = metric_state(m, &n);
 *     copy s to buf; all-reduce buf with the op of metric_merge_rule(m);
 *     metric_reset(m); metric_merge(m, buf);   // m now holds every rank's data
 *
 * Errors: functions return NULL/CtStatus and record a message naming the
 * metric ("accuracy: target value 7 at position 3 is outside [0, 4)"). An
 * update that fails leaves the state unchanged. A NULL metric or NULL preds
 * (say from a failed op) returns CT_ERR_NULL without overwriting the first
 * recorded error.
 */
#ifndef CTRAINER_METRICS_H
#define CTRAINER_METRICS_H

#include "ctrainer/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Metric Metric;
typedef struct MetricBatch MetricBatch;

/* How two states combine (what an all-reduce over ranks must do). */
typedef enum MetricMergeRule {
    METRIC_MERGE_SUM = 0, /* element-wise sum (counts, sums, weights) */
    METRIC_MERGE_MIN,     /* element-wise min */
    METRIC_MERGE_MAX,     /* element-wise max */
    /* Variable length: state = {k, then k doubles}; merging appends the
     * other's k doubles. All-gather the states (their lengths differ) and
     * merge each other rank's state in rank order. */
    METRIC_MERGE_CONCAT,
} MetricMergeRule;

/* ------------------------------------------------------------ the vtable */

/* A metric implementation. `self` is the implementation's state. Slots:
 * check   optional: validates a batch without changing state (a collection
 *         checks every metric before updating any);
 * update  accumulates a batch that passed check; on error the state must be
 *         unchanged;
 * compute scalar value; NULL for matrix-valued metrics;
 * compute_tensor optional: the value as a new tensor (owned like any new
 *         tensor: by the open scope or the caller); NULL builds a 0-d f64
 *         tensor from compute;
 * reset, state, merge, free: as metric_reset/_state/_merge/_free. */
typedef struct MetricVtable {
    CtStatus (*check)(void *self, MetricBatch *b);
    CtStatus (*update)(void *self, MetricBatch *b);
    CtStatus (*compute)(void *self, double *out);
    Tensor *(*compute_tensor)(void *self);
    void (*reset)(void *self);
    const double *(*state)(void *self, int64_t *n);
    CtStatus (*merge)(void *self, const double *other_state);
    void (*free)(void *self);
    MetricMergeRule merge_rule;
} MetricVtable;

/* Wraps an implementation. `name` is copied (truncated to 31 chars); vt must
 * outlive the metric (a static const struct). Takes ownership of self, also
 * on failure (vt->free(self) is called). Error: NULL vt or a NULL required
 * slot (update, reset, state, merge, free, and compute or compute_tensor). */
Metric *metric_create(const char *name, const MetricVtable *vt, void *self);

/* The inputs of one update, for implementations. preds/target are the
 * tensors given to metric_update (target may be NULL). The host views are
 * row-major copies made on first use and shared by every metric of a
 * collection; they stay valid for the call. NULL + message on failure. */
Tensor *metric_batch_preds(const MetricBatch *b);
Tensor *metric_batch_target(const MetricBatch *b);
const double *metric_batch_preds_f64(MetricBatch *b);
const double *metric_batch_target_f64(MetricBatch *b);
const int64_t *metric_batch_target_i64(MetricBatch *b);

/* ------------------------------------------------------------ using one */

/* Accumulates one batch. What preds and target mean depends on the metric
 * (see the constructors). Errors leave the state unchanged. */
CtStatus metric_update(Metric *m, Tensor *preds, Tensor *target);
/* Accumulates one value (a loss, say): metric_update with 0-d f64 tensors.
 * weight is used by Mean; the other aggregators need weight == 1. */
CtStatus metric_update_scalar(Metric *m, double value, double weight);
/* The value over everything seen since creation or the last reset.
 * Error: a matrix-valued metric (use metric_compute_tensor). */
CtStatus metric_compute(Metric *m, double *value);
/* The value as a new tensor (0-d f64 for scalars; (C, C) i64 for the
 * confusion matrix, f64 when normalized; (C) f64 for average NONE). Owned
 * by the open scope, or by the caller when none is open. */
Tensor *metric_compute_tensor(Metric *m);
/* True when metric_compute gives the value. */
bool metric_is_scalar(const Metric *m);
/* Forgets everything seen. */
void metric_reset(Metric *m);
/* The state as n doubles, owned by the metric, valid until its next update,
 * reset, merge or free. NULL (n = 0) for a NULL metric. */
const double *metric_state(const Metric *m, int64_t *n);
/* Merges another metric's state (from metric_state of a metric created with
 * the same constructor and arguments, on another rank) into m, by
 * metric_merge_rule(m). The result equals one metric that saw both inputs. */
CtStatus metric_merge(Metric *m, const double *other_state);
MetricMergeRule metric_merge_rule(const Metric *m);
/* "accuracy", "f1", ...; "" for NULL. */
const char *metric_name(const Metric *m);
/* NULL is a no-op. */
void metric_free(Metric *m);

/* ------------------------------------------------------------- built-ins */

typedef enum MetricAverage {
    METRIC_AVG_MICRO = 0, /* pool the counts of all classes (the default) */
    METRIC_AVG_MACRO,     /* unweighted mean over classes; multiclass leaves
                             out classes never predicted and never present,
                             multilabel keeps every label */
    METRIC_AVG_WEIGHTED,  /* mean weighted by support (tp + fn) */
    METRIC_AVG_NONE,      /* one value per class: metric_compute_tensor */
} MetricAverage;

typedef enum MetricTask {
    METRIC_TASK_MULTICLASS = 0, /* one class in [0, C) per sample (the default) */
    METRIC_TASK_BINARY,         /* one 0/1 label per element, thresholded scores */
    METRIC_TASK_MULTILABEL,     /* L 0/1 labels per sample, thresholded scores */
} MetricTask;

typedef struct MetricClassArgs {
    int64_t num_classes;   /* multiclass: C >= 2; binary: 0 (or 2);
                              multilabel: the number of labels L >= 2 */
    int top_k;             /* 0 means 1; a sample counts as predicting each of
                              its top_k highest-scoring classes (multiclass) */
    MetricAverage average; /* multiclass, multilabel; binary: MICRO (0) only */
    MetricTask task;
    double threshold;      /* binary, multilabel: a score > threshold is
                              positive; in [0, 1]; 0 means 0.5 (torchmetrics'
                              default), so threshold 0 itself is not
                              available */
    int64_t ignore_index;  /* with use_ignore_index: samples (binary,
                              multilabel: elements) whose target equals it are
                              dropped before counting; it may lie outside
                              [0, C) */
    bool use_ignore_index; /* false (the default): torchmetrics' None */
} MetricClassArgs;

/* Classification metrics (stat scores): per class c, the counts tp, fp, fn
 * and tn = samples - tp - fp - fn give
 *   accuracy (multiclass), recall   tp / (tp + fn)
 *   accuracy (binary, multilabel)   (tp + tn) / (tp + tn + fp + fn)
 *   precision                       tp / (tp + fp)
 *   specificity                     tn / (tn + fp)
 *   fbeta                           (1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp)
 *   f1                              fbeta with b = 1: 2 tp / (2 tp + fp + fn)
 * micro pools the counts of all classes first; macro and weighted average
 * the per-class values (torchmetrics' _adjust_weights_safe_divide; for
 * multilabel, macro averages over every label, none left out).
 *
 * task MULTICLASS, like torchmetrics' Multiclass* (multidim_average="global"):
 * preds: (N, C) scores (logits or probabilities, any float dtype: argmax, or
 *        the top_k classes; ties go to the lower class index) or (N) class
 *        indices (i64, i32, u8 or bool; top_k 1 only);
 * target: (N) class indices (i64, i32, u8 or bool) in [0, C), or
 *        ignore_index (any value) when use_ignore_index is set: such a sample
 *        counts nowhere (not in tp, fp, fn or tn of any class), whatever its
 *        preds.
 *
 * task BINARY, like torchmetrics' Binary* (num_classes, top_k and average do
 * not apply; the value is about the positive class):
 * preds: (N, ...) float scores, or 0/1 labels (i64, i32, u8 or bool). Float
 *        scores are probabilities, or logits: a batch with a score outside
 *        [0, 1] (or NaN) goes through the sigmoid first, as torchmetrics
 *        does. A score counts as 1 when > threshold; the sigmoid and the
 *        comparison run in the scores' dtype, as in torch (an f32 0.3 is not
 *        above threshold 0.3).
 * target: the shape of preds, 0/1 (i64, i32, u8, bool, or float as
 *        torchmetrics accepts), or ignore_index when use_ignore_index is set:
 *        that element is dropped. As in torchmetrics, the sigmoid decision
 *        looks at the whole batch, dropped elements included, and label preds
 *        must be 0/1 there too.
 *
 * task MULTILABEL, like torchmetrics' Multilabel* (num_labels = L is given in
 * num_classes; average MICRO, MACRO, WEIGHTED or NONE over the L labels, each
 * label scored like a binary task; top_k does not apply): preds and target
 * (N, L, ...) (extra dimensions count as more samples, as torchmetrics'
 * multidim_average="global"), with the dtypes, sigmoid decision (per batch),
 * threshold and ignore_index (per element: an ignored element counts for no
 * label, the other labels of its sample still count) of task BINARY.
 *
 * State: 3 C + 1 doubles {tp[C], fp[C], fn[C], samples} for multiclass; 4 L
 * doubles {tp[L], fp[L], fn[L], samples[L]} (the elements counted per label)
 * for multilabel and binary (L = 1); merge rule SUM. Errors at creation
 * (CT_ERR_INVALID): num_classes < 2 (multiclass; multilabel: L < 2), top_k
 * outside [1, C], unknown average or task, binary with num_classes other than
 * 0 or 2, top_k > 1 or an average other than MICRO, multilabel with top_k > 1,
 * threshold outside [0, 1], beta not a finite number > 0; at update: shapes that
 * do not fit (CT_ERR_SHAPE, naming both), wrong dtypes (CT_ERR_DTYPE),
 * targets (other than ignore_index) or index preds of kept samples outside
 * [0, C) or {0, 1} (CT_ERR_INVALID, naming the value and position; binary and
 * multilabel label preds must be 0/1 at every element). */
Metric *metric_accuracy_create(const MetricClassArgs *args);
Metric *metric_precision_create(const MetricClassArgs *args);
Metric *metric_recall_create(const MetricClassArgs *args);
Metric *metric_specificity_create(const MetricClassArgs *args);
/* torchmetrics' FBetaScore(beta=beta); metric_f1_create is beta 1. */
Metric *metric_fbeta_create(const MetricClassArgs *args, double beta);
Metric *metric_f1_create(const MetricClassArgs *args);

/* Counts (C, C): row = target class, column = predicted class (argmax).
 * Matrix-valued: metric_compute_tensor gives an i64 (C, C) tensor. Inputs
 * and errors as for multiclass accuracy (top_k 1). State: the C * C counts,
 * row-major, merge rule SUM. */
Metric *metric_confusion_matrix_create(int64_t num_classes);

typedef enum MetricNormalize {
    METRIC_NORMALIZE_NONE = 0, /* counts */
    METRIC_NORMALIZE_TRUE,     /* each row (target class) sums to 1 */
    METRIC_NORMALIZE_PRED,     /* each column (predicted class) sums to 1 */
    METRIC_NORMALIZE_ALL,      /* the whole matrix sums to 1 */
} MetricNormalize;

/* ConfusionMatrix(task="multiclass", normalize=...): the counts divided by
 * their row, column or total sums, as an f64 (C, C) tensor (i64 counts for
 * NONE); an empty row or column gives 0s, not NaN, as torchmetrics (which
 * warns). Same state and errors as metric_confusion_matrix_create, plus
 * CT_ERR_INVALID for an unknown normalize. */
Metric *metric_confusion_matrix_normalized_create(int64_t num_classes,
                                                  MetricNormalize normalize);
/* MulticlassConfusionMatrix(num_classes, ignore_index=..., normalize=...)
 * from args: num_classes, ignore_index and use_ignore_index are used (a
 * sample whose target is ignore_index is not counted); top_k must be 0 or 1,
 * average MICRO (0), task MULTICLASS (this library offers no binary or
 * multilabel confusion matrix) and threshold 0, else CT_ERR_INVALID. */
Metric *metric_confusion_matrix_create_args(const MetricClassArgs *args,
                                            MetricNormalize normalize);

/* Aggregators. preds: values of any shape and numeric dtype; target: NULL,
 * or for Mean only, weights with the values' numel or one element. A NaN
 * value or weight is skipped with its pair, like torchmetrics'
 * nan_strategy="ignore". Mean = sum(w v) / sum(w) (NaN when nothing was
 * seen); Sum = 0, Min = +inf, Max = -inf when nothing was seen. */
Metric *metric_mean_create(void);
Metric *metric_sum_create(void);
Metric *metric_min_create(void);
Metric *metric_max_create(void);

/* Binary AUROC, exact: trapezoid over the ROC at every distinct score (tied
 * scores form one point), like torchmetrics' BinaryAUROC(thresholds=None)
 * and sklearn. preds: (N) float scores; a batch with a score outside [0, 1]
 * is mapped through the sigmoid first (as torchmetrics does). target: (N)
 * 0/1 (i64, i32, u8 or bool). 0 when only one class has been seen, or
 * nothing (torchmetrics raises then). Keeps every (score, target) pair: the
 * state grows with the data (state {k, k doubles}, merge rule CONCAT). */
Metric *metric_auroc_create(void);

/* MulticlassAUROC(num_classes, average, thresholds=None, ignore_index):
 * one-vs-rest exact AUROC per class c (scores preds[:, c], positives the
 * samples of class c), as metric_auroc_create computes it. args: num_classes
 * (C >= 2), average MACRO (torchmetrics' default: the mean over all C
 * classes), WEIGHTED (weights = each class's number of samples) or NONE (a
 * (C) f64 tensor from metric_compute_tensor); MICRO is an error (torchmetrics
 * has none); ignore_index / use_ignore_index as for accuracy; top_k 0 or 1,
 * task MULTICLASS and threshold 0. A class without positives or without
 * negatives scores 0 and still counts in the macro mean (torchmetrics 1.2.1
 * warns and returns 0 for it); 0 before any update (torchmetrics raises).
 * preds: (N, C) float probabilities or logits: a batch whose kept scores are
 * not all in [0, 1] goes through the softmax over classes first (as
 * torchmetrics decides, after dropping ignored samples), computed in f64 and
 * rounded to the scores' dtype (so f32 probabilities that saturate to 1 tie,
 * as in torch).
 * target: (N) class indices (i64, i32, u8 or bool) in [0, C) or ignore_index.
 * Keeps the scores of every kept sample: state {k, then k / (C + 1) rows of
 * C scores (after the softmax) and the target}, merge rule CONCAT. compute
 * sorts each class's scores: O(C N log N). Errors: shapes (CT_ERR_SHAPE),
 * dtypes (CT_ERR_DTYPE), a target outside [0, C) that is not ignore_index or
 * a NaN score of a kept sample (CT_ERR_INVALID, naming value and position). */
Metric *metric_multiclass_auroc_create(const MetricClassArgs *args);

/* ------------------------------------------------------------ collection */

typedef struct MetricCollection MetricCollection;

/* One computed entry; name is owned by the collection. value is NAN for a
 * matrix-valued metric (scalar false): read it with metric_compute_tensor. */
typedef struct MetricValue {
    const char *name;
    double value;
    bool scalar;
} MetricValue;

MetricCollection *metric_collection_create(void);
/* Frees the collection and its metrics; NULL is a no-op. */
void metric_collection_free(MetricCollection *c);
/* Appends m under `name` (NULL: metric_name(m); copied). Takes ownership of
 * m, also on failure (m is freed), so creation can be written inline. Errors:
 * NULL m (sticky), a duplicate name, a name longer than 63 bytes. */
CtStatus metric_collection_add(MetricCollection *c, const char *name, Metric *m);
int64_t metric_collection_size(const MetricCollection *c);
/* The i-th metric in insertion order (borrowed), or NULL; by name, or NULL. */
Metric *metric_collection_get(const MetricCollection *c, int64_t i);
const char *metric_collection_name(const MetricCollection *c, int64_t i);
Metric *metric_collection_find(const MetricCollection *c, const char *name);
/* Updates every metric with the same batch, copied to the host once. Every
 * metric checks the batch first: on error no metric has changed. */
CtStatus metric_collection_update(MetricCollection *c, Tensor *preds, Tensor *target);
/* Computes every metric into out[0 .. size) in insertion order; cap is out's
 * length (error when smaller than the size). */
CtStatus metric_collection_compute(MetricCollection *c, MetricValue *out, int64_t cap);
void metric_collection_reset(MetricCollection *c);

#ifdef __cplusplus
}
#endif
#endif
