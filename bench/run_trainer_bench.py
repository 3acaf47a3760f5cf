"""ctrainer vs PyTorch at its best, interleaved (docs/benchmarks.md, "Trainer").

    /usr/bin/python3 bench/run_trainer_bench.py [--build DIR] [--repeats N]
                                                [--busy] [--only W,W]
                                                [--clock wall|cpu]

Set-up (Debian): python3-torch, plus Debian's OpenMP OpenBLAS so that both
BLAS builds can be tried: `apt-get install python3-torch libopenblas0-openmp`
(it installs beside the pthread build; the system default stays as it was).

1. PyTorch's configuration is chosen per workload by measurement: 1 and 2
   threads x LD_LIBRARY_PATH set to Debian's openblas-openmp or
   openblas-pthread directory (which libblas.so.3 torch loads). Each of the
   four runs a short probe; the fastest is used and printed.
2. Then ctrainer (BUILD/bench/bench_trainer, OMP_NUM_THREADS=2 unless set)
   and PyTorch in that configuration alternate, --repeats rounds. Each
   timed process runs 2 epochs; the first is a warm-up and left out.
3. Prints per workload the medians, the ranges (min-max) and the ratio
   PyTorch / ctrainer (> 1: ctrainer is faster), and the load average.

Workloads:
  mlp        train_mnist's MLP, a full epoch (1875 steps of batch 32)
  basicnet   PyTorch's MNIST example net, 40 steps of batch 64 (ms per step;
             an epoch is 938 steps)
  resnet18   ResNet-18 training step, 32 random 64x64 RGB images, 3 steps
  step_b1    the MLP at batch 1, 3000 steps: the per-step fixed cost
  step_b32   the MLP at batch 32 (from the mlp runs)
  process    examples/train_mnist --epochs 1 vs bench/train_mnist_torch.py
             --epochs 1: whole-process wall time (start-up, loading, 55 000
             training images, validation, test evaluation) and peak RSS
With --clock cpu every figure is process CPU seconds (epoch: the process's
CPU time over the epoch; process: user + system time) instead of wall time:
on a machine shared with other work, pinned (taskset) to one core with
OMP_NUM_THREADS=1 and PyTorch probed on 1 thread only, this is the cost
each side actually ran, not its waits for the core. It says nothing about
how threads scale; final ratios still need wall time on an idle machine.
With --busy a busy loop occupies one core for the whole run, and ctrainer
is compared with itself at OMP_NUM_THREADS=2 vs 1 instead (the "never
slower with more threads" check; ratio > 1: 2 threads are faster).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
BLAS = {"openmp": f"{LIBDIR}/openblas-openmp", "pthread": f"{LIBDIR}/openblas-pthread"}

# name: (bench_trainer / bench_trainer_torch.py arguments, what is compared)
WORKLOADS = {
    "mlp": (["--workload", "mlp"], "epoch_s"),
    "basicnet": (["--workload", "basicnet", "--batches", "40"], "step_ms"),
    "resnet18": (["--workload", "resnet18", "--batches", "3"], "step_ms"),
    "step_b1": (["--workload", "mlp", "--batch", "1", "--batches", "3000"], "step_ms"),
}
PROBE = {  # shorter runs to choose PyTorch's configuration
    "mlp": ["--workload", "mlp", "--batches", "400"],
    "basicnet": ["--workload", "basicnet", "--batches", "10"],
    "resnet18": ["--workload", "resnet18", "--batches", "2"],
    "step_b1": ["--workload", "mlp", "--batch", "1", "--batches", "1000"],
}


CPU_CLOCK = False  # --clock cpu
CPU_KEY = {"epoch_s": "cpu_s", "step_ms": "cpu_step_ms"}


def key(k):
    """The figure printed under k by the benchmark programs, for the clock."""
    return CPU_KEY[k] if CPU_CLOCK else k


def run(cmd, env):
    """stdout of cmd, and its wall (or CPU) time and peak RSS (MiB) from
    /usr/bin/time."""
    tf = f"/tmp/ct_bench_time.{os.getpid()}"
    out = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", tf] + cmd, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         check=True).stdout
    with open(tf) as f:
        wall, user, system, rss = f.read().split()[-4:]
    os.remove(tf)
    secs = float(user) + float(system) if CPU_CLOCK else float(wall)
    return out, secs, float(rss) / 1024


def last(out, key):
    """The value after `key` on the last line that has it."""
    vals = [ln.split()[ln.split().index(key) + 1] for ln in out.splitlines()
            if key in ln.split()]
    return float(vals[-1])


def torch_env(threads, blas):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), LD_LIBRARY_PATH=BLAS[blas])
    return env, threads


def torch_cmd(args, threads):
    return [PY, f"{HERE}/bench_trainer_torch.py", "--epochs", "2", "--threads",
            str(threads)] + args


def ct_env(threads=None):
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    else:
        env.setdefault("OMP_NUM_THREADS", "2")
    return env


def best_torch(name):
    """(threads, blas) of the fastest PyTorch probe for workload name."""
    res = []
    for blas in BLAS:
        # CPU seconds of 2 threads count their spin-waits: 1 thread only
        for threads in (1,) if CPU_CLOCK else (1, 2):
            env, _ = torch_env(threads, blas)
            out, _, _ = run(torch_cmd(PROBE[name], threads), env)
            res.append((last(out, key("step_ms")), threads, blas))
    res.sort()
    print(f"  {name:9s} PyTorch probes (ms/step): " +
          ", ".join(f"{t}T {b} {v:.3f}" for v, t, b in res) +
          f" -> {res[0][1]} thread(s), openblas-{res[0][2]}", flush=True)
    return res[0][1], res[0][2]


def row(label, unit, a, b, names):
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{label:10s} {names[0]} {ma:9.3f} {unit} ({min(a):.3f}-{max(a):.3f})  "
          f"{names[1]} {mb:9.3f} {unit} ({min(b):.3f}-{max(b):.3f})  "
          f"ratio {mb / ma:5.2f}x (n={len(a)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--busy", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated workloads")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args()
    global CPU_CLOCK
    CPU_CLOCK = args.clock == "cpu"
    names = [w for w in list(WORKLOADS) + ["process"]
             if not args.only or w in args.only.split(",")]
    bench = [f"{args.build}/bench/bench_trainer", "--epochs", "2"]
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if args.busy else None
    try:
        print(f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  load {os.getloadavg()}"
              f"  clock {args.clock}")
        if args.busy:
            sides = ("2 threads", "1 thread ")
            cfg = {}
        else:
            sides = ("ctrainer", "pytorch ")
            print("choosing PyTorch's configuration:")
            cfg = {w: best_torch(w) for w in names if w in PROBE}
            if "process" in names:
                cfg["process"] = cfg.get("mlp") or best_torch("mlp")
        res = {w: ([], []) for w in names}
        rss = ([], [])
        for _ in range(args.repeats):
            for w in names:
                if args.busy:
                    cmds = [(bench + WORKLOADS[w][0], ct_env(2)),
                            (bench + WORKLOADS[w][0], ct_env(1))] if w != "process" else [
                        ([f"{args.build}/examples/train_mnist", "--epochs", "1",
                          "--no-progress-bar"], ct_env(t)) for t in (2, 1)]
                elif w == "process":
                    env, t = torch_env(*cfg[w])
                    cmds = [([f"{args.build}/examples/train_mnist", "--epochs", "1",
                              "--no-progress-bar"], ct_env()),
                            ([PY, f"{HERE}/train_mnist_torch.py", "--epochs", "1",
                              "--threads", str(t)], env)]
                else:
                    env, t = torch_env(*cfg[w])
                    cmds = [(bench + WORKLOADS[w][0], ct_env()),
                            (torch_cmd(WORKLOADS[w][0], t), env)]
                for side, (cmd, env) in enumerate(cmds):
                    out, secs, peak = run(cmd, env)
                    if w == "process":
                        res[w][side].append(secs)
                        rss[side].append(peak)
                    else:
                        res[w][side].append(last(out, key(WORKLOADS[w][1])))
                        if w == "mlp":
                            res.setdefault("step_b32", ([], []))[side].append(
                                last(out, key("step_ms")))
        print(f"results (median (min-max); load now {os.getloadavg()}):")
        for w, (a, b) in res.items():
            unit = "s" if w in ("mlp", "process") else "ms"
            if w.startswith("step"):
                a, b, unit = [1e3 * v for v in a], [1e3 * v for v in b], "us"
            if w in cfg:
                print(f"  {w}: PyTorch on {cfg[w][0]} thread(s), openblas-{cfg[w][1]}")
            row(w, unit, a, b, sides)
        if "process" in names:
            row("peak RSS", "MiB", rss[0], rss[1], sides)
    finally:
        if busy:
            busy.kill()


if __name__ == "__main__":
    sys.exit(main())
