"""The one training loop: `make_train(agent, env) -> (init, chunk)` (the agent holds the env's
spec and the run's `TrainConfig`).

`chunk` is a `lax.scan` over iterations of "collect `unrolls_per_update` unrolls of
`unroll_length` steps in `num_envs` envs, then `agent.update`". The host driver (`runner.py`) calls
`chunk` repeatedly; the fused mode (`train_fused`) scans chunks inside one `jit` and vmaps over
seeds and hyperparameters. Same code in both modes.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.engine import layouts, parallel, randomization, wrappers
from jaxrl.engine import rollout as rollout_lib
from jaxrl.engine.contract import Agent
from jaxrl.engine.types import State, Transition


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The program's settings: anything that changes shapes or program structure (host-side
    settings of a run, which the compiled program never sees, are `RunConfig`'s)."""

    num_envs: int = 256
    """Parallel envs N (vmapped)."""
    unroll_length: int = 32
    """Env steps T per unroll."""
    unrolls_per_update: int = 1
    """Consecutive unrolls collected before one `agent.update` (Brax PPO's
    `batch_size * num_minibatches / num_envs`); the update sees `[T, unrolls * N]`."""
    total_env_steps: int = 1_000_000
    """Env-step budget; rounded up to whole chunks (the real count is reported). With
    `--resume RUN`, a larger value trains a finished or stopped run on, in chunks of its saved
    size; learning-rate schedules stretch over the new budget from the update reached (PPO's
    annealed rate restarts at `lr * (1 - done / new total)`)."""
    num_chunks: int = 10
    """Host round trips: progress, logs and evaluation happen between chunks."""
    num_eval_envs: int = 128
    """Envs (one episode each) per evaluation; 0 disables evaluation."""
    deterministic_eval: bool = True
    """Evaluate the policy's mode (`act(..., deterministic=True)`, e.g. `tanh(mu)`); False
    samples actions from the policy as training does (Brax's `deterministic_eval`, False
    there). A policy trained with much noise can do better sampled than its mode."""
    episode_length: int | None = None
    """Time limit in env steps; None keeps the env's default (1000 for DM Control)."""
    action_repeat: int = 1
    """Env steps per policy step."""
    num_seeds: int = 1
    """Independent seeds trained together (vmapped, one compile)."""
    num_devices: int = 1
    """Devices one run is split over (data parallel, `jaxrl.engine.parallel`): each device
    steps `num_envs / num_devices` envs and holds that share of an off-policy agent's replay
    buffer; gradients and normalizer statistics still cover the whole batch. Must divide
    `num_envs`. Counts the devices of every process after `jax.distributed.initialize`. An
    agent with its own layout over devices (PQL's `data` or `role`) runs it on these."""
    max_resets: int | None = None
    """Most done envs reset in a batch of their own on one step (M): a step with no done env
    computes no reset, one with at most M done envs resets just those, one with more resets all
    `num_envs` (`engine.wrappers.reset_done`); every done env gets a fresh start either way, so
    M changes speed, never results. Raise it for envs where many episodes end at random steps;
    None: `max(1, num_envs // 16)`."""
    fixed_starts: bool = False
    """Every episode of an env slot starts from that slot's first state (its start and, in
    goal envs, its goal), as under Brax's cached auto-reset, which JaxGCRL and Brax's trainers
    train with; False (the default) draws a fresh start for every episode. For reproducing
    such peers' settings (`engine.wrappers.AutoReset`)."""
    env_impl: str | None = None
    """MJX implementation for Playground envs (`jax` or `warp`); None: `jax` on CPU, and on a GPU
    `warp` when warp-lang is installed, else `jax` (`jaxrl.envs.registry.default_impl`)."""
    domain_randomization: str | None = None
    """Domain randomization of the simulator model, re-drawn for an env at every reset:
    `playground` uses the env's randomizer from MuJoCo Playground's registry (Go1, G1, T1,
    Berkeley Humanoid, LEAP and Aero hand tasks); `module:function` imports a function with
    Playground's signature `fn(mjx_model, rng [B, 2]) -> (model, in_axes)`; None: off."""
    eval_randomization: bool = True
    """With `domain_randomization` set, evaluate on randomized models too; False evaluates on
    the nominal model."""

    @property
    def env_steps_per_iteration(self) -> int:
        return self.num_envs * self.unroll_length * self.unrolls_per_update * self.action_repeat

    @property
    def iterations_per_chunk(self) -> int:
        per_chunk = self.num_chunks * self.env_steps_per_iteration
        return max(1, math.ceil(self.total_env_steps / per_chunk))

    @property
    def real_total_env_steps(self) -> int:
        return self.num_chunks * self.iterations_per_chunk * self.env_steps_per_iteration

    def validate(self) -> None:
        """Raises ValueError naming the field to change."""
        for name in ("num_envs", "unroll_length", "unrolls_per_update", "total_env_steps",
                     "num_chunks", "action_repeat", "num_seeds", "num_devices"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")
        if self.num_eval_envs < 0:
            raise ValueError(f"num_eval_envs must be >= 0, got {self.num_eval_envs}.")
        if self.max_resets is not None and self.max_resets <= 0:
            raise ValueError(f"max_resets must be positive, got {self.max_resets}.")
        if self.episode_length is not None and self.episode_length <= 0:
            raise ValueError(f"episode_length must be positive, got {self.episode_length}.")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The host's settings of a run: seeds' numbering, evaluation cadence, checkpoints, logs,
    time budget and watchdog. The compiled program never reads them, so they are not part of
    the stored-program key: two runs that differ only here share their compiled programs.
    (Defined beside `TrainConfig` so presets can hold both; only `jaxrl.run` reads it.)"""

    seed: int = 0
    """First seed; seeds `seed .. seed + num_seeds - 1` run vmapped in one program."""
    eval_every: int = 1
    """Evaluate every this many chunks (and always after the last)."""
    checkpoint_every: int = 1
    """Save the whole run state every this many chunks (and always after the last), to
    `<run_dir>/checkpoints/<chunk>`; `jaxrl train --resume RUN_DIR` continues from the latest."""
    keep_checkpoints: int = 3
    """Checkpoints kept on disk (older ones are deleted)."""
    max_train_seconds: float | None = None
    """Wall-clock budget: stop after the first chunk at which the training time (compile and
    evaluation excluded) reaches this many seconds, as PQL's `max_time`; that chunk is evaluated
    and saved like the last one. None runs every chunk. May change on `--resume` (it counts the
    whole run's training time)."""
    checkpoint_replay: bool = True
    """Include an off-policy agent's replay buffer in checkpoints. False keeps them small, but
    the buffer restarts empty on resume, so a resumed run is no longer bit-identical."""
    logger: str | None = None
    """Metrics sink beside `metrics.jsonl` and TensorBoard: `wandb` (Weights & Biases, extra
    `jaxrl[wandb]`; offline files in the run dir when no account is set up; sweep members are
    grouped by sweep). None: only the two."""
    watchdog_seconds: float | None = 3600.0
    """A run in which no chunk (nor the compile before the first) finishes within this many
    seconds is stuck: the stacks of all threads go to `<run_dir>/stuck-<time>.txt` and the
    process exits with status 3, naming the file (`jaxrl.run.watchdog`). None: no watchdog."""

    def validate(self) -> None:
        """Raises ValueError naming the field to change."""
        for name in ("eval_every", "checkpoint_every", "keep_checkpoints"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")
        if self.logger not in (None, "wandb"):
            raise ValueError(f"logger must be None or 'wandb', got {self.logger!r}.")
        for name in ("max_train_seconds", "watchdog_seconds"):
            budget = getattr(self, name)
            if budget is not None and not (math.isfinite(budget) and budget > 0):
                raise ValueError(f"{name} must be positive and finite, got {budget}.")


RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunConfig))
"""Names of the host settings (older config.json files keep them under `train`)."""


@struct.dataclass(kw_only=True)
class RunState:
    """Everything a run carries between chunks (one seed; vmapped for several)."""

    agent_state: object
    env_state: State
    key: jax.Array
    iteration: jax.Array
    explore: object = ()
    """Exploration state carried across env steps (agents that declare `explores`)."""


def make_env(base_env, cfg: TrainConfig):
    """Training env `AutoReset(Vmap(Episode(DomainRandomization(base_env))))`; without
    `cfg.domain_randomization`, `AutoReset(Vmap(Episode(base_env)))`.

    Raises:
        ValueError: the domain randomization asked for cannot be applied
            (`randomization.resolve`, `randomization.randomized_fields`).
    """
    length = cfg.episode_length or base_env.episode_length
    env = randomization.maybe_randomize(base_env, cfg.domain_randomization)
    return wrappers.wrap_for_training(env, cfg.num_envs, length, cfg.action_repeat,
                                      cfg.max_resets, cfg.fixed_starts)


def make_train(agent: Agent, base_env, emulate_devices: bool = False):
    """Returns `init(key, hp) -> RunState` and `chunk(RunState) -> (RunState, metrics)` (pure)
    of `agent` (which holds the env's spec and the run's `TrainConfig`, `agent.train`) on
    `base_env`.

    The chunk runs on the devices of `agent.layout` (`engine.layouts`); with `emulate_devices`
    a `data` layout's per-shard program runs on one device instead (vmapped shards).
    """
    cfg = agent.train
    env = make_env(base_env, cfg)

    def init(key, hp):
        key_agent, key_env, key_run = jax.random.split(key, 3)
        agent_state = agent.init(key_agent, hp)
        explore = (agent.init_explore(jax.random.fold_in(key_agent, 1), cfg.num_envs)
                   if agent.explores else ())
        return RunState(agent_state=agent_state, env_state=env.reset(key_env), key=key_run,
                        iteration=jnp.zeros((), jnp.int32), explore=explore)

    def collect(runner: RunState, key_roll):
        """`unrolls_per_update` unrolls with the behaviour policy: (env state, carry, traj)."""

        def policy(obs, k, carry, done):
            if agent.explores:
                return agent.explore(runner.agent_state, obs, k, carry, done)
            return (*agent.act(runner.agent_state, obs, k, False), carry)

        def one_unroll(c, k):
            return rollout_lib.rollout_carry(env, policy, c[0], c[1], k, cfg.unroll_length)

        keys = jax.random.split(key_roll, cfg.unrolls_per_update)
        (env_state, explore), traj = jax.lax.scan(
            one_unroll, (runner.env_state, runner.explore), keys)
        return env_state, explore, _merge_unrolls(traj)

    kind, _ = agent.layout
    axis = parallel.DATA_AXIS if kind == "data" else None

    def iteration(runner: RunState, _):
        key, key_roll, key_update = jax.random.split(runner.key, 3)
        env_state, explore, traj = collect(runner, key_roll)
        agent_state, metrics = agent.update(runner.agent_state, traj, key_update)
        metrics = dict(metrics, **_episode_sums(traj, axis))
        runner = RunState(agent_state=agent_state, env_state=env_state, key=key,
                          iteration=runner.iteration + 1, explore=explore)
        return runner, metrics

    if kind == "role":
        iteration = layouts.role_iteration(agent, collect, _episode_sums)

    def chunk(runner: RunState):
        runner, metrics = jax.lax.scan(iteration, runner, None, cfg.iterations_per_chunk)
        return runner, _summarize(metrics)

    return init, layouts.distribute(agent, chunk, cfg.num_envs, emulate_devices)


def _merge_unrolls(traj: Transition) -> Transition:
    """`[U, T, N, ...]` -> `[T, U * N, ...]` (unroll u of env n becomes column u * N + n)."""

    def merge(x):
        x = jnp.swapaxes(x, 0, 1)
        return x.reshape((x.shape[0], x.shape[1] * x.shape[2]) + x.shape[3:])

    return jax.tree.map(merge, traj)


def _episode_sums(traj: Transition, axis_name: str | None = None) -> dict:
    """Totals over the episodes that ended in `traj`: `episode/count`, and `episode/<x>_sum`
    for the return, the length and each env metric's per-episode sum (`rollout` extras
    `final_episode_metrics/<name>`), summed over those episodes (and over the shards of
    `axis_name` when the envs are sharded)."""
    done = traj.extras["done"]
    out = {"episode/count": done.sum(),
           "episode/return_sum": (traj.extras["final_episode_return"] * done).sum(),
           "episode/length_sum": (traj.extras["final_episode_length"] * done).sum()}
    prefix = "final_episode_metrics/"
    for k, v in traj.extras.items():
        if k.startswith(prefix):
            out[f"episode/{k[len(prefix):]}_sum"] = (v * done).sum()
    return jax.lax.psum(out, axis_name) if axis_name else out


def _summarize(metrics: dict) -> dict:
    """Per-iteration metrics `[I]` -> chunk scalars.

    `episode/count` is the number of episodes completed in the chunk; each `episode/<x>_sum`
    becomes `episode/<x>`, the mean over those episodes (NaN when none completed). `buffer/`
    metrics count a growing quantity (replay transitions stored), so they keep the value after
    the chunk's last iteration; every other metric is the mean over the chunk's iterations.
    """
    count = metrics["episode/count"].sum()
    out = {"episode/count": count}
    for k, v in metrics.items():
        if k.startswith("episode/") and k.endswith("_sum"):
            # NaN, not 0, when no episode finished in this chunk.
            out[k[: -len("_sum")]] = jnp.where(count > 0, v.sum() / jnp.maximum(count, 1.0),
                                               jnp.nan)
        elif k.startswith("buffer/") or k.endswith("_updates"):  # running totals
            out[k] = v[-1]
        elif not k.startswith("episode/"):
            out[k] = v.mean()
    return out


def train_fused(agent: Agent, base_env, keys: jax.Array, hps: dict):
    """All chunks of all seeds/hp members in one `jit(vmap(...))` call (sweeps and tests), for
    `agent.train`'s `num_chunks`.

    Args:
        keys: PRNG keys, one per member: typed `[S]` (`jax.random.key`) or raw `[S, 2]`.
        hps: dict of `[S]` float32 arrays (one value per member).

    Returns:
        (final RunState with leading axis S, metrics dict of `[S, num_chunks]`).
    """
    init, chunk = make_train(agent, base_env)

    def train_one(key, hp):
        runner = init(key, hp)
        return jax.lax.scan(lambda r, _: chunk(r), runner, None, agent.train.num_chunks)

    return jax.jit(parallel.member_map(train_one))(keys, hps)
