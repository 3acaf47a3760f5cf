#!/bin/sh
# A ResNet made by PyTorch, used by ctrainer: make_resnet_fixture.py writes
# the state dict and PyTorch's logits into a temporary folder, then
#   check:    resnet_fixture loads it and compares the logits;
#   finetune: the fine-tuning example trains on FOLDER from it, a few batches.
# Exits 77 (a loud skip) when the Python interpreter, torch or torchvision
# is missing.
# Usage: fixture_test.sh PYTHON GENERATOR MODEL check RESNET_FIXTURE
#        fixture_test.sh PYTHON GENERATOR MODEL finetune EXAMPLE FOLDER
set -eu
python=$1 gen=$2 model=$3 mode=$4 prog=$5
if [ ! -x "$python" ]; then
  echo "SKIPPED: $python not found (apt-get install python3-torch python3-torchvision)"
  exit 77
fi
dir=$(mktemp -d /tmp/ct_resnet_XXXXXX)
trap 'rm -rf "$dir"' EXIT
rc=0
"$python" "$gen" "$dir" "$model" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
case $mode in
check) "$prog" "$dir" "$model" ;;
finetune)
  "$prog" "$6" "$dir/$model.safetensors" --processes 1 --epochs 1 --limit-batches 1 \
    --no-progress-bar >"$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
  cat "$dir/out"
  grep -q "^backbone: $model from " "$dir/out"
  grep -q "held-out accuracy" "$dir/out" ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
