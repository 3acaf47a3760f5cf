#!/bin/sh
# 1 process against 2 on this machine with bench_ddp (see its header):
# ROUNDS rounds, alternating the configurations so a change in the machine's
# load hits them alike; prints bench_ddp's result lines, one run per line.
# usage: bench/run_ddp_bench.sh BUILD_DIR [ROUNDS] [BASICNET_BATCHES]
set -u
b=${1:?usage: run_ddp_bench.sh BUILD_DIR [ROUNDS] [BASICNET_BATCHES]}
rounds=${2:-5}
limit=${3:-30}
mpirun=$(command -v mpirun)
root=""
[ "$(id -u)" -eq 0 ] && root=--allow-run-as-root
run() { # NAME THREADS NP ARGS...
    name=$1 threads=$2 np=$3
    shift 3
    if [ "$np" -eq 1 ]; then
        out=$(OMP_NUM_THREADS=$threads "$b/bench/bench_ddp" "$@" 2>&1)
    else
        out=$(OMP_NUM_THREADS=$threads "$mpirun" $root --oversubscribe --bind-to none \
            -np "$np" "$b/bench/bench_ddp" "$@" 2>&1)
    fi
    echo "$name threads=$threads $(echo "$out" | grep -E '^(processes|collectives|grad|stop)' | tr '\n' ' ')"
}
i=0
while [ $i -lt "$rounds" ]; do
    echo "# round $((i + 1)) $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    run mlp 1 1
    run mlp 2 1
    run mlp 1 2
    run basicnet 1 1 --model basicnet --limit-batches "$limit" --reps 50
    run basicnet 1 2 --model basicnet --limit-batches "$limit" --reps 50
    i=$((i + 1))
done
