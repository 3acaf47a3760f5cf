#!/bin/sh
# An example launched on 2 processes by `ctrainer launch`, as the README and
# docs/distributed.md write it, on a few batches (CTRAINER_LIMIT_BATCHES, or
# the example's own flags): it must exit 0 and print its test accuracy
# exactly once (by the main process).
# usage: launch_test.sh CTRAINER_CLI PROGRAM [ARGS...]
set -u
cli=$1
shift
out=$(mktemp /tmp/ct_example_launch_XXXXXX)
cfg=$(mktemp -d /tmp/ct_example_cfg_XXXXXX)
trap 'rm -rf "$out" "$cfg"' EXIT
# no user config file: the flags and the defaults decide
CTRAINER_CONFIG_FILE="$cfg/none.yaml" "$cli" launch --num_processes 2 "$@" >"$out" 2>&1
rc=$?
cat "$out"
fails=0
[ $rc -eq 0 ] || { echo "FAIL exit status $rc"; fails=1; }
grep -qx "Launching training on 2 CPUs." "$out" || { echo "FAIL no launch line"; fails=1; }
n=$(grep -c '^test accuracy [0-9.]*%$' "$out")
[ "$n" -eq 1 ] || { echo "FAIL $n 'test accuracy' lines (1 expected)"; fails=1; }
[ $fails -eq 0 ] && echo "all passed"
[ $fails -eq 0 ]
