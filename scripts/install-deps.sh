#!/usr/bin/env bash
# Installs what ctrainer needs on Debian (12+). Idempotent: when everything is
# present it prints nothing and touches nothing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config   # compilers and build
  check                              # unit tests
  libopenblas-dev                    # CPU GEMM
  libcyaml-dev                       # YAML config files
  libopenmpi-dev openmpi-bin         # multi-process training
  zlib1g-dev libdeflate-dev          # gzip'd datasets (IDX)
  libjansson-dev                     # safetensors JSON headers
  libssl-dev                         # libcrypto: checkpoint SHA-256
  libpng-dev libjpeg-dev             # image datasets
  clang libomp-dev libclang-rt-14-dev # fuzz targets (CTRAINER_FUZZ, libFuzzer runtime)
  python3-torch python3-torchvision  # tests: ResNet state dicts made by PyTorch
  dataset-fashion-mnist              # the main job's data
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
