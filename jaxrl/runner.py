"""Host driver: build env and agent, validate, compile once, run chunks, log, evaluate, save.

Seeds run vmapped (`num_seeds` members, one compile). Compile time is measured apart from
training time; `perf/sps` is the real env steps of one chunk (all seeds) over its wall time,
evaluation excluded, as Brax's `training/sps`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import agent as agent_lib
from jaxrl import loop, parallel, rollout, wrappers
from jaxrl.logging import Logger


@dataclasses.dataclass
class RunResult:
    """What `train` returns: the final runner (leading seed axis), logs, timings."""

    runner: loop.Runner
    records: list[dict]
    compile_seconds: float
    train_seconds: float
    env_steps: int
    run_dir: str | None


def build(agent_name: str, env_name: str, cfg: loop.TrainConfig, agent_config):
    """Builds (agent, env, spec) and validates everything that can fail before compiling."""
    from jaxrl import envs

    cfg.validate()
    agent_cls, _ = agent_lib.lookup(agent_name)
    envs.registry.check_env_name(env_name)
    env = envs.make(env_name, impl=cfg.env_impl, episode_length=cfg.episode_length)
    spec = envs.make_spec(env, env_name)
    agent = agent_cls(config=agent_config, spec=spec, train=cfg)
    if hasattr(agent, "validate"):
        agent.validate(cfg, spec)
    return agent, env, spec


def seed_keys(cfg: loop.TrainConfig) -> jax.Array:
    """`[S, 2]` keys for seeds `seed .. seed + num_seeds - 1` (distinct, never shared)."""
    return jnp.stack([jax.random.PRNGKey(cfg.seed + i) for i in range(cfg.num_seeds)])


def stack_hp(hp: dict, n: int) -> dict:
    return {k: jnp.full((n,), v, jnp.float32) for k, v in hp.items()}


def make_evaluator(agent, env, spec, cfg: loop.TrainConfig):
    """jitted `(agent_state [S], key) -> eval metrics [S]`, deterministic policy."""
    length = cfg.episode_length or spec.episode_length
    eval_env = wrappers.wrap_for_eval(env, cfg.num_eval_envs, length, cfg.action_repeat)

    def one(state, key):
        policy = lambda obs, k: agent.act(state, obs, k, True)  # noqa: E731
        return rollout.evaluate(eval_env, policy, key, length)

    return jax.jit(jax.vmap(one, in_axes=(0, None)))


def train(agent_name: str, env_name: str, cfg: loop.TrainConfig, agent_config,
          run_dir: str | None = None, progress: bool = True, hp: dict | None = None,
          resolved: dict | None = None) -> RunResult:
    """Trains `num_seeds` seeds of one agent on one env; see the module docstring."""
    agent, env, spec = build(agent_name, env_name, cfg, agent_config)
    init, chunk = loop.make_train(agent, env, spec, cfg)
    hps = stack_hp(hp or agent.default_hp(), cfg.num_seeds)
    if run_dir:
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "config.json"), "w") as f:
            json.dump(resolved or {}, f, indent=2, default=str)
    logger = Logger(run_dir, cfg.real_total_env_steps * cfg.num_seeds, progress)
    try:
        t0 = time.time()
        logger.message("compiling (1-3 min for MJX envs on CPU) ...")
        mesh = parallel.seed_mesh(cfg.num_seeds)
        keys, hps = parallel.shard_members((seed_keys(cfg), hps), mesh)
        runner = parallel.shard_members(jax.jit(jax.vmap(init))(keys, hps), mesh)
        compiled = jax.jit(jax.vmap(chunk)).lower(runner).compile()
        evaluator = make_evaluator(agent, env, spec, cfg) if cfg.num_eval_envs else None
        compile_s = time.time() - t0
        logger.message(f"compiled in {compile_s:.1f} s; {cfg.real_total_env_steps:,} env steps "
                       f"per seed x {cfg.num_seeds} seed(s)")
        runner, records, train_s = _run_chunks(compiled, evaluator, runner, cfg, logger)
    finally:
        logger.close()
    steps = cfg.real_total_env_steps * cfg.num_seeds
    if run_dir:
        save_params(os.path.join(run_dir, "final_params"), runner.agent_state.params)
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump({"compile_seconds": compile_s, "train_seconds": train_s, "env_steps": steps,
                       "final": records[-1] if records else {}}, f, indent=2)
    return RunResult(runner, records, compile_s, train_s, steps, run_dir)


def _run_chunks(compiled, evaluator, runner, cfg, logger):
    records, train_s = [], 0.0
    steps_per_chunk = cfg.iterations_per_chunk * cfg.env_steps_per_iteration * cfg.num_seeds
    eval_key = jax.random.PRNGKey(cfg.seed + 10_000)
    for i in range(cfg.num_chunks):
        t = time.time()
        runner, metrics = compiled(runner)
        metrics = jax.device_get(metrics)
        dt = time.time() - t
        train_s += dt
        rec = {"chunk": i + 1, "env_steps": steps_per_chunk * (i + 1), "wall_time": train_s,
               "perf/sps": steps_per_chunk / dt}
        rec.update({k: float(np.mean(v)) for k, v in metrics.items()})
        last = i + 1 == cfg.num_chunks
        if evaluator is not None and ((i + 1) % cfg.eval_every == 0 or last):
            ev = jax.device_get(evaluator(runner.agent_state, jax.random.fold_in(eval_key, i)))
            rec.update({k: float(np.mean(v)) for k, v in ev.items()})
            rec["eval/episode_return_per_seed"] = [float(x) for x in ev["eval/episode_return"]]
        logger.log(rec)
        records.append(rec)
    return runner, records, train_s


def save_params(path: str, params) -> None:
    """Saves a params pytree with orbax (overwrites `path`)."""
    import orbax.checkpoint as ocp

    ckpt = ocp.StandardCheckpointer()
    ckpt.save(os.path.abspath(path), jax.device_get(params), force=True)
    ckpt.wait_until_finished()


def load_params(path: str):
    """Loads a params pytree saved by `save_params`."""
    import orbax.checkpoint as ocp

    return ocp.StandardCheckpointer().restore(os.path.abspath(path))
