"""What our training env stack costs over the simulator's own step, next to the peer's wrapper.

    .venv/bin/python benchmarks/env_overhead.py                      # every row (see below)
    .venv/bin/python benchmarks/env_overhead.py --only CheetahRun --envs 64
    .venv/bin/python benchmarks/env_overhead.py --members-only       # the 4-member rows

On 2 CPU cores a row takes 20 s (CartpoleBalance) to 2 min (Go1, halfcheetah at 256 envs), ~40
min in all; PandaPickCube's raw program did not finish compiling within the 10-minute
per-process limit there (`--timeout`).

Three ways to step the same env with uniform random actions, each in its own process:

- `raw`: `jit(scan(vmap(env.step)))` of the simulator env itself (MuJoCo Playground's `MjxEnv`,
  or `brax.envs.get_environment`), no wrapper: the floor;
- `jaxrl`: the env `jaxrl train` steps, `engine.loop.make_env` (auto-reset of the done envs with
  fresh starts, `Episode`, and with `--domain-randomization playground` a fresh randomized
  model every episode);
- `peer`: the training wrapper the peers train with: Playground's `wrap_for_brax_training`
  (`_src/wrapper.py`; with its domain randomization, one model per env slot for the whole run)
  or, for a Brax env, Brax's `envs.training.wrap`. Both reset every env to one cached start
  state (the select runs every step, the reset never).

Every process compiles one program (a scan of `--scan` steps), runs it twice as warm-up, then
`--repeats` more times; steps/s = envs x timed steps / time. The timed window (1,000 steps by
default, after 200 warm-up steps) contains the step on which every DM Control env is truncated
(episodes of 1,000 steps all start together), so the cost of those resets is in the number, as
in training; a median of short scans would leave it out. The member rows vmap 4 members (seeds)
of the stack, as `jaxrl train --num-seeds 4` on one device; `raw` then steps 4 x envs. Writes
`benchmarks/env_overhead.json` and prints the table for `benchmarks/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import _common

# (env, env counts, domain randomization)
ROWS = (("CartpoleBalance", (64, 256, 1024), False), ("CheetahRun", (64, 256), False),
        ("WalkerWalk", (64, 256), False), ("Go1JoystickFlatTerrain", (32, 128), False),
        ("Go1JoystickFlatTerrain", (32, 128), True), ("PandaPickCube", (32, 128), False),
        ("halfcheetah", (64, 256), False))
MEMBER_ROWS = (("CheetahRun", 64), ("Go1JoystickFlatTerrain", 32))
KINDS = ("raw", "jaxrl", "peer")
TAG = "ENV_OVERHEAD_RESULT "


def _stepper(kind: str, env_name: str, num_envs: int, randomize: bool):
    """(reset(key) -> batched state, batched step(state, action), action size)."""
    import jax

    from jaxrl import envs
    from jaxrl.engine import loop

    base = envs.make(env_name, impl="jax")
    sim = base.env
    brax = type(base).__name__ == "BraxEnv"
    if kind == "jaxrl":
        cfg = loop.TrainConfig(num_envs=num_envs,
                               domain_randomization="playground" if randomize else None)
        env = loop.make_env(base, cfg)
        return env.reset, env.step, base.action_size
    if kind == "raw":
        return (lambda key: jax.vmap(sim.reset)(jax.random.split(key, num_envs)),
                jax.vmap(sim.step), base.action_size)
    if brax:
        from brax.envs.wrappers import training

        env = training.wrap(sim, episode_length=base.episode_length)
    else:
        import functools

        from mujoco_playground import registry, wrapper

        fn = None
        if randomize:
            fn = functools.partial(registry.get_domain_randomizer(env_name),
                                   rng=jax.random.split(jax.random.PRNGKey(99), num_envs))
        env = wrapper.wrap_for_brax_training(sim, episode_length=base.episode_length,
                                             randomization_fn=fn)
    return (lambda key: env.reset(jax.random.split(key, num_envs)), env.step, base.action_size)


def measure(s: dict) -> dict:
    """One row in this process: steps/s of `s['kind']` (see the module docstring)."""
    import jax
    import jax.numpy as jnp

    from jaxrl.engine import parallel

    n, members, scan = s["num_envs"], s["members"], s["scan"]
    reset, step, act = _stepper(s["kind"], s["env"], n, s["randomize"])

    def run(state, key):
        def body(carry, _):
            st, k = carry
            k, ka = jax.random.split(k)
            st = step(st, jax.random.uniform(ka, (n, act), jnp.float32, -1.0, 1.0))
            return (st, k), st.done.sum()

        (state, key), done = jax.lax.scan(body, (state, key), None, scan)
        return state, key, done.sum()

    keys = jax.random.split(jax.random.PRNGKey(s["seed"]), members)
    run_m = jax.jit(parallel.member_map(run))
    t0 = time.perf_counter()
    state = jax.jit(parallel.member_map(reset))(keys)
    carry = (state, jax.random.split(keys[0], members))
    for _ in range(2):
        state, key, done = run_m(*carry)
        carry = (state, key)
        jax.block_until_ready(carry)
    warmup = time.perf_counter() - t0
    ended = 0
    t0 = time.perf_counter()
    for _ in range(s["repeats"]):
        state, key, done = run_m(*carry)
        carry = (state, key)
        ended += done
    jax.block_until_ready(carry)
    seconds = time.perf_counter() - t0
    steps = members * n * scan * s["repeats"]
    return dict(s, sps=steps / seconds, seconds=seconds, warmup_s=warmup,
                episodes_ended=int(jax.device_get(ended).sum()))


def _spawn(s: dict, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(s)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(s, error=f"timeout after {timeout:g} s")
    for line in out.stdout.splitlines():
        if line.startswith(TAG):
            return json.loads(line[len(TAG):])
    return dict(s, error=(out.stderr or out.stdout).strip().splitlines()[-1:])


def plan(args) -> list[dict]:
    rows = []
    for env, counts, randomize in ROWS:
        if (args.only and env not in args.only) or args.members_only:
            continue
        for n in args.envs or counts:
            rows += [dict(env=env, num_envs=n, randomize=randomize, kind=k, members=1)
                     for k in KINDS]
    if not args.no_members:
        for env, n in MEMBER_ROWS:
            if not args.only or env in args.only:
                rows += [dict(env=env, num_envs=n, randomize=False, kind=k, members=4)
                         for k in ("raw", "jaxrl")]
    return [dict(r, scan=args.scan, repeats=args.repeats, seed=0) for r in rows]


def table(results: list[dict]) -> list[str]:
    """Markdown rows: one per (env, DR, envs, members) with each kind's steps/s and ratio."""
    groups: dict[tuple, dict] = {}
    for r in results:
        key = (r["env"], r["randomize"], r["num_envs"], r["members"])
        groups.setdefault(key, {})[r["kind"]] = r
    lines = ["| env | DR | envs x members | raw steps/s | jaxrl steps/s | jaxrl / raw | "
             "peer wrapper steps/s | peer / raw | episodes ended (jaxrl) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def sps(r):
        return "error" if r is None or "error" in r else f"{r['sps']:,.0f}"

    def ratio(r, raw):
        if r is None or raw is None or "error" in r or "error" in raw:
            return "-"
        return f"{r['sps'] / raw['sps']:.2f}"

    for (env, dr, n, m), kinds in groups.items():
        raw, ours, peer = kinds.get("raw"), kinds.get("jaxrl"), kinds.get("peer")
        ended = ours.get("episodes_ended", "-") if ours else "-"
        lines.append(f"| {env} | {'playground' if dr else '-'} | {n} x {m} | {sps(raw)} | "
                     f"{sps(ours)} | {ratio(ours, raw)} | {sps(peer) if peer else '-'} | "
                     f"{ratio(peer, raw) if peer else '-'} | {ended} |")
    return lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", help="env names to run (default: every row)")
    p.add_argument("--envs", type=int, nargs="+", help="env counts (default: each row's)")
    p.add_argument("--scan", type=int, default=100, help="steps per compiled call")
    p.add_argument("--repeats", type=int, default=10, help="timed calls after two warm-ups")
    p.add_argument("--no-members", action="store_true", help="skip the 4-member rows")
    p.add_argument("--members-only", action="store_true", help="only the 4-member rows")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    p.add_argument("--out", default=os.path.join(_common.REPO, "benchmarks",
                                                 "env_overhead.json"))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(TAG + json.dumps(measure(json.loads(args.worker))), flush=True)
        return
    command = " ".join(["benchmarks/env_overhead.py"] + (argv or sys.argv[1:]))
    res = {"command": command, "machine": _common.machine_info(),
           "versions": _common.versions(), "rows": []}
    for s in plan(args):
        r = _spawn(s, args.timeout)
        res["rows"].append(r)
        print(f"{r['env']} {r['num_envs']}x{r['members']} dr={r['randomize']} {r['kind']}: "
              f"{r.get('sps', r.get('error'))}", flush=True)
        _common.write_json(args.out, res)
    print("\n".join(_common.machine_lines(res) + table(res["rows"])))


if __name__ == "__main__":
    main()
