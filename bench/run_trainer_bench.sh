#!/bin/sh
# Interleaved Trainer vs plain-PyTorch benchmark (docs/benchmarks.md, "Trainer").
#
#   bench/run_trainer_bench.sh [BUILD_DIR] [MLP_REPEATS] [BASICNET_REPEATS]
#
# Alternates ctrainer (BUILD_DIR/bench/bench_trainer) and PyTorch
# (bench/bench_trainer_torch.py, /usr/bin/python3, 2 threads) on the same
# workloads: MLP_REPEATS rounds of 3 MLP epochs each (the first epoch of each
# process is a warm-up and left out), then BASICNET_REPEATS rounds of one
# BasicNet epoch. Then the peak RSS of examples/train_mnist (1 epoch with
# validation and test evaluation, /usr/bin/time) and of the PyTorch MLP
# script. Prints medians and ratios. Defaults: build, 5, 3.
set -eu
BUILD=${1:-build}
NMLP=${2:-5}
NBN=${3:-3}
PY=/usr/bin/python3
HERE=$(dirname "$0")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=2

epochs() { grep '^epoch_s' | awk '{print $2}'; }

i=0
while [ "$i" -lt "$NMLP" ]; do
    "$BUILD/bench/bench_trainer" --workload mlp --epochs 3 | epochs | tail -n +2 >>"$TMP/c_mlp"
    $PY "$HERE/bench_trainer_torch.py" --workload mlp --epochs 3 | epochs | tail -n +2 >>"$TMP/t_mlp"
    i=$((i + 1))
done
i=0
while [ "$i" -lt "$NBN" ]; do
    "$BUILD/bench/bench_trainer" --workload basicnet --epochs 1 | epochs >>"$TMP/c_bn"
    $PY "$HERE/bench_trainer_torch.py" --workload basicnet --epochs 1 | epochs >>"$TMP/t_bn"
    i=$((i + 1))
done
/usr/bin/time -f '%M' -o "$TMP/c_rss" "$BUILD/examples/train_mnist" --epochs 1 \
    --no-progress-bar >/dev/null
$PY "$HERE/bench_trainer_torch.py" --workload mlp --epochs 1 | grep '^peak_rss_mib' |
    awk '{print $2 * 1024}' >"$TMP/t_rss"

$PY - "$TMP" <<'PY'
import statistics, sys
d = sys.argv[1]
def vals(name):
    with open(f"{d}/{name}") as f:
        return [float(x) for x in f.read().split()]
def row(label, c, t, unit="s"):
    mc, mt = statistics.median(c), statistics.median(t)
    print(f"{label:24s} ctrainer {mc:8.3f} {unit} (n={len(c)}, {min(c):.3f}-{max(c):.3f})"
          f"  pytorch {mt:8.3f} {unit} (n={len(t)}, {min(t):.3f}-{max(t):.3f})"
          f"  pytorch/ctrainer {mt / mc:5.2f}x")
row("MLP epoch", vals("c_mlp"), vals("t_mlp"))
row("BasicNet epoch", vals("c_bn"), vals("t_bn"))
c_rss, t_rss = vals("c_rss")[0] / 1024, vals("t_rss")[0] / 1024
print(f"{'peak RSS (MLP)':24s} train_mnist {c_rss:.1f} MiB  pytorch script {t_rss:.1f} MiB"
      f"  ratio {t_rss / c_rss:.2f}x")
PY
