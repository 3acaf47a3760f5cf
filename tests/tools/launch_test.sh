#!/bin/sh
# runtime_launch: a program re-executes itself under mpirun on 2 ranks.
# usage: launch_test.sh LAUNCH_IN_PROGRAM
set -u
out=$(mktemp /tmp/ct_launch_XXXXXX)
trap 'rm -f "$out"' EXIT
# on CPUs whatever the machine has (two ranks on a one-GPU machine are refused)
env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u WORLD_SIZE CTRAINER_USE_CPU=true "$1" 2 \
    >"$out" 2>&1
rc=$?
cat "$out"
fails=0
[ $rc -eq 0 ] || { echo "FAIL exit status $rc"; fails=1; }
for line in "Launching training on 2 CPUs." "train on rank 0 with user data" \
    "train on rank 1 with user data" "parent: all ranks finished"; do
    grep -qx -- "$line" "$out" || { echo "FAIL missing line: $line"; fails=1; }
done
[ "$(grep -c '^parent:' "$out")" -eq 1 ] || { echo "FAIL the parent line is not printed once"; fails=1; }
[ $fails -eq 0 ] && echo "all passed"
[ $fails -eq 0 ]
