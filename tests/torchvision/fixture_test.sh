#!/bin/sh
# A ResNet made by PyTorch, checked by ctrainer: make_resnet_fixture.py writes
# the state dict and PyTorch's logits into a temporary folder, resnet_fixture
# loads and compares. Exits 77 (a loud skip) when the Python interpreter,
# torch or torchvision is missing.
# Usage: fixture_test.sh PYTHON GENERATOR CHECKER MODEL
set -eu
python=$1 gen=$2 check=$3 model=$4
if [ ! -x "$python" ]; then
  echo "SKIPPED: $python not found (apt-get install python3-torch python3-torchvision)"
  exit 77
fi
dir=$(mktemp -d /tmp/ct_resnet_XXXXXX)
trap 'rm -rf "$dir"' EXIT
rc=0
"$python" "$gen" "$dir" "$model" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
"$check" "$dir" "$model"
