"""Minimal repro: jaxlib's batched CPU LAPACK kernels deadlock XLA's intra-op thread pool.

Needs only jax (no jaxrl); each case runs in a fresh process with a timeout, so a hang is a row
of the table, not a stuck script:

    python benchmarks/lapack_deadlock.py                 # the table below, about 2-4 min
    python benchmarks/lapack_deadlock.py --stacks DIR    # also gdb stacks of hung cases
    python benchmarks/lapack_deadlock.py --out FILE.json

What happens (jax/jaxlib 0.10.2, CPU): a batched LAPACK call (Cholesky, QR, LU, triangular
solve, eigh, SVD, ...) with enough work splits its batch over the intra-op thread pool
(`jax::ParallelBatchMap` in `jaxlib/cpu/_lapack.so`) and blocks the pool thread that runs it
until the pieces finish. The pool has one thread per CPU of the process's affinity. When as many
such calls run at once as the pool has threads, each holds a thread and waits for pieces queued
behind the others: every thread sleeps in a futex wait and the process never finishes. Calls run
at once when (a) one program has several independent ones (XLA's thunk executor runs
independent ops concurrently), or (b) several CPU devices of one process each run one (a
`shard_map` or sharded `jit` over `--xla_force_host_platform_device_count` / `jax_num_cpu_devices`
devices, which share the pool). A pool of one thread runs the pieces inline and never hangs;
a call with a single matrix, or with little work, does not split.

Where it bit us: a 4-member `jit(vmap(init))` of orthogonal-initialized layers (QR), and
`jaxrl train --preset ppo-go1-flat-cpu --num-seeds 2` on 2 cores (MJX's Cholesky of Go1's
18 x 18 mass matrix, one member per CPU device). jaxrl now keeps such programs on one CPU
device (`jaxrl.engine.parallel.cpu_devices_deadlock`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

# (name, op, batch (members for `orthogonal`), independent calls per program, matrix size n,
#  CPU devices, CPUs of the child's affinity or None for all)
CASES = [
    ("orthogonal init of 5 layers, vmapped over 4 members", "orthogonal", 4, 5, 0, 1, None),
    ("same, 1 member (no batch, no split)", "orthogonal", 1, 5, 0, 1, None),
    ("same, 4 members on one CPU (pool of 1)", "orthogonal", 4, 5, 0, 1, 1),
    ("cholesky: 8 independent calls, batch 64, n 64", "cholesky", 64, 8, 64, 1, None),
    ("cholesky: 1 call, batch 64, n 64", "cholesky", 64, 1, 64, 1, None),
    ("cholesky per device: 2 devices, batch 1024, n 18", "cholesky", 1024, 1, 18, 2, None),
    ("cholesky per device: 1 device, batch 2048, n 18", "cholesky", 2048, 1, 18, 1, None),
    ("cholesky per device: 2 devices, batch 1024, n 4", "cholesky", 1024, 1, 4, 2, None),
]

CHILD = r"""
import sys, time
op, batch, calls, n, devices = sys.argv[1], *map(int, sys.argv[2:6])
import jax, jax.numpy as jnp

LAYERS = [(17, 256), (256, 256), (256, 512), (512, 128), (128, 6)]

def program(key):  # `calls` independent batched factorizations
    keys = jax.random.split(key, calls)
    if op == "orthogonal":  # an MLP's orthogonal init (QR per layer), `batch` members
        init = jax.nn.initializers.orthogonal()
        return [jax.vmap(lambda m: init(m, shape))(jax.random.split(k, batch))
                for k, shape in zip(keys, LAYERS[:calls])]
    spd = lambda a: a @ jnp.swapaxes(a, -1, -2) + n * jnp.eye(n)
    return [jax.scipy.linalg.cho_factor(spd(jax.random.normal(k, (batch, n, n))))[0]
            for k in keys]

if devices > 1:  # one program per CPU device, the devices run at once
    from jax.sharding import Mesh, PartitionSpec as P
    mesh = Mesh(jax.devices()[:devices], ("d",))
    f = jax.jit(jax.shard_map(lambda k: [x[None] for x in program(k[0])], mesh=mesh,
                              in_specs=P("d"), out_specs=P("d")))
    arg = jax.random.split(jax.random.PRNGKey(0), devices)
else:
    f, arg = jax.jit(program), jax.random.PRNGKey(0)
t = time.time()
for _ in range(50):
    jax.block_until_ready(f(arg))
print("OK", round(time.time() - t, 2), flush=True)
"""


def run_case(case, timeout: float, stacks_dir: str | None) -> dict:
    name, op, batch, calls, n, devices, cpus = case
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(devices))
    cmd = [sys.executable, "-c", CHILD, op, str(batch), str(calls), str(n), str(devices)]
    if cpus:  # restrict the child's affinity before jax sizes its pool
        cmd = ["taskset", "-c", ",".join(map(str, sorted(os.sched_getaffinity(0))[:cpus]))] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    t0 = time.time()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stack_file = _stacks(proc.pid, name, stacks_dir)
        proc.kill()
        proc.communicate()
        result = "HANG"
        if stack_file:  # pool threads parked inside jaxlib's batch split
            with open(stack_file) as f:
                waiting = f.read().count("ParallelBatchMap")
            result += f" ({waiting} threads waiting in ParallelBatchMap)"
        return {"case": name, "result": result, "seconds": round(time.time() - t0, 1),
                "stacks": stack_file}
    ok = proc.returncode == 0 and "OK" in out
    return {"case": name, "result": "ok" if ok else f"error rc {proc.returncode}",
            "seconds": round(time.time() - t0, 1), "stderr": None if ok else err[-800:]}


def _stacks(pid: int, name: str, stacks_dir: str | None) -> str | None:
    """gdb's `thread apply all bt` of a hung child into DIR (when asked and gdb exists)."""
    if not stacks_dir or not shutil.which("gdb"):
        return None
    os.makedirs(stacks_dir, exist_ok=True)
    path = os.path.join(stacks_dir, "".join(c if c.isalnum() else "_" for c in name) + ".txt")
    with open(path, "w") as f:
        subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 30"],
                       stdout=f, stderr=subprocess.STDOUT, timeout=120)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=45.0, help="seconds before a case is a hang")
    ap.add_argument("--stacks", default=None, help="folder for gdb stacks of hung cases")
    ap.add_argument("--out", default=None, help="JSON output")
    args = ap.parse_args(argv)
    import jax
    import jaxlib

    info = {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "cpus": len(os.sched_getaffinity(0)), "timeout_s": args.timeout}
    print(f"jax {info['jax']}, jaxlib {info['jaxlib']}, {info['cpus']} CPUs in affinity; "
          f"a case is a hang after {args.timeout:.0f} s", flush=True)
    rows = []
    print("| case | result | s |\n| --- | --- | ---: |", flush=True)
    for case in CASES:
        row = run_case(case, args.timeout, args.stacks)
        rows.append(row)
        print(f"| {row['case']} | {row['result']} | {row['seconds']} |", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
