"""Seed-vmap probe: total SPS of the training chunk for 1 vs S vmapped seeds, built as the runner
builds it (`runner._session`: `jax.jit(jax.vmap(chunk))` over `vmap(init)` states).

Why: 4 vmapped seeds of the CPU PPO preset ran at half the total SPS of one seed, although raw
MJX stepping and a plain MLP SGD loop both vmap at ~1.1x. This script times the whole chunk and,
with `--part collect|update`, only the collect (rollout) or only the update (same pieces as
`loop.make_train`); `--hlo` counts ops of the compiled HLO, `--dump PREFIX` writes its text and
`--profile PREFIX` writes a perfetto trace of one call per seed count (per-thunk times).

Programs of all seed counts are compiled first and then timed interleaved, so that load from
other jobs hits them alike; `cpu_s` (process CPU time) is reported next to the wall time.
`XLA_FLAGS=--xla_cpu_multi_thread_eigen=false` isolates the work per step from intra-op
threading. Findings on 2 shared cores (2026-12-02): collect vmaps at 1.0-1.2x; the update does
~1.3x the single-threaded work per env step with 4 seeds, most of it in the MLP weight-gradient
dots (`f32[S,in,out]` batched dots contracting the batch rows), which XLA CPU runs outside
YNNPACK once they have a seed batch dimension (without vmap they are YNNPACK fusions).
With `--shard` and `XLA_FLAGS=--xla_force_host_platform_device_count=4`, each CPU device runs
one seed's unbatched program: 4 seeds then reached 1.39x the total SPS of one seed.

    JAX_COMPILATION_CACHE_DIR=/tmp/vm_cache .venv/bin/python benchmarks/vmap_probe.py \\
        --preset ppo-dmc-cpu --seeds 1 2 4 --iterations 4 [--part update] [--hlo]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import re
import time

import jax
import jax.numpy as jnp

from jaxrl import configs
from jaxrl.engine import loop
from jaxrl.run.assemble import build, seed_keys, stack_hp


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="ppo-dmc-cpu")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 4])
    p.add_argument("--iterations", type=int, default=4, help="iterations per chunk")
    p.add_argument("--repeats", type=int, default=3, help="timed calls after warm-up")
    p.add_argument("--part", choices=("chunk", "collect", "update"), default="chunk")
    p.add_argument("--hlo", action="store_true", help="print op counts of the compiled HLO")
    p.add_argument("--dump", default=None, help="write the compiled HLO text per seed count")
    p.add_argument("--profile", default=None, help="perfetto trace of one call into DIR_<S>")
    p.add_argument("--shard", action="store_true",
                   help="place the seed axis on a device mesh as the runner does "
                        "(`parallel.seed_mesh`); with XLA_FLAGS="
                        "--xla_force_host_platform_device_count=N each CPU device gets S/N seeds")
    return p.parse_args(argv)


def setup(preset_name: str, num_seeds: int, iterations: int):
    """(agent, env, cfg, runner [S]) as `runner.train` builds them, with `iterations` per chunk."""
    preset = configs.get(preset_name)
    agent_cfg = preset.agent_config
    base = dataclasses.replace(preset.train, num_seeds=num_seeds, num_eval_envs=0, num_chunks=1)
    total = iterations * base.env_steps_per_iteration
    cfg = dataclasses.replace(base, total_env_steps=total)
    agent, env, spec = build(preset.agent, preset.env, cfg, agent_cfg)
    init, chunk = loop.make_train(agent, env)
    hp = agent.default_hp()
    runner = jax.jit(jax.vmap(init))(seed_keys(cfg), stack_hp(hp, num_seeds))
    return agent, env, spec, cfg, chunk, runner


def part_fn(part: str, agent, env, spec, cfg, chunk):
    """The per-seed program to vmap: the chunk, or `iterations` x collect / update only."""
    if part == "chunk":
        return chunk
    env_train = loop.make_env(env, cfg)
    from jaxrl.engine import rollout as rollout_lib

    def collect(runner, key):
        def policy(obs, k, carry, done):
            return (*agent.act(runner.agent_state, obs, k, False), carry)
        (es, _), traj = rollout_lib.rollout_carry(env_train, policy, runner.env_state, (), key,
                                                  cfg.unroll_length)
        return es, traj

    if part == "collect":
        def run(runner):
            def body(r, k):
                es, traj = collect(r, k)
                return r.replace(env_state=es), traj.reward.sum()
            keys = jax.random.split(runner.key, cfg.iterations_per_chunk)
            return jax.lax.scan(body, runner, keys)
        return run

    def run_update(runner):
        _, traj = collect(runner, runner.key)  # one fixed batch, updated on repeatedly

        def body(st, k):
            return agent.update(st, traj, k)
        st, m = jax.lax.scan(body, runner.agent_state,
                             jax.random.split(runner.key, cfg.iterations_per_chunk))
        return runner.replace(agent_state=st), m
    return run_update


def op_counts(text: str) -> collections.Counter:
    """Counts of HLO opcodes in compiled text (`name = type opcode(...)`)."""
    ops = re.findall(r"=\s+[^\s]+\s+([a-z\-]+)\(", text)
    return collections.Counter(ops)


def compile_one(args, num_seeds: int):
    """(compiled program, its input, env steps per call, compile seconds, HLO op counts)."""
    agent, env, spec, cfg, chunk, runner = setup(args.preset, num_seeds, args.iterations)
    fn = part_fn(args.part, agent, env, spec, cfg, chunk)
    if args.shard:
        from jaxrl.engine import parallel
        runner = parallel.shard_members(runner, parallel.seed_mesh(num_seeds))
    t0 = time.time()
    compiled = jax.jit(jax.vmap(fn)).lower(runner).compile()
    compile_s = time.time() - t0
    jax.block_until_ready(compiled(runner))
    steps = cfg.iterations_per_chunk * cfg.env_steps_per_iteration * num_seeds
    ops = None
    if args.hlo or args.dump:
        text = compiled.as_text()
        if args.dump:
            with open(f"{args.dump}_{args.part}_{num_seeds}.txt", "w") as f:
                f.write(text)
        ops = dict(op_counts(text).most_common(25)) if args.hlo else None
    return compiled, runner, steps, compile_s, ops


def main(argv=None):
    """Compiles every seed count first, then times them interleaved (`repeats` rounds; the best
    call of each counts), so that load from other processes hits all of them alike. `cpu_s` is
    the process CPU time of the best call (all threads): on a machine shared with other jobs it
    is steadier than the wall time, and `cpu_sps` = env steps per CPU second."""
    args = parse_args(argv)
    print(f"backend {jax.default_backend()} part {args.part} preset {args.preset} "
          f"iterations {args.iterations}", flush=True)
    progs = {s: compile_one(args, s) for s in args.seeds}
    best = {v: float("inf") for v in progs}
    cpu = {v: float("inf") for v in progs}
    for _ in range(args.repeats):
        for v, (compiled, runner, *_rest) in progs.items():
            t, c = time.time(), time.process_time()
            jax.block_until_ready(compiled(runner))
            best[v] = min(best[v], time.time() - t)
            cpu[v] = min(cpu[v], time.process_time() - c)
    base = None
    for s, (compiled, runner, steps, compile_s, ops) in progs.items():
        sps = steps / best[s]
        base = base or sps
        res = {"seeds": s, "compile_s": round(compile_s, 1), "best_s": round(best[s], 3),
               "cpu_s": round(cpu[s], 3), "total_sps": round(sps),
               "cpu_sps": round(steps / cpu[s]), "per_seed_sps": round(sps / s),
               "vs_1seed": round(sps / base, 3)}
        if ops:
            res["ops"] = ops
        print(res, flush=True)
        if args.profile:
            with jax.profiler.trace(f"{args.profile}_{s}", create_perfetto_trace=True):
                jax.block_until_ready(compiled(runner))


if __name__ == "__main__":
    jnp.zeros(())  # initialize the backend before timing
    main()
