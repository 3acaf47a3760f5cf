#!/bin/sh
# Runs mpi_checkpoint in the modes that need more than one mpirun or a
# failing exit status, and checks every rank's verdict.
#   checkpoint_driver.sh fault_rank0|fault_rank1|world_size MPIEXEC PROGRAM WORKDIR
mode=$1 mpiexec=$2 prog=$3 work=$4
np2="$mpiexec --allow-run-as-root --oversubscribe -np 2"
out=$(mktemp)
ok=1
fail() { echo "FAIL: $*"; ok=0; }

# expect_ranks N: the output has an ok line from each of ranks 0..N-1 and
# no failed check
expect_ranks() {
    cat "$out"
    r=0
    while [ "$r" -lt "$1" ]; do
        grep -q "^rank $r: ok: " "$out" || fail "no ok line from rank $r"
        r=$((r + 1))
    done
    if grep -q "check failed" "$out"; then fail "a check failed"; fi
}

case $mode in
fault_rank*)
    rank=${mode#fault_rank}
    timeout 100 $np2 "$prog" fault "$rank" "$work" >"$out" 2>&1
    rc=$?
    expect_ranks 2
    # every rank's trainer_train failed: the program exits non-zero
    [ "$rc" -ne 0 ] || fail "mpirun exited 0"
    [ "$rc" -ne 124 ] || fail "the run hung (killed after 100 s)"
    ;;
world_size)
    # saved by 1 process, resumed by 2; saved by 2, resumed by 1
    "$prog" save "$work/one" >"$out" 2>&1 || fail "1-process save"
    expect_ranks 1
    timeout 100 $np2 "$prog" mismatch "$work/one" >"$out" 2>&1 || fail "2-process resume"
    expect_ranks 2
    timeout 100 $np2 "$prog" save "$work/two" >"$out" 2>&1 || fail "2-process save"
    expect_ranks 2
    "$prog" mismatch "$work/two" >"$out" 2>&1 || fail "1-process resume"
    expect_ranks 1
    ;;
*) fail "unknown mode $mode" ;;
esac
rm -f "$out"
[ $ok -eq 1 ] && rm -rf "$work" && echo "ok: $mode"
[ $ok -eq 1 ]
