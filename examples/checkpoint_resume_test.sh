#!/bin/sh
# Resume and reproducibility checks of train_mnist (CTest): the --save-model
# file of an uninterrupted 2-epoch run must be byte-identical to that of a
# run resumed from a checkpoint, and to runs with other thread counts.
#   checkpoint_resume_test.sh TRAIN_MNIST WORKDIR resume_epoch  # stop after epoch 1
#   checkpoint_resume_test.sh TRAIN_MNIST WORKDIR resume_kill   # SIGKILL mid-epoch 2
#   checkpoint_resume_test.sh TRAIN_MNIST WORKDIR threads        # 1 vs 3 threads
# Words after the mode start every run (a launcher: mpirun -np 2 ...). The
# batches per epoch are CTRAINER_LIMIT_BATCHES when it is set, else 150.
set -eu
bin=$1 work=$2 mode=$3
shift 3
batches=${CTRAINER_LIMIT_BATCHES:-150}
common="--limit-batches $batches --seed 1 --no-progress-bar"
rm -rf "$work"
mkdir -p "$work"
"$@" "$bin" --epochs 2 $common --save-model "$work/full.safetensors" >"$work/full.log"

if [ "$mode" = threads ]; then
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$bin" --epochs 2 $common \
        --save-model "$work/one.safetensors" >"$work/one.log"
    OMP_NUM_THREADS=3 OPENBLAS_NUM_THREADS=3 "$bin" --epochs 2 $common \
        --save-model "$work/three.safetensors" >"$work/three.log"
    cmp "$work/one.safetensors" "$work/three.safetensors"
    cmp "$work/full.safetensors" "$work/one.safetensors"
    echo "byte-identical final weights with 1, 2 and 3 threads"
    rm -rf "$work"
    exit 0
fi

if [ "$mode" = resume_epoch ]; then
    "$@" "$bin" --epochs 1 $common --checkpoint-dir "$work/ckpt" >"$work/first.log"
    latest="$work/ckpt/$(cat "$work/ckpt/latest")"
    echo "$latest: $(grep world_size "$latest/manifest.json")"
else
    # a checkpoint every $every updates: checkpoint_<k> holds update
    # every * (k + 1), and checkpoint_$first is the first one inside epoch 2
    # (updates batches + 1 .. 2 * batches)
    if [ "$batches" -lt 2 ]; then
        echo "resume_kill needs 2 batches an epoch or more" >&2
        exit 1
    fi
    every=$((batches / 5 > 0 ? batches / 5 : 1))
    first=$((batches / every))
    "$bin" --epochs 2 $common --checkpoint-dir "$work/ckpt" --checkpoint-every $every \
        >"$work/first.log" &
    pid=$!
    # killed once `latest` names it or a later one: the directory alone may
    # come first
    while :; do
        latest=$(cat "$work/ckpt/latest" 2>/dev/null || true)
        [ -n "$latest" ] && [ "${latest#checkpoint_}" -ge "$first" ] && break
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
    latest=$(cat "$work/ckpt/latest")
    update=$((every * (${latest#checkpoint_} + 1)))
    if [ "$update" -le "$batches" ] || [ "$update" -ge $((2 * batches)) ]; then
        echo "latest is $latest (update $update), not inside epoch 2" >&2
        exit 1
    fi
    echo "killed run 1; latest: $(cat "$work/ckpt/latest")"
fi

"$@" "$bin" --epochs 2 $common --checkpoint-dir "$work/ckpt" --resume-from latest \
    --save-model "$work/resumed.safetensors" >"$work/resumed.log"
cmp "$work/full.safetensors" "$work/resumed.safetensors"
echo "byte-identical final weights ($mode)"
rm -rf "$work"
