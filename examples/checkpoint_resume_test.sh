#!/bin/sh
# Resume checks of train_mnist (CTest): the --save-model file of an
# uninterrupted 2-epoch run must be byte-identical to that of a run resumed
# from a checkpoint.
#   checkpoint_resume_test.sh TRAIN_MNIST WORKDIR epoch  # stop after epoch 1
#   checkpoint_resume_test.sh TRAIN_MNIST WORKDIR kill   # SIGKILL mid-epoch 2
set -eu
bin=$1 work=$2 mode=$3
common="--limit-batches 150 --seed 1 --no-progress-bar"
rm -rf "$work"
mkdir -p "$work"
"$bin" --epochs 2 $common --save-model "$work/full.safetensors" >"$work/full.log"

if [ "$mode" = epoch ]; then
    "$bin" --epochs 1 $common --checkpoint-dir "$work/ckpt" >"$work/first.log"
else
    # 150 batches an epoch, a checkpoint every 10 updates: checkpoint_15
    # (update 160) is the first one inside epoch 2
    "$bin" --epochs 2 $common --checkpoint-dir "$work/ckpt" --checkpoint-every 10 \
        >"$work/first.log" &
    pid=$!
    while [ ! -d "$work/ckpt/checkpoint_15" ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "run 1 ended before its first checkpoint in epoch 2" >&2
            exit 1
        fi
        sleep 0.01
    done
    kill -9 "$pid"
    if wait "$pid"; then
        echo "run 1 finished before it was killed" >&2
        exit 1
    fi
    echo "killed run 1; latest: $(cat "$work/ckpt/latest")"
fi

"$bin" --epochs 2 $common --checkpoint-dir "$work/ckpt" --resume-from latest \
    --save-model "$work/resumed.safetensors" >"$work/resumed.log"
cmp "$work/full.safetensors" "$work/resumed.safetensors"
echo "byte-identical final weights ($mode)"
rm -rf "$work"
