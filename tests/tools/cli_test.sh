#!/bin/sh
# The ctrainer tool end to end: config --default, refusing to overwrite,
# launch of a 2-rank job, the job's exit status, flag and config errors, env.
# usage: cli_test.sh CTRAINER RANK_ECHO
set -u
ctrainer=$1
echo_prog=$2
. "$(dirname "$0")/checks.sh"

cfg=$dir/sub/config.yaml
"$ctrainer" config --default --config_file "$cfg" >"$dir/out" 2>&1
check "config --default writes the file" test $? -eq 0 -a -f "$cfg"
check "config --default says where" has "ctrainer config saved at $cfg"
gpus=$(ls /proc/driver/nvidia/gpus 2>/dev/null | wc -l)
if [ "$gpus" -eq 0 ]; then
    check "no GPU: use_cpu true" grep -qx "use_cpu: true" "$cfg"
fi

"$ctrainer" config --default --config_file "$cfg" >"$dir/out" 2>&1
check "config refuses to overwrite" test $? -eq 1
check "config says why" has "already exists; pass --force to overwrite it"
"$ctrainer" config --default --force --config_file "$cfg" >"$dir/out" 2>&1
check "config --force overwrites" test $? -eq 0

# the questions, answered through a pipe; a bad answer is asked again;
# MULTI_CPU sets use_cpu without asking
printf 'MULTI_TPU\nMULTI_CPU\n1\n4\nbf16\n2\n\n' |
    "$ctrainer" config --config_file "$dir/asked.yaml" >"$dir/out" 2>&1
check "config questions exit 0" test $? -eq 0
check "a bad answer is explained" has "distributed_type: 'MULTI_TPU' is not valid"
check "MULTI_CPU does not ask about the CPU" sh -c '! grep -q "CPU only" "$0"' "$dir/out"
for line in "distributed_type: MULTI_CPU" "num_processes: 4" "use_cpu: true" \
    "mixed_precision: bf16" "gradient_accumulation_steps: 2" "seed: 42"; do
    check "answered $line" grep -qx "$line" "$dir/asked.yaml"
done

# MULTI_GPU runs on GPUs whatever this machine has (without GPUs the
# defaults say use_cpu true), and asks which GPUs
printf 'MULTI_GPU\n1\n2\n0,1\n\n\n\n' |
    "$ctrainer" config --config_file "$dir/gpus.yaml" >"$dir/out" 2>&1
check "MULTI_GPU questions exit 0" test $? -eq 0
check "MULTI_GPU asks for the GPUs" has "Which GPUs"
for line in "distributed_type: MULTI_GPU" "num_processes: 2" "use_cpu: false" \
    "gpu_ids: 0,1"; do
    check "MULTI_GPU: $line" grep -qx "$line" "$dir/gpus.yaml"
done

# flags take no value: --cpu=false must not select the CPU
"$ctrainer" launch --cpu=false "$echo_prog" >"$dir/out" 2>&1
check "a flag with a value exits 2" test $? -eq 2
check "a flag with a value is explained" has "--cpu is a flag and takes no value"
for flag in --help=1 --default=no --force=false; do
    "$ctrainer" config "$flag" --config_file "$dir/flag.yaml" >"$dir/out" 2>&1
    check "config $flag exits 2" test $? -eq 2
    check "config $flag is explained" has "is a flag and takes no value"
done
check "config with a bad flag writes nothing" test ! -e "$dir/flag.yaml"

# --cpu: the default config of a one-GPU machine gives one process a GPU,
# and two ranks would need two
"$ctrainer" launch --config_file "$cfg" --num_processes 2 --cpu --seed 7 "$echo_prog" \
    >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
check "launch exits 0" test $rc -eq 0
check "launch prints the line" has_line "Launching training on 2 CPUs."
check "launch prints the settings" has "num_processes                2 (command line)"
check "rank 0 ran" has "rank 0 of 2: seed 7, mixed_precision no, use_cpu true, threads"
check "rank 1 ran" has "rank 1 of 2: seed 7"

CTRAINER_MIXED_PRECISION=bf16 "$ctrainer" launch --config_file "$cfg" -n 2 --cpu \
    "$echo_prog" --exit 3 >"$dir/out" 2>&1
check "launch exits with the job's status" test $? -eq 3
check "environment beats the config file" has "mixed_precision bf16"

"$ctrainer" launch --num_processes two "$echo_prog" >"$dir/out" 2>&1
check "bad flag value exits 2" test $? -eq 2
check "bad flag value message" has "num_processes: 'two' is not valid (expected an integer >= 1)"
"$ctrainer" launch --nun_processes 2 "$echo_prog" >"$dir/out" 2>&1
check "unknown flag exits 2" test $? -eq 2
check "unknown flag message" has "unknown option --nun_processes"
"$ctrainer" launch --config_file "$dir/none.yaml" "$echo_prog" >"$dir/out" 2>&1
check "missing config file" has "the config file $dir/none.yaml does not exist"
printf 'num_processes: 2\nmixed_precision: fp8\n' >"$dir/bad.yaml"
"$ctrainer" launch --config_file "$dir/bad.yaml" "$echo_prog" >"$dir/out" 2>&1
check "bad config file exits 1" test $? -eq 1
check "bad config file names file:line" has "$dir/bad.yaml:2: mixed_precision: 'fp8' is not valid"

"$ctrainer" env --config_file "$cfg" >"$dir/out" 2>&1
check "env exits 0" test $? -eq 0
check "env prints the version" has "ctrainer version: "
check "env prints the config file" has "config file: $cfg"

[ $fails -eq 0 ] && echo "all passed" || echo "$fails failed"
[ $fails -eq 0 ]
