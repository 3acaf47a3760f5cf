#!/usr/bin/env bash
# Everything that needs a GPU, in one command, on any machine with one:
#
#   scripts/gpu-check.sh [BUILD_DIR]      (default: build-gpu)
#
#   1. configures and builds with CUDA (CTRAINER_CUDA=ON, warnings as errors,
#      benchmarks on);
#   2. checks a GPU is visible (nvidia-smi) and the CUDA module loads;
#   3. runs the whole CTest suite, with the CUDA tests (tensor.test_cuda,
#      tensor.test_cuda_dnn and every test that skips without a device)
#      running for real;
#   4. runs every example that takes --cuda on a few batches on cuda:0;
#   5. runs every benchmark that takes --cuda (PyTorch comparisons run when
#      python3 can import torch).
#
# Every step is reported in the summary as PASS, FAIL or NOT RUN with the
# reason (an example or benchmark without --cuda support, no torch): nothing
# is skipped silently. Exits non-zero when any step failed. Logs go to
# BUILD_DIR/gpu-check/.
set -u -o pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
logs=$build/gpu-check
jobs=${JOBS:-$(nproc)}
batches=${GPU_CHECK_BATCHES:-3}

summary=()
failed=0
record() { # record STATUS NAME [DETAIL]
    summary+=("$(printf '%-8s %s%s' "$1" "$2" "${3:+  ($3)}")")
    if [ "$1" = FAIL ]; then failed=1; fi
}
# step NAME LOGFILE CMD...: runs CMD, logs its output, records PASS or FAIL.
step() {
    local name=$1 log=$2
    shift 2
    echo "==> $name"
    if "$@" >"$log" 2>&1; then
        record PASS "$name"
    else
        record FAIL "$name" "exit $?, log $log"
        tail -n 20 "$log"
    fi
}
finish() {
    echo
    echo "==================== gpu-check summary ===================="
    printf '%s\n' "${summary[@]}"
    echo "==========================================================="
    if [ $failed -ne 0 ]; then echo "gpu-check: FAILED"; exit 1; fi
    echo "gpu-check: all steps passed"
    exit 0
}

mkdir -p "$logs"

# 1. build
step "configure (CUDA on)" "$logs/configure.log" \
    cmake -S "$root" -B "$build" -DCTRAINER_CUDA=ON -DCTRAINER_WERROR=ON \
    -DCTRAINER_BUILD_BENCH=ON -DCMAKE_BUILD_TYPE=Release
step "build" "$logs/build.log" cmake --build "$build" -j "$jobs"
if [ $failed -ne 0 ]; then
    record "NOT RUN" "tests, examples, benchmarks" "the build failed"
    finish
fi

# 2. a GPU must be visible, or every later step would only skip
if ! nvidia-smi -L >"$logs/nvidia-smi.log" 2>&1; then
    record FAIL "GPU visible" "nvidia-smi -L failed, log $logs/nvidia-smi.log"
    record "NOT RUN" "tests, examples, benchmarks" "no GPU"
    finish
fi
record PASS "GPU visible" "$(head -n 1 "$logs/nvidia-smi.log")"

# 3. the test suite; a CUDA test that still skips means the device was not
# usable from the library
step "ctest (all suites)" "$logs/ctest.log" \
    ctest --test-dir "$build" --output-on-failure -j 1
if grep -q "SKIPPED .* CUDA tests" "$logs/ctest.log"; then
    record FAIL "CUDA tests ran on the device" \
        "some suites skipped their CUDA tests: grep SKIPPED $logs/ctest.log"
else
    record PASS "CUDA tests ran on the device"
fi

# takes_cuda PROGRAM: whether PROGRAM --help mentions --cuda
takes_cuda() { "$1" --help 2>&1 | grep -q -- "--cuda"; }

# 4. examples
shopt -s nullglob
examples=("$build"/examples/*)
n_examples=0
for exe in "${examples[@]}"; do
    [ -f "$exe" ] && [ -x "$exe" ] || continue
    n_examples=$((n_examples + 1))
    name=example/$(basename "$exe")
    if ! takes_cuda "$exe"; then
        record "NOT RUN" "$name" "no --cuda option"
        continue
    fi
    step "$name --cuda" "$logs/$(basename "$exe").log" \
        "$exe" --cuda --limit-batches "$batches" --epochs 1
done
[ $n_examples -gt 0 ] || record FAIL "examples" "none built in $build/examples"

# 5. benchmarks
benches=("$build"/bench/bench_*)
if [ ${#benches[@]} -eq 0 ]; then record "NOT RUN" "benchmarks" "none built"; fi
for exe in "${benches[@]}"; do
    [ -f "$exe" ] && [ -x "$exe" ] || continue
    name=bench/$(basename "$exe")
    if ! takes_cuda "$exe"; then
        record "NOT RUN" "$name" "no --cuda option"
        continue
    fi
    step "$name --cuda" "$logs/$(basename "$exe").log" "$exe" --cuda
done
if python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
    for py in "$root"/bench/*_torch.py; do
        if ! grep -q -- "--cuda" "$py"; then
            record "NOT RUN" "bench/$(basename "$py")" "no --cuda option"
            continue
        fi
        step "bench/$(basename "$py") --cuda" "$logs/$(basename "$py").log" \
            python3 "$py" --cuda
    done
else
    record "NOT RUN" "PyTorch benchmarks" "python3 cannot import torch with CUDA"
fi

finish
