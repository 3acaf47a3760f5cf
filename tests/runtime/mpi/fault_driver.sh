#!/bin/sh
# Runs mpi_trainer in a fault mode on 2 ranks and checks that the whole run
# ends non-zero within 30 s, with a message naming the failed rank.
#   fault_driver.sh kill|error|timeout|return MPIEXEC PROGRAM
mode=$1 mpiexec=$2 prog=$3
# timeout: rank 1 stalls 4 s, so a 1 s deadline must fire on rank 0;
# return: nothing aborts, only the deadline ends the wait
case $mode in
timeout) export CTRAINER_COLLECTIVE_TIMEOUT=1 ;;
return) export CTRAINER_COLLECTIVE_TIMEOUT=5 ;;
esac
out=$(mktemp)
start=$(date +%s)
timeout 100 "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$prog" "$mode" >"$out" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
cat "$out"
case $mode in
kill) pattern='rank 1 .*exited on signal 9' ;;
error) pattern='rank 1 of 2 failed: .*injected failure at step 5' ;;
return) pattern='rank 1: .*injected failure at step 5' ;;
timeout) pattern='rank 0 of 2 failed: .*rank 0: all-reduce did not complete within 1 s' ;;
esac
ok=1
if [ "$rc" -eq 0 ]; then echo "FAIL: mpirun exited 0"; ok=0; fi
if [ "$rc" -eq 124 ]; then echo "FAIL: the run hung (killed after 100 s)"; ok=0; fi
if [ "$elapsed" -gt 30 ]; then echo "FAIL: took ${elapsed} s (30 s at most)"; ok=0; fi
if ! grep -q "$pattern" "$out"; then echo "FAIL: no message matching '$pattern'"; ok=0; fi
rm -f "$out"
[ $ok -eq 1 ] && echo "ok: $mode: exit status $rc after ${elapsed} s"
[ $ok -eq 1 ]
