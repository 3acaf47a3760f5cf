#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run scripts/gpu-check.sh on a
# build made here, into .gpu/ (ignored by git; the device tool carries it):
#
#   scripts/gpu-pack.sh            # here: build and pack (about 50 MB)
#   sh .gpu/run.sh PHASES          # there, from the repository root
#
# A lent machine has the NVIDIA driver, CUDA, cuDNN and PyTorch, but not
# necessarily cmake, MPI or this project's other libraries, and no network,
# so the build is made here and carried:
#   - .gpu/build.tar.xz: build-gpu (CUDA on, MPI and NCCL off, examples and
#     benchmarks on, Release), without what only building needs. CTest files
#     and the CUDA module's search path hold the build's absolute path, so
#     run.sh makes the repository reachable at this checkout's path there;
#   - .gpu/lib.tar.xz: every shared library the build's programs load that
#     is neither glibc's nor CUDA's, from this machine; run.sh puts on
#     LD_LIBRARY_PATH only those the lent machine lacks, so PyTorch's own
#     libraries are left alone;
#   - .gpu/fashion-mnist: the dataset the examples and benchmarks read;
#   - .gpu/run.sh: unpacks (once per machine), checks that every program
#     finds its libraries, then runs
#     `scripts/gpu-check.sh --prebuilt --only PHASES build-gpu` with its
#     results and logs copied to $OUT.
# A lent machine allows 10 minutes per command: run `tests,examples` in one
# call and `bench,profile` in the next.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=$root/build-gpu
pack=$root/.gpu
data=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
jobs=${JOBS:-$(nproc)}

[ -f "$data/train-images-idx3-ubyte.gz" ] ||
    { echo "gpu-pack: no Fashion-MNIST at $data (FASHION_MNIST_DIR)" >&2; exit 1; }
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTRAINER_CUDA=ON \
    -DCTRAINER_MPI=OFF -DCTRAINER_NCCL=OFF -DCTRAINER_WERROR=ON \
    -DCTRAINER_BUILD_EXAMPLES=ON -DCTRAINER_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$jobs"

rm -rf "$pack"
mkdir -p "$pack/lib"
tar -C "$root" -cJf "$pack/build.tar.xz" --exclude=CMakeFiles --exclude=Testing \
    --exclude=gpu-check --exclude='*.a' --exclude='*.o' --exclude=tb-venv \
    --exclude='*.safetensors' "$(basename "$build")"

# the libraries every ELF file of the build loads, but glibc's and CUDA's
# (the lent machine has those, matched to its driver)
find "$build" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
    xargs -0 ldd 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
    grep -Ev '^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libutil\.|libresolv\.|libgcc_s\.|libstdc\+\+\.|libcuda|libcudart|libcublas|libcudnn|libcupti|libnvrtc|libnvJitLink|libnccl)' |
    sort -u | while read -r name path; do cp -L "$path" "$pack/lib/$name"; done
tar -C "$pack" -cJf "$pack/lib.tar.xz" lib
rm -rf "${pack:?}/lib"

mkdir -p "$pack/fashion-mnist"
cp "$data"/*-ubyte.gz "$pack/fashion-mnist/"
git -C "$root" rev-parse --short HEAD >"$pack/commit" 2>/dev/null || echo unknown >"$pack/commit"

cat >"$pack/run.sh" <<EOF
#!/bin/sh
# Runs on the lent GPU machine, from the repository root:
#   sh .gpu/run.sh PHASES   (tests,examples | bench,profile | all four)
# Made by scripts/gpu-pack.sh at commit \$(cat .gpu/commit).
set -eu
phases=\${1:-tests,examples}
# the build holds this path: make the repository reachable there
if [ ! -e "$root/scripts/gpu-check.sh" ]; then
    mkdir -p "$(dirname "$root")"
    ln -sfn "\$(pwd)" "$root"
fi
cd "$root"
unpack() { python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "\$@"; }
[ -f build-gpu/CTestTestfile.cmake ] || unpack .gpu/build.tar.xz .
[ -d .gpu/lib ] || unpack .gpu/lib.tar.xz .gpu
# only the libraries this machine lacks go on the path
ldc=\$(command -v ldconfig || echo /sbin/ldconfig)
mkdir -p .gpu/missing
for f in .gpu/lib/*; do
    n=\$(basename "\$f")
    "\$ldc" -p | grep -q "^[[:space:]]*\$n " || ln -sf "\$(pwd)/\$f" ".gpu/missing/\$n"
done
LD_LIBRARY_PATH=\$(pwd)/.gpu/missing\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
# CUPTI, for the kernel profiler
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64; do
    if ls "\$d"/libcupti.so* >/dev/null 2>&1; then LD_LIBRARY_PATH=\$LD_LIBRARY_PATH:\$d; fi
done
export LD_LIBRARY_PATH
data=/usr/share/datasets/fashion-mnist
if [ ! -f "\$data/train-images-idx3-ubyte.gz" ]; then
    mkdir -p "\$(dirname "\$data")"
    ln -sfn "\$(pwd)/.gpu/fashion-mnist" "\$data"
fi
bad=0
for b in build-gpu/libctrainer_cuda.so build-gpu/bench/bench_trainer build-gpu/tests/test_cuda \\
    build-gpu/examples/train_mnist; do
    if ldd "\$b" | grep 'not found'; then echo "run.sh: \$b lacks a library" >&2; bad=1; fi
done
[ \$bad -eq 0 ] || exit 1
GPU_CHECK_OUT=\${OUT:-} exec bash scripts/gpu-check.sh --prebuilt --only "\$phases" build-gpu
EOF
du -sh "$pack"/* | sort -h
echo "gpu-pack: $(du -sh "$pack" | cut -f1) in $pack; there: sh .gpu/run.sh tests,examples"
