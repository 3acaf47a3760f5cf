#!/usr/bin/env bash
# Everything that needs a GPU, in one command, on any machine with one:
#
#   scripts/gpu-check.sh [--dry-run] [--prebuilt] [--only PHASES] [BUILD_DIR]
#                        (default BUILD_DIR: build-gpu)
#
#   1. configures and builds with CUDA (CTRAINER_CUDA=ON, warnings as errors,
#      examples and benchmarks on; CTRAINER_NCCL=ON too with nccl.h and MPI);
#      --prebuilt skips this and uses BUILD_DIR as it is: a CUDA build made
#      on another machine with the same CUDA major version, for a GPU
#      machine that has the driver and CUDA libraries but not the
#      build's other dependencies (scripts/gpu-pack.sh makes one, with
#      those dependencies, to carry to a lent GPU machine);
#   2. checks a GPU is visible (nvidia-smi), that the library reaches it
#      (tests/test_cuda runs its CUDA tests; when it skips them, it says why
#      and nothing else runs), and that Fashion-MNIST is at
#      FASHION_MNIST_DIR (default /usr/share/datasets/fashion-mnist);
#   3. runs the whole CTest suite (JOBS at a time), with the CUDA tests (tensor.test_cuda,
#      tensor.test_cuda_dnn, tensor.test_cuda_nn and every test that skips
#      without a device) running for real, and fails
#      when any suite still reports skipped CUDA tests; tests that need
#      cmake or mpirun are left out (and said so) where they are missing;
#   4. runs EVERY example (each examples/*.c) with --cuda for a few batches
#      (CTRAINER_LIMIT_BATCHES=GPU_CHECK_BATCHES, default 3);
#   5. runs the GPU benchmarks: bench_trainer's mlp and basicnet train steps
#      and ResNet-50 at 224x224, batch 128, bf16 (images/s), each with the
#      PyTorch eager loop beside it when python3 can import torch with CUDA
#      (ResNet-50 also needs torchvision), then the mlp and basicnet steps
#      again with CTRAINER_PROFILE_OPS=1: host time per op kind in the results;
#   6. profiles the ResNet-50 run's GPU kernels on both sides with
#      BUILD_DIR/tools/libctrainer_kprof.so (built where CUPTI is found):
#      the last second of each run summed per kernel, in
#      BUILD_DIR/gpu-check/kprof_*.txt, the top of each in the results.
#
# --only PHASES runs only the listed phases after the build and the GPU
# check: a comma-separated list of tests (3), examples (4), bench (5) and
# profile (6), e.g. --only bench,profile for a second call on a machine
# lent for a few minutes; the others are reported NOT RUN.
#
# Every step is reported in the summary as PASS, FAIL or NOT RUN with the
# reason (no torch), and with the seconds it took: nothing is skipped
# silently, and the next run on a GPU lent for a limited time can be
# planned. A step that runs longer than GPU_CHECK_STEP_TIMEOUT seconds
# (default 480) is stopped and FAILs. Exits non-zero when any step failed.
# Logs go to BUILD_DIR/gpu-check/; the summary and every benchmark's
# figures to BUILD_DIR/gpu-check/results.txt, and with GPU_CHECK_OUT=DIR
# that file and a tarball of the logs to DIR at the end.
#
# --dry-run prints each command it would run, one per line (prefixed
# "run: "), without building or running anything and without a GPU; CTest
# checks that listing (tools.gpu_check_dry_run).
set -u -o pipefail

dry=0
prebuilt=0
only=""
while [ $# -gt 0 ]; do
    case $1 in
    --dry-run) dry=1 ;;
    --prebuilt) prebuilt=1 ;;
    --only)
        only=${2:-}
        for ph in ${only//,/ }; do
            case $ph in tests | examples | bench | profile) ;;
            *)
                echo "gpu-check: --only: unknown phase '$ph' (tests, examples, bench, profile)" >&2
                exit 2
                ;;
            esac
        done
        [ -n "$only" ] || {
            echo "gpu-check: --only needs a list of phases" >&2
            exit 2
        }
        shift
        ;;
    -*)
        echo "gpu-check: unknown option '$1'" >&2
        exit 2
        ;;
    *) break ;;
    esac
    shift
done
if [ $# -gt 1 ]; then
    echo "gpu-check: options go before BUILD_DIR; unexpected: ${*:2}" >&2
    exit 2
fi
# want PHASE: whether --only leaves PHASE in
want() {
    case ",${only:-tests,examples,bench,profile}," in *",$1,"*) return 0 ;; esac
    record "NOT RUN" "phase $1" "--only $only"
    return 1
}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
logs=$build/gpu-check
results=$logs/results.txt
jobs=${JOBS:-$(nproc)}
batches=${GPU_CHECK_BATCHES:-3}
step_timeout=${GPU_CHECK_STEP_TIMEOUT:-480}
# GPU_CHECK_OUT=DIR: results.txt and a tarball of the logs are copied there
# at the end (a lent machine's output folder, which outlives the machine)
copy_out=${GPU_CHECK_OUT:-}
data=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}

summary=()
failed=0
record() { # record STATUS NAME [DETAIL]
    summary+=("$(printf '%-8s %s%s' "$1" "$2" "${3:+  ($3)}")")
    if [ "$1" = FAIL ]; then failed=1; fi
}
# step NAME LOGFILE CMD...: runs CMD, logs its output, records PASS or FAIL.
# Environment assignments go first through `env`.
step() {
    local name=$1 log=$2
    shift 2
    if [ $dry -eq 1 ]; then
        echo "run: $*"
        record PASS "$name" "dry run"
        return 0
    fi
    echo "==> $name"
    local t0=$SECONDS
    if timeout "$step_timeout" "$@" >"$log" 2>&1; then
        record PASS "$name" "$((SECONDS - t0)) s"
    else
        record FAIL "$name" "exit $?, log $log, $((SECONDS - t0)) s"
        tail -n 20 "$log"
    fi
}
# bench NAME CMD...: a step whose output figures go to the results file.
bench() {
    local name=$1 log=$logs/bench_${1//[^A-Za-z0-9_]/_}.log
    shift
    step "$name" "$log" "$@"
    if [ $dry -eq 0 ] && [ -f "$log" ]; then
        {
            echo "## $name: $*"
            grep -E '^(epoch_s|images_per_s|ops_per_step|peak_rss_mib)' "$log"
        } >>"$results"
    fi
}
finish() {
    {
        echo
        echo "==================== gpu-check summary ===================="
        printf '%s\n' "${summary[@]}"
        echo "total: ${SECONDS} s"
        echo "==========================================================="
    } | tee -a "$results"
    if [ -n "$copy_out" ] && [ $dry -eq 0 ]; then
        cp "$results" "$copy_out/" &&
            tar czf "$copy_out/gpu-check-logs.tgz" --exclude=examples -C "$build" gpu-check
    fi
    if [ $failed -ne 0 ]; then
        echo "gpu-check: FAILED" | tee -a "$results"
        exit 1
    fi
    echo "gpu-check: all steps passed" | tee -a "$results"
    exit 0
}

mkdir -p "$logs"
{
    echo "# gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
    echo "# commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$results"

# 1. build
if [ $prebuilt -eq 1 ]; then
    if [ $dry -eq 0 ] && [ ! -f "$build/CTestTestfile.cmake" ]; then
        record FAIL "prebuilt build" "$build has no CTestTestfile.cmake"
    else
        record "NOT RUN" "configure and build" "--prebuilt: $build as it is"
    fi
else
    nccl=OFF # the NCCL module needs nccl.h and MPI
    for d in /usr/include /usr/local/cuda/include /usr/local/include; do
        [ -f "$d/nccl.h" ] && command -v mpicc >/dev/null && nccl=ON
    done
    step "configure (CUDA on, NCCL $nccl)" "$logs/configure.log" \
        cmake -S "$root" -B "$build" -DCTRAINER_CUDA=ON -DCTRAINER_NCCL=$nccl \
        -DCTRAINER_WERROR=ON -DCTRAINER_BUILD_EXAMPLES=ON -DCTRAINER_BUILD_BENCH=ON \
        -DCMAKE_BUILD_TYPE=Release
    step "build" "$logs/build.log" cmake --build "$build" -j "$jobs"
fi
if [ $failed -ne 0 ]; then
    record "NOT RUN" "tests, examples, benchmarks" "the build failed"
    finish
fi

# 2. a GPU must be visible, or every later step would only skip
if [ $dry -eq 1 ]; then
    echo "run: nvidia-smi -L"
elif ! nvidia-smi -L >"$logs/nvidia-smi.log" 2>&1; then
    record FAIL "GPU visible" "nvidia-smi -L failed, log $logs/nvidia-smi.log"
    record "NOT RUN" "tests, examples, benchmarks" "no GPU"
    finish
else
    record PASS "GPU visible" "$(head -n 1 "$logs/nvidia-smi.log")"
    cat "$logs/nvidia-smi.log" >>"$results"
fi
# the library must reach the GPU (its CUDA module loads, a context starts):
# the CUDA suite says why not when it skips, and every later step would
# only skip too
if [ $dry -eq 1 ]; then
    echo "run: $build/tests/test_cuda"
elif ! timeout "$step_timeout" "$build/tests/test_cuda" >"$logs/test_cuda.log" 2>&1 ||
    grep -qi "skipped.*no cuda device" "$logs/test_cuda.log"; then
    record FAIL "CUDA backend usable" "$(grep -i -m 1 -e skipped -e fail "$logs/test_cuda.log")"
    record "NOT RUN" "tests, examples, benchmarks" "the CUDA backend is not usable"
    finish
else
    record PASS "CUDA backend usable" "tests/test_cuda"
fi
if [ $dry -eq 0 ] && [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    record FAIL "Fashion-MNIST" "not at $data: the examples and MLP/BasicNet benchmarks need it (FASHION_MNIST_DIR)"
fi

# 3. the test suite; a CUDA test that still skips means the device was not
# usable from the library
run_tests() {
    # tests that need what a bare GPU machine may lack: left out, and said
    local skip=() why=()
    if ! command -v cmake >/dev/null; then
        skip+=("install\\.consumer")
        why+=("install.consumer: no cmake")
    fi
    if ! command -v mpirun >/dev/null; then
        skip+=("tools\\.(cli|runtime_launch|two_machines)")
        why+=("tools.cli, tools.runtime_launch, tools.two_machines: no mpirun")
    fi
    local exclude=()
    if [ ${#skip[@]} -gt 0 ] && [ $dry -eq 0 ]; then
        exclude=(-E "^($(
            IFS='|'
            echo "${skip[*]}"
        ))\$")
        record "NOT RUN" "ctest $(
            IFS=';'
            echo "${why[*]}"
        )"
    fi
    step "ctest (all suites)" "$logs/ctest.log" \
        ctest --test-dir "$build" --output-on-failure -j "$jobs" "${exclude[@]}"
    [ $dry -eq 0 ] || return 0
    # every test's output is in LastTest.log (ctest.log holds failures' only)
    if grep -Eqi "skipped.*no (cuda )?device" "$build/Testing/Temporary/LastTest.log"; then
        record FAIL "CUDA tests ran on the device" \
            "some suites skipped their CUDA tests: grep -i skipped $build/Testing/Temporary/LastTest.log"
    else
        record PASS "CUDA tests ran on the device"
    fi
}
want tests && run_tests

# 4. every example, in dependency order (finetune_image_folder reads what
# make_image_folder and pretrain_backbone wrote); the arguments mirror
# examples/CMakeLists.txt
out=$build/gpu-check/examples
example_args() {
    case $1 in
    tensor_mlp) echo "--epochs 1 --limit 2000" ;;
    optim_tour) echo "--steps 200" ;;
    train_mnist | train_mnist_metrics_subclass | train_mnist_metrics_callback)
        echo "--epochs 1 --no-progress-bar" ;;
    train_basicnet | pretrain_backbone) echo "--no-progress-bar" ;;
    basicnet_ddp | basicnet_runtime) echo "--limit-batches $batches --no-progress-bar" ;;
    train_tabular) echo "--epochs 3 --out $out/tabular_run" ;;
    make_image_folder) echo "$out/image_folder --limit 200" ;;
    finetune_image_folder)
        echo "$out/image_folder $out/resnet18_fashion_mnist.safetensors --processes 1" \
            "--epochs 1 --no-progress-bar" ;;
    esac
}
run_examples() {
    local n exe args names=() ordered=()
    mkdir -p "$out"
    for src in "$root"/examples/*.c; do names+=("$(basename "$src" .c)"); done
    for n in make_image_folder pretrain_backbone; do ordered+=("$n"); done
    for n in "${names[@]}"; do
        case $n in make_image_folder | pretrain_backbone | finetune_image_folder) ;;
        *) ordered+=("$n") ;; esac
    done
    ordered+=(finetune_image_folder)
    for n in "${ordered[@]}"; do
        exe=$build/examples/$n
        args=$(example_args "$n")
        [ "$n" = pretrain_backbone ] && args="$args --out $out/resnet18_fashion_mnist.safetensors"
        if [ $dry -eq 0 ] && [ ! -x "$exe" ]; then
            record FAIL "example/$n --cuda" "not built: $exe"
            continue
        fi
        # shellcheck disable=SC2086 # args are words
        step "example/$n --cuda" "$logs/example_$n.log" \
            env CTRAINER_LIMIT_BATCHES="$batches" "$exe" $args --cuda
    done
}
want examples && run_examples

# what PyTorch the machine has, for phases 5 and 6
torch_ok=0
tv_ok=0
if [ $dry -eq 1 ] ||
    python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
    torch_ok=1
    if [ $dry -eq 1 ] || python3 -c "import torchvision" >/dev/null 2>&1; then tv_ok=1; fi
fi
bt=$build/bench/bench_trainer
r50_torch=(python3 "$root/bench/bench_trainer_torch.py" --workload resnet50 --batch 128
    --batches 10 --epochs 2 --mixed-precision bf16 --cuda)

# 5. benchmarks (figures into the results file)
run_bench() {
    local w log
    for w in mlp basicnet; do
        bench "bench_trainer $w cuda" "$bt" --workload "$w" --epochs 2 --cuda
    done
    # PyTorch's f32 convolutions use TF32 by default (cudnn.allow_tf32); ours
    # only when asked (this also puts f32 matmuls on TF32)
    bench "bench_trainer basicnet cuda tf32" env CTRAINER_ALLOW_TF32=1 \
        "$bt" --workload basicnet --epochs 2 --cuda
    bench "bench_trainer resnet50 224 bf16 batch 128 cuda" \
        "$bt" --workload resnet50 --batch 128 --batches 10 --epochs 2 \
        --mixed-precision bf16 --cuda
    bench "bench_trainer resnet50 224 bf16 batch 128 cuda channels-last" \
        "$bt" --workload resnet50 --batch 128 --batches 10 --epochs 2 \
        --mixed-precision bf16 --cuda --channels-last
    if [ $torch_ok -eq 1 ]; then
        for w in mlp basicnet; do
            bench "pytorch eager $w cuda" \
                python3 "$root/bench/bench_trainer_torch.py" --workload "$w" --epochs 2 --cuda
        done
        if [ $tv_ok -eq 1 ]; then
            bench "pytorch eager resnet50 224 bf16 batch 128 cuda" "${r50_torch[@]}"
            bench "pytorch eager resnet50 224 bf16 batch 128 cuda channels-last" \
                "${r50_torch[@]}" --channels-last
        else
            record "NOT RUN" "pytorch eager resnet50" "python3 cannot import torchvision"
        fi
    else
        record "NOT RUN" "PyTorch benchmarks" "python3 cannot import torch with CUDA"
    fi

    # host time per op kind (CTRAINER_PROFILE_OPS): where the launch-bound
    # steps spend their host time, the last epoch's totals
    for w in mlp basicnet; do
        log=$logs/op_profile_$w.log
        step "op profile $w cuda" "$log" env CTRAINER_PROFILE_OPS=1 \
            "$bt" --workload "$w" --epochs 2 --cuda
        if [ $dry -eq 0 ] && [ -f "$log" ]; then
            {
                echo "## host time per op, $w cuda (last epoch)"
                awk '/^epoch_s/ { buf = "" } /^op_profile/ { buf = buf $0 "\n" }
                     END { printf "%s", buf }' "$log"
            } >>"$results"
        fi
    done
}
want bench && run_bench

# 6. kernel profiles: the last second of each ResNet-50 run, per kernel
kp=$build/tools/libctrainer_kprof.so
profile() { # profile NAME CMD...
    local name=$1 out=$logs/kprof_$1.txt
    shift
    step "kernel profile $name" "$logs/kprof_$name.log" env CUDA_INJECTION64_PATH="$kp" \
        CTRAINER_KPROF_OUT="$out" CTRAINER_KPROF_WINDOW_MS=1000 "$@"
    if [ $dry -eq 0 ] && [ -f "$out" ]; then
        {
            echo "## kernel profile $name (top 15; c++filt demangles)"
            head -n 17 "$out"
        } >>"$results"
    elif [ $dry -eq 0 ]; then
        record FAIL "kernel profile $name written" "no $out (is CUPTI on the library path?)"
    fi
}
run_profile() {
    if [ $dry -eq 0 ] && [ ! -f "$kp" ]; then
        record "NOT RUN" "kernel profiles" "no $kp (CUPTI was not found at build time)"
    else
        profile resnet50_ctrainer "$bt" --workload resnet50 --batch 128 --batches 10 \
            --epochs 2 --mixed-precision bf16 --cuda
        profile resnet50_ctrainer_channels_last "$bt" --workload resnet50 --batch 128 \
            --batches 10 --epochs 2 --mixed-precision bf16 --cuda --channels-last
        if [ $tv_ok -eq 1 ]; then
            profile resnet50_pytorch "${r50_torch[@]}"
        else
            record "NOT RUN" "kernel profile resnet50_pytorch" "python3 cannot import torch with CUDA and torchvision"
        fi
    fi
}
want profile && run_profile

finish
