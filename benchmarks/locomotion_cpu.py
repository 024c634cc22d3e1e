"""Locomotion learns on CPU: our best off-policy agent and PPO, each given the same wall-clock
training budget, one after the other on MuJoCo Playground's DM Control `CheetahRun` (MJX
`impl=jax`) on this machine; eval return against training seconds and env steps.

    .venv/bin/python benchmarks/locomotion_cpu.py --budget 1800 --out benchmarks/locomotion_cpu.json
    .venv/bin/python benchmarks/locomotion_cpu.py --budget 1800 --agents pql --reset-pool 0 --keep
    .venv/bin/python benchmarks/locomotion_cpu.py --raw    # stepping costs only

The agents: `pql` with its preset `pql-cheetah-cpu` (chosen with short probes: PQL reached 300
first among the settings tried) and `ppo` with `ppo-dmc-cpu`, its CPU preset, both on the same
training env; the second command adds a `pql` run on the unmodified `CheetahRun` (no pool).

Why a reset pool (`--reset-pool`, default 4096). `CheetahRun.reset` draws random joint angles and
then simulates 200 physics steps with zero action to let the cheetah settle (as dm_control's
cheetah does). Our training wrapper (`engine.wrappers.AutoReset`) computes a fresh reset for every
env at every step and selects it where the env is done (XLA computes both sides of the select),
so one training step of CheetahRun costs about 200 physics steps per env instead of one: ~200x
the raw stepping cost (measured by `--raw`, written to the JSON's `raw` part). With
`--reset-pool K` the training env is `CheetahRunPool`, registered here as its own env family: K
initial states are drawn once with Playground's own `reset` (K independent keys) and every reset
takes one of them uniformly at random, rebuilt from its `qpos`, `qvel` and `qacc_warmstart` (the
MJX state that the next `step` reads; `step` recomputes everything else first), so an episode
from a pooled start is the episode from that true start. Only the diversity of starts is finite
(K = 4096 starts; at these budgets an off-policy run sees ~1-2k episodes, PPO ~10k). The
evaluation during training uses the same env (so the pool too); after training each run is also
evaluated on the unmodified `CheetahRun` (fresh starts drawn by Playground's `reset`), column
"final on CheetahRun". `--reset-pool 0` trains on `CheetahRun` itself.

Each run gets `max_train_seconds = --budget` (compile and evaluation excluded, as in
`pql_wallclock.py`), the off-policy agent's schedule is extended so that the budget ends it, and
PPO keeps its preset's step budget and learning-rate schedule, cut into chunks so the budget can
stop it and it is evaluated about as often. 16 deterministic full 1000-step episodes per
evaluation. Writes a run dir per agent under `--runs` (default `runs/locomotion_cpu/`,
gitignored), the JSON `--out` (curves: wall time, env steps, eval return per evaluation) and a
PNG beside it (`<out stem>.png`: return vs env steps, log axis, and vs training seconds), and
prints a table for `benchmarks/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time

import _common
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import configs, envs
from jaxrl.engine import wrappers
from jaxrl.engine.contract import lookup
from jaxrl.envs.adapters import PlaygroundEnv
from jaxrl.run import plotting, runner
from jaxrl.run.assemble import build

ENV = "CheetahRun"
POOL_ENV = "CheetahRunPool"
AGENTS = {"pql": "pql-cheetah-cpu", "ppo": "ppo-dmc-cpu"}
OFF_POLICY_CHUNKS = 1000  # chunks of the preset's size; the time budget ends the run first
PPO_CHUNK_ITERATIONS = 16  # PPO iterations per chunk (preset: 62): the budget stops it, ~25 s


# ----- the reset pool ----------------------------------------------------------------------
class ResetPoolEnv(PlaygroundEnv):
    """Playground `CheetahRun` whose `reset` takes one of `size` true initial states.

    The states come from the env's own `reset` with `size` keys split from `PRNGKey(seed)`;
    `reset(key)` picks one uniformly with `key` and rebuilds its MJX data from `qpos`, `qvel`
    and `qacc_warmstart` (then `mjx.forward`, as Playground's reset ends), with the observation,
    reward, metrics and info of Playground's `reset`.
    """

    def __init__(self, size: int, seed: int = 12345, batch: int = 1024):
        base = envs.make(ENV)
        super().__init__(POOL_ENV, base.env, base.episode_length)
        reset = jax.jit(jax.vmap(self.env.reset))
        keys = jax.random.split(jax.random.PRNGKey(seed), size)
        parts = [jax.device_get(reset(keys[i:i + batch]).data) for i in range(0, size, batch)]
        self.pool = {k: np.concatenate([np.asarray(getattr(p, k)) for p in parts])
                     for k in ("qpos", "qvel", "qacc_warmstart")}
        self.size = int(size)

    def reset(self, key: jax.Array):
        from mujoco import mjx
        from mujoco_playground._src import mjx_env

        from jaxrl.engine.types import State

        penv = self.env
        rng, pick = jax.random.split(key)
        i = jax.random.randint(pick, (), 0, self.size)
        start = {k: jnp.asarray(v)[i] for k, v in self.pool.items()}
        data = mjx_env.make_data(penv.mj_model, qpos=start["qpos"], qvel=start["qvel"],
                                 impl=penv.mjx_model.impl.value,
                                 naconmax=penv._config.naconmax, njmax=penv._config.njmax)
        data = mjx.forward(penv.mjx_model, data.replace(qacc_warmstart=start["qacc_warmstart"]))
        info = {"rng": rng}
        zero = jnp.zeros((), jnp.float32)
        return State(data=data, obs=penv._get_obs(data, info), reward=zero, done=zero,
                     metrics={}, info=info)


_POOL_SIZE = {"size": 0}


def register_pool(size: int) -> None:
    """Registers the `pool` env family (`CheetahRunPool`, `size` starts), once per process."""
    if size <= 0 or POOL_ENV in envs.list_envs().get("pool", ()):
        _POOL_SIZE["size"] = size
        return
    _POOL_SIZE["size"] = size
    cache = {}

    def make_fn(name, *, impl=None, episode_length=None, **overrides):
        if impl not in (None, "jax") or overrides:
            raise ValueError(f"{POOL_ENV} takes no impl / overrides, got {impl}, {overrides}")
        if "env" not in cache:  # the pool is drawn once per process
            cache["env"] = ResetPoolEnv(_POOL_SIZE["size"])
        env = cache["env"]
        if episode_length:
            env.episode_length = int(episode_length)
        return env

    from jaxrl.envs import registry

    registry.register_family("pool", (POOL_ENV,), make_fn)


# ----- raw stepping ------------------------------------------------------------------------
def autoreset_step_ms(env, num_envs: int, num_steps: int, seed: int = 0) -> float:
    """Milliseconds per step of the training env `AutoReset(Vmap(Episode(env)))` (random
    actions, jitted scan of `num_steps`, two warm-up calls excluded)."""
    venv = wrappers.wrap_for_training(env, num_envs, env.episode_length)

    def body(carry, _):
        state, key = carry
        key, k = jax.random.split(key)
        a = jax.random.uniform(k, (num_envs, env.action_size), jnp.float32, -1.0, 1.0)
        return (venv.step(state, a), key), None

    run = jax.jit(lambda s, k: jax.lax.scan(body, (s, k), None, num_steps)[0])
    carry = (jax.jit(venv.reset)(jax.random.PRNGKey(seed)), jax.random.PRNGKey(seed + 1))
    for _ in range(2):
        carry = run(*carry)
    jax.block_until_ready(carry)
    t0 = time.perf_counter()
    carry = run(*carry)
    jax.block_until_ready(carry)
    return 1000.0 * (time.perf_counter() - t0) / num_steps


def measure_raw(pool_size: int, raw_envs: list[int], reset_envs: list[int]) -> dict:
    """Raw `jit(scan(vmap(step)))` SPS at `raw_envs`, the cost of a batched `reset`, and the
    per-step cost of the training env with Playground's reset and with the pool."""
    env = envs.make(ENV)
    out = {"impl": "jax", "raw": [], "reset": [], "autoreset": []}
    for n in raw_envs:
        keys = jax.random.split(jax.random.PRNGKey(0), n)
        state = jax.jit(jax.vmap(env.reset))(keys)
        r = _common.time_random_rollout(env.step, state, env.action_size, n, 50, 2, 0)
        out["raw"].append({"num_envs": n, "sps": r["sps"],
                           "ms_per_step": 1000 * r["seconds"] / 100})
        print(f"raw {n} envs: {r['sps']:,.0f} SPS", flush=True)
    pool = ResetPoolEnv(pool_size) if pool_size else None
    for n in reset_envs:
        reset = jax.jit(jax.vmap(env.reset))
        keys = jax.random.split(jax.random.PRNGKey(1), n)
        jax.block_until_ready(reset(keys))
        t0 = time.perf_counter()
        jax.block_until_ready(reset(keys))
        out["reset"].append({"num_envs": n, "ms": 1000 * (time.perf_counter() - t0)})
        for kind, e, steps in (("playground reset", env, 5), ("reset pool", pool, 50)):
            if e is None:
                continue
            ms = autoreset_step_ms(e, n, steps)
            out["autoreset"].append({"num_envs": n, "reset": kind, "ms_per_step": ms,
                                     "sps": n / ms * 1000})
            print(f"AutoReset {n} envs ({kind}): {ms:.1f} ms/step", flush=True)
    return out


# ----- training runs -----------------------------------------------------------------------
def train_config(agent: str, budget: float, eval_envs: int, ppo_steps: int):
    preset = configs.get(AGENTS[agent])
    train = dataclasses.replace(preset.train, max_train_seconds=budget, num_eval_envs=eval_envs,
                                checkpoint_every=10**6, eval_every=1)
    if agent == "ppo":  # its schedule (lr annealing) over `ppo_steps`, in short chunks
        per_chunk = PPO_CHUNK_ITERATIONS * train.env_steps_per_iteration
        chunks = -(-ppo_steps // per_chunk)
        return preset, dataclasses.replace(train, total_env_steps=chunks * per_chunk,
                                           num_chunks=chunks)
    per_chunk = train.real_total_env_steps // train.num_chunks  # no schedule: the budget stops it
    return preset, dataclasses.replace(train, num_chunks=OFF_POLICY_CHUNKS,
                                       total_env_steps=per_chunk * OFF_POLICY_CHUNKS)


def run_one(agent: str, env_name: str, budget: float, runs: str, eval_envs: int,
            ppo_steps: int, final_eval_envs: int) -> dict:
    preset, train = train_config(agent, budget, eval_envs, ppo_steps)
    run_dir = os.path.join(runs, f"{agent}-{env_name}")
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    agent_cfg = lookup(preset.agent)[1](**dict(preset.agent_overrides))
    t0 = time.time()
    load0 = os.getloadavg()
    res = runner.train(agent, env_name, train, agent_cfg, run_dir=run_dir, progress=False,
                       resolved={"preset": preset.name, "reset_pool": _POOL_SIZE["size"]})
    load1 = os.getloadavg()
    curve = [(r["wall_time"], r["env_steps"], r["eval/episode_return"]) for r in res.records]
    best = max(curve, key=lambda e: e[2])
    # The final policy on the unmodified task: fresh starts from Playground's reset.
    agent_obj, true_env, spec = build(agent, ENV, train, agent_cfg)
    evaluator = runner.make_evaluator(agent_obj, true_env, spec,
                                      dataclasses.replace(train, num_eval_envs=final_eval_envs))
    ev = jax.device_get(evaluator(res.runner.agent_state, jax.random.PRNGKey(777)))
    final_true = runner.summarize_eval(ev)
    return {"agent": agent, "preset": preset.name, "env": env_name, "run_dir": run_dir,
            "budget_s": budget,
            "reset_pool": _POOL_SIZE["size"] if env_name == POOL_ENV else 0,
            "train": dataclasses.asdict(train), "agent_overrides": dict(preset.agent_overrides),
            "compile_s": res.compile_seconds, "train_s": res.train_seconds,
            "env_steps": res.env_steps, "final_return": curve[-1][2], "best_return": best[2],
            "best_at_s": best[0], "best_at_steps": best[1],
            "first_300": next(([s, n] for s, n, ret in curve if ret >= 300.0), None),
            "final_on_cheetahrun": final_true,
            "curve_columns": ["wall_time_s", "env_steps", "eval_return"], "curve": curve,
            "schedule_done": len(res.records) == train.num_chunks,
            "sps": res.env_steps / max(res.train_seconds, 1e-9),
            "loadavg_start_end": [round(x, 2) for x in load0 + load1],
            "layout": res.records[-1]["layout"], "total_s": time.time() - t0}


# ----- report ------------------------------------------------------------------------------
def table(results: list[dict], default_budget: float) -> list[str]:
    lines = ["| agent (preset) | training env | best eval return (at s / env steps) | "
             "final eval return | final on CheetahRun (mean +- std, n) | "
             "first >= 300 (s / env steps) | "
             "return at 1/3 / 2/3 of the budget | budget s | env steps | "
             "training s | SPS | compile |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        budget = r.get("budget_s", default_budget)
        f = r["final_on_cheetahrun"]
        hit = r["first_300"]
        done = " (schedule done)" if r["schedule_done"] else ""
        lines.append(
            f"| `{r['agent']}` (`{r['preset']}`) | {r['env']} | {r['best_return']:.1f} "
            f"({r['best_at_s']:.0f} s / {r['best_at_steps']:,}) | {r['final_return']:.1f}{done} | "
            f"{f['return_mean']:.1f} +- {f['return_std']:.1f} ({f['num_episodes']:.0f}) | "
            f"{f'{hit[0]:.0f} s / {hit[1]:,}' if hit else 'not reached'} | "
            f"{_at(r['curve'], budget / 3)} / {_at(r['curve'], 2 * budget / 3)} | {budget:g} | "
            f"{r['env_steps']:,} | {r['train_s']:.0f} | {r['sps']:,.0f} | {r['compile_s']:.0f} s |")
    return lines


def _at(curve, seconds: float) -> str:
    before = [ret for s, _, ret in curve if s <= seconds]
    return f"{before[-1]:.1f}" if before else "-"


def raw_lines(raw: dict) -> list[str]:
    out = [f"- raw `jit(scan(vmap(step)))`, {ENV}, impl jax: " + ", ".join(
        f"{r['num_envs']} envs {r['sps']:,.0f} SPS ({r['ms_per_step']:.1f} ms/step)"
        for r in raw["raw"])]
    out += [f"- batched `reset` ({r['num_envs']} envs): {r['ms']:.0f} ms" for r in raw["reset"]]
    out += [f"- training env step (`AutoReset`, {r['num_envs']} envs, {r['reset']}): "
            f"{r['ms_per_step']:.1f} ms/step, {r['sps']:,.0f} SPS" for r in raw["autoreset"]]
    return out


def report(res: dict, out: str) -> None:
    """PNG beside `out` and the table, from `res` and its run dirs."""
    png = os.path.splitext(out)[0] + ".png"
    runs = res["runs"]
    if runs and all(os.path.exists(os.path.join(r["run_dir"], "metrics.jsonl")) for r in runs):
        fig = plotting.make_figure([r["run_dir"] for r in runs], labels=[
            f"{r['agent']} ({r['preset']}) on {r['env']}" for r in runs])
        for ax in fig.axes:
            ax.axhline(300.0, color="gray", linestyle="--", linewidth=1)
            ax.set_ylim(bottom=0)
        fig.axes[0].set_xscale("log")  # PPO takes many more env steps than the off-policy agent
        fig.axes[0].set_ylabel("eval return (16 episodes, deterministic)")
        fig.axes[0].get_legend().remove()  # the lower right of the time panel stays empty
        fig.axes[1].legend(loc="lower right", fontsize="small")
        budgets = "/".join(f"{b:g}" for b in dict.fromkeys(r.get("budget_s", res["budget_s"])
                                                           for r in runs))
        fig.suptitle(f"{ENV} (MJX impl=jax), {budgets} s training budget per run, "
                     f"{res['machine']['cpu_count']} CPU cores; dashed: 300")
        fig.savefig(png, dpi=120)
        res["png"] = png
    else:
        print(f"(run dirs are not on this machine: {png} left as it is)")
    _common.write_json(out, res)
    lines = _common.machine_lines(res)
    if res.get("raw"):
        lines += raw_lines(res["raw"])
    print("\n".join(lines + table(runs, res["budget_s"])))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=1800.0, help="training seconds per run")
    p.add_argument("--agents", nargs="+", default=list(AGENTS), choices=list(AGENTS))
    p.add_argument("--reset-pool", type=int, default=4096,
                   help="initial states in the training env's pool; 0 trains on CheetahRun")
    p.add_argument("--ppo-steps", type=int, default=9_000_000,
                   help="PPO's env-step schedule (learning rate annealed over it)")
    p.add_argument("--eval-envs", type=int, default=16)
    p.add_argument("--final-eval-envs", type=int, default=32,
                   help="episodes of the final evaluation on CheetahRun itself")
    p.add_argument("--runs", default=os.path.join(_common.REPO, "runs", "locomotion_cpu"))
    p.add_argument("--out", default=os.path.join(_common.REPO, "benchmarks",
                                                 "locomotion_cpu.json"))
    p.add_argument("--raw", action="store_true",
                   help="only measure stepping costs (into the JSON's `raw`, runs kept)")
    p.add_argument("--raw-envs", type=int, nargs="+", default=[32, 128, 512])
    p.add_argument("--reset-envs", type=int, nargs="+", default=[32])
    p.add_argument("--keep", action="store_true", help="keep the other agents' runs in --out")
    p.add_argument("--replot", action="store_true",
                   help="no training: redraw the PNG and the table from --out and its run dirs")
    args = p.parse_args(argv)
    old = {}
    if args.out and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
    if args.replot:
        report(old, args.out)
        return
    command = " ".join(["benchmarks/" + os.path.basename(sys.argv[0])] + (argv or sys.argv[1:]))
    if args.raw:
        res = dict(old) if old else {"budget_s": args.budget, "runs": []}
        res.setdefault("machine", _common.machine_info())
        res.setdefault("versions", _common.versions())
        res["raw"] = dict(measure_raw(args.reset_pool, args.raw_envs, args.reset_envs),
                          command=command, machine=_common.machine_info())
        report(res, args.out)
        return
    train_env = POOL_ENV if args.reset_pool else ENV
    res = {"commands": [command], "layout": "single (one CPU device)", "budget_s": args.budget,
           "env": ENV, "machine": _common.machine_info(), "versions": _common.versions(),
           "runs": []}
    if old.get("raw"):
        res["raw"] = old["raw"]
    if args.keep and old:  # other (agent, train env) runs stay; machine info of both kept
        res["runs"] = [r for r in old.get("runs", [])
                       if (r["agent"], r["env"]) not in {(a, train_env) for a in args.agents}]
        res["commands"] = old.get("commands", []) + [command]
        res["earlier"] = old.get("earlier", []) + [{k: old.get(k) for k in ("machine",
                                                                            "versions")}]
    register_pool(args.reset_pool)
    for agent in args.agents:
        print(f"== {agent} on {train_env} ({args.budget:g} s budget)", flush=True)
        res["runs"].append(run_one(agent, train_env, args.budget, args.runs,
                                   args.eval_envs, args.ppo_steps, args.final_eval_envs))
        res["runs"][-1]["loadavg_after"] = _common.machine_info()["loadavg_1_5_15"]
        _common.write_json(args.out, res)
    report(res, args.out)


if __name__ == "__main__":
    main()
