"""Evaluation of a run: the jitted policy evaluator, a loaded run's evaluation,
and the pooled summary `jaxrl eval` prints."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from jaxrl.engine import loop, parallel, randomization, rollout, wrappers
from jaxrl.engine.contract import Agent
from jaxrl.run import checkpoint
from jaxrl.run.assemble import key_like


def make_evaluator(agent: Agent, env, cfg: loop.TrainConfig | None = None,
                   randomize: bool | None = None, mesh=None, member_keys: bool = False):
    """jitted `(agent_state [S], key) -> eval metrics [S]`; the policy's mode, or sampled
    actions with `cfg.deterministic_eval` False.

    `cfg`: the run's (`agent.train`, the default) or one with other eval settings
    (`num_eval_envs`, `eval_randomization`).
    `randomize`: evaluate with `cfg.domain_randomization` (a fresh model per episode); None
    follows `cfg.eval_randomization`; False (or no randomization in `cfg`) uses the nominal model.
    `mesh`: a data-parallel run's mesh; the metrics then come back replicated on it.
    `member_keys`: the key is `[S]` too, one per member (a sweep evaluates each member as its
    own run would), instead of one key shared by all seeds.
    """
    cfg = cfg or agent.train
    length = cfg.episode_length or agent.spec.episode_length
    randomize = cfg.eval_randomization if randomize is None else randomize
    choice = cfg.domain_randomization if randomize else None
    env = randomization.maybe_randomize(env, choice)
    eval_env = wrappers.wrap_for_eval(env, cfg.num_eval_envs, length, cfg.action_repeat)

    def one(state, key):
        policy = lambda obs, k: agent.act(state, obs, k, cfg.deterministic_eval)  # noqa: E731
        return rollout.evaluate(eval_env, policy, key, length)

    out = parallel.replicated(mesh) if mesh is not None and cfg.num_devices > 1 else None
    return jax.jit(parallel.member_map(one, in_axes=(0, 0 if member_keys else None)),
                   out_shardings=out)


def evaluate_run(
    loaded: checkpoint.LoadedRun, num_episodes: int, seed_index: int | None = None, seed: int = 0,
    randomize: bool | None = None, deterministic: bool | None = None,
) -> dict[str, np.ndarray]:
    """Policy evaluation of a loaded run (`checkpoint.load_run`).

    Args:
        loaded: the run.
        num_episodes: episodes per seed (one per parallel eval env).
        seed_index: evaluate only this seed; None evaluates all S seeds.
        seed: PRNG seed of the evaluation (initial states, env noise).
        randomize: with or without the run's domain randomization (`make_evaluator`).
        deterministic: the policy's mode (True) or sampled actions (False); None follows the
            run's `deterministic_eval` (True unless set).

    Returns:
        `rollout.evaluate`'s metrics (`eval/episode_return`, `eval/episode_return_std`,
        `eval/episode_length`, `eval/num_episodes`, `eval/<env metric>`) as float32 numpy
        arrays `[S]`, or `[1]` with `seed_index`.
    """
    cfg = dataclasses.replace(loaded.cfg, num_eval_envs=num_episodes)
    if deterministic is not None:
        cfg = dataclasses.replace(cfg, deterministic_eval=deterministic)
    evaluator = make_evaluator(loaded.agent, loaded.env, cfg, randomize)
    state = loaded.runner.agent_state
    if seed_index is not None:
        state = jax.tree.map(lambda x: x[seed_index : seed_index + 1], state)
    return jax.device_get(evaluator(state, key_like(loaded.runner.key, seed)))


def summarize_eval(ev: dict, row: int | None = None) -> dict[str, float]:
    """Pools per-seed eval metrics `[S]` (or row `row` only) over all completed episodes.

    Returns:
        `return_mean`, `return_std` (over episodes, pooled across seeds), `length_mean`,
        `num_episodes`, and `success_rate` when the env reports a `success` metric (for goal
        envs the fraction of episodes with any success step), `steps_near_goal` for goal envs.
    """
    sel = slice(None) if row is None else slice(row, row + 1)
    n = np.asarray(ev["eval/num_episodes"], np.float64)[sel]
    total = max(float(n.sum()), 1.0)
    mean = np.asarray(ev["eval/episode_return"], np.float64)[sel]
    std = np.asarray(ev["eval/episode_return_std"], np.float64)[sel]
    pooled = float((n * mean).sum() / total)
    var = float((n * (np.square(std) + np.square(mean - pooled))).sum() / total)
    out = {
        "return_mean": pooled,
        "return_std": var**0.5,
        "num_episodes": float(n.sum()),
        "length_mean": float((n * np.asarray(ev["eval/episode_length"])[sel]).sum() / total),
    }
    # Goal envs: the success rate counts episodes with any success step (JaxGCRL's
    # `episode_success_any`); other envs report `success` at the episode's end.
    key = "eval/episode_success_any" if "eval/episode_success_any" in ev else "eval/success"
    if key in ev:
        out["success_rate"] = float((n * np.asarray(ev[key])[sel]).sum() / total)
    if "eval/episode_success" in ev:
        out["steps_near_goal"] = float((n * np.asarray(ev["eval/episode_success"])[sel]).sum()
                                       / total)
    return out
