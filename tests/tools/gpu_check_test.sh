#!/bin/sh
# scripts/gpu-check.sh without a GPU: it parses; its dry run lists the CUDA
# build, the suite, every example with --cuda and the GPU benchmarks; and a
# failing step makes it exit non-zero with FAIL in its summary.
set -eu
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
script=$root/scripts/gpu-check.sh
bash -n "$script"
bash -n "$root/scripts/gpu-pack.sh"

fail() {
    echo "gpu_check_test: $*" >&2
    exit 1
}
b=$tmp/b
bash "$script" --dry-run "$b" >"$tmp/out" || fail "the dry run failed"
has() { grep -q -e "$1" "$tmp/out" || fail "dry run does not list: $1"; }
has "^run: cmake -S $root -B $b -DCTRAINER_CUDA=ON"
has "^run: cmake --build $b"
has "^run: nvidia-smi -L"
has "^run: $b/tests/test_cuda\$"
has "^run: ctest --test-dir $b"
for src in "$root"/examples/*.c; do
    n=$(basename "$src" .c)
    has "^run: env CTRAINER_LIMIT_BATCHES=3 $b/examples/$n .*--cuda\$"
done
has "^run: $b/bench/bench_trainer --workload mlp .*--cuda\$"
has "^run: $b/bench/bench_trainer --workload basicnet .*--cuda\$"
has "^run: $b/bench/bench_trainer --workload resnet50 --batch 128 .*--mixed-precision bf16 --cuda\$"
has "^run: python3 $root/bench/bench_trainer_torch.py --workload mlp .*--cuda\$"
has "^run: python3 $root/bench/bench_trainer_torch.py --workload resnet50 .*--mixed-precision bf16 --cuda\$"
has "^run: env CUDA_INJECTION64_PATH=$b/tools/libctrainer_kprof.so CTRAINER_KPROF_OUT=$b/gpu-check/kprof_resnet50_ctrainer.txt CTRAINER_KPROF_WINDOW_MS=1000 $b/bench/bench_trainer --workload resnet50 "
has "^run: env CUDA_INJECTION64_PATH=$b/tools/libctrainer_kprof.so CTRAINER_KPROF_OUT=$b/gpu-check/kprof_resnet50_pytorch.txt CTRAINER_KPROF_WINDOW_MS=1000 python3 "
has "gpu-check: all steps passed"
# make_image_folder and pretrain_backbone run before finetune_image_folder
order=$(grep -n -e "examples/make_image_folder" -e "examples/pretrain_backbone" \
    -e "examples/finetune_image_folder" "$tmp/out" | cut -d: -f1 | tr '\n' ' ')
# shellcheck disable=SC2086 # the three line numbers, as words
set -- $order
if [ $# -ne 3 ] || [ "$1" -ge "$3" ] || [ "$2" -ge "$3" ]; then
    fail "example order: $order"
fi

# --only: the listed phases after the build and the GPU check; the others
# NOT RUN in the summary; an unknown phase is refused
bash "$script" --dry-run --prebuilt --only bench "$b" >"$tmp/only" ||
    fail "the --only dry run failed"
grep -q "^run: $b/bench/bench_trainer --workload mlp" "$tmp/only" ||
    fail "--only bench does not run the benchmarks"
grep -q -e "^run: ctest" -e "examples/" -e "CUDA_INJECTION64_PATH" "$tmp/only" &&
    fail "--only bench runs another phase"
for ph in tests examples profile; do
    grep -q "^NOT RUN  phase $ph  (--only bench)" "$tmp/only" ||
        fail "--only bench does not report phase $ph as NOT RUN"
done
grep -q "^total: [0-9]* s" "$tmp/only" || fail "no total time in the summary"
if bash "$script" --dry-run --only benchmarks "$b" >"$tmp/bad" 2>&1; then
    fail "an unknown --only phase was accepted"
fi
grep -q "unknown phase 'benchmarks'" "$tmp/bad" || fail "no message for the unknown phase"

# --prebuilt: no configure or build, the rest as before
bash "$script" --dry-run --prebuilt "$b" >"$tmp/pre" || fail "the prebuilt dry run failed"
grep -q "^run: cmake" "$tmp/pre" && fail "--prebuilt still configures or builds"
grep -q "^run: ctest --test-dir $b" "$tmp/pre" || fail "--prebuilt does not run the suite"
# ... and a BUILD_DIR that holds no build is a FAIL, not a silent pass
if bash "$script" --prebuilt "$tmp/none" >"$tmp/none.out" 2>&1; then
    fail "--prebuilt without a build did not fail"
fi
grep -q "^FAIL .*prebuilt build" "$tmp/none.out" || fail "no FAIL line for the missing build"

# a failing configure: FAIL in the summary, nothing else run, exit 1
mkdir "$tmp/bin"
printf '#!/bin/sh\necho "cmake: configured to fail" >&2\nexit 3\n' >"$tmp/bin/cmake"
chmod +x "$tmp/bin/cmake"
if PATH="$tmp/bin:$PATH" bash "$script" "$tmp/f" >"$tmp/fail.out" 2>&1; then
    fail "a failing build did not make gpu-check fail"
fi
grep -q "^FAIL .*configure" "$tmp/fail.out" || fail "no FAIL line for the configure"
grep -q "^NOT RUN .*tests, examples, benchmarks" "$tmp/fail.out" ||
    fail "later steps not reported as NOT RUN"
grep -q "gpu-check: FAILED" "$tmp/f/gpu-check/results.txt" ||
    fail "the results file does not say FAILED"
# a misspelt option, or one after BUILD_DIR, is refused, not taken for a
# build directory
for args in "--prebuit $b" "$b --prebuilt"; do
    # shellcheck disable=SC2086 # the arguments, as words
    if bash "$script" --dry-run $args >"$tmp/bad" 2>&1; then
        fail "gpu-check accepted: $args"
    fi
done
[ ! -e "$root/--prebuit" ] || fail "a misspelt option made a directory"
echo "gpu_check_test: ok"
