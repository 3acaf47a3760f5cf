#!/bin/sh
# Two machines on one box: two network namespaces joined by a veth pair,
# each with its own address, and an mpirun hostfile naming both. mpirun's
# remote shell is a script that enters the namespace of the host it is
# asked for instead of using ssh. A few training steps of TRAIN on 2 ranks
# over two machines report the same losses and accuracy as on one machine.
# Needs root (ip netns); exits 77 (skipped) without it. Only addresses
# inside the namespaces created here are used.
# usage: two_machines_test.sh CTRAINER RANK_ECHO TRAIN
set -u
ctrainer=$1
echo_prog=$2
train=$3
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
    echo "SKIPPED: the two-machine test needs root and ip(8) to create network namespaces"
    exit 77
fi
a=ct_m0_$$
b=ct_m1_$$
net=10.254.77
dir=$(mktemp -d /tmp/ct_2m_XXXXXX)
cleanup() {
    ip netns del "$a" 2>/dev/null
    ip netns del "$b" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
if ! ip netns add "$a" 2>"$dir/err"; then
    echo "SKIPPED: cannot create network namespaces here: $(cat "$dir/err")"
    exit 77
fi
set -e
ip netns add "$b"
ip link add "v0_$$" netns "$a" type veth peer name "v1_$$" netns "$b"
ip -n "$a" addr add "$net.1/24" dev "v0_$$"
ip -n "$b" addr add "$net.2/24" dev "v1_$$"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "v0_$$" up
ip -n "$b" link set "v1_$$" up
set +e

cat >"$dir/agent" <<AGENT
#!/bin/sh
# mpirun's remote shell: agent [options] HOST COMMAND...
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1
shift
case "\$host" in
$net.1) ns=$a ;;
$net.2) ns=$b ;;
*) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$dir/agent"
printf '%s slots=1\n%s slots=1\n' "$net.1" "$net.2" >"$dir/hosts"

ip netns exec "$a" env OMPI_MCA_plm_rsh_agent="$dir/agent" \
    "$ctrainer" launch --num_machines 2 --num_processes 2 --hostfile "$dir/hosts" \
    --main_process_ip "$net.1" --seed 5 "$echo_prog" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
fails=0
[ $rc -eq 0 ] || { echo "FAIL exit status $rc"; fails=1; }
grep -qx "Launching training on 2 CPUs." "$dir/out" || { echo "FAIL no launch line"; fails=1; }
for r in 0 1; do
    grep -q "^rank $r of 2: seed 5, mixed_precision no, use_cpu true" "$dir/out" ||
        { echo "FAIL rank $r did not run"; fails=1; }
done
# each rank ran in its own namespace: two different network namespaces
n=$(grep -o 'netns [^ ]*' "$dir/out" | sort -u | wc -l)
[ "$n" -eq 2 ] || { echo "FAIL the ranks ran in $n network namespaces, not 2"; fails=1; }
# a few training steps: the same results on two machines as on one
results() { grep -E "_loss |test accuracy" "$1" | sort -u; }
train_args="--epochs 1 --limit-batches 5 --no-progress-bar"
ip netns exec "$a" "$ctrainer" launch --num_processes 2 "$train" $train_args >"$dir/one" 2>&1 ||
    { echo "FAIL one-machine training run"; cat "$dir/one"; fails=1; }
ip netns exec "$a" env OMPI_MCA_plm_rsh_agent="$dir/agent" \
    "$ctrainer" launch --num_machines 2 --num_processes 2 --hostfile "$dir/hosts" \
    "$train" $train_args >"$dir/two" 2>&1 ||
    { echo "FAIL two-machine training run"; cat "$dir/two"; fails=1; }
results "$dir/one" >"$dir/one.r"
results "$dir/two" >"$dir/two.r"
echo "one machine:"
cat "$dir/one.r"
if [ ! -s "$dir/one.r" ] || ! cmp -s "$dir/one.r" "$dir/two.r"; then
    echo "FAIL two machines differ from one:"
    cat "$dir/two.r"
    fails=1
fi
[ $fails -eq 0 ] && echo "all passed"
[ $fails -eq 0 ]
