#!/bin/sh
# Interleaved ctrainer vs PyTorch-at-its-best benchmark (docs/benchmarks.md,
# "Trainer"); see bench/run_trainer_bench.py for the workloads and set-up.
#
#   bench/run_trainer_bench.sh [--build DIR] [--repeats N] [--busy] [--only W,W]
exec /usr/bin/python3 "$(dirname "$0")/run_trainer_bench.py" "$@"
