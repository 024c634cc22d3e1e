"""Data records shared by the core, the agents and the envs (data only, no behaviour).

Conventions: time-major arrays `[T, N, ...]` (T unroll steps, N envs); float32 unless noted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
from flax import struct

PyTree = Any
Metrics = dict[str, jax.Array]


@struct.dataclass(kw_only=True)
class State:
    """Environment state, Playground's layout: `reset(key) -> State`, `step(State, a) -> State`.

    Attributes:
        data: simulator state (MJX `Data`, Brax pipeline state, or a toy env's arrays).
        obs: observation, array `[obs_dim]` or a dict of arrays (batched: `[N, ...]`).
        reward: float32 scalar (batched `[N]`).
        done: float32 scalar, 1.0 when the episode ended (terminated or truncated).
        metrics: env-defined float32 scalars (reward terms, `success`, ...).
        info: wrapper and env bookkeeping (`terminated`, `truncated`, `final_obs`, keys, ...).
    """

    data: Any
    obs: Any
    reward: jax.Array
    done: jax.Array
    metrics: dict = struct.field(default_factory=dict)
    info: dict = struct.field(default_factory=dict)


@struct.dataclass(kw_only=True)
class Transition:
    """One step of experience, time-major `[T, N, ...]` once stacked by `rollout`.

    Built with keywords only. `next_obs` is the true successor observation: at an episode end it is
    the final observation *before* auto-reset (often called `final_obs`), never the reset one.

    Attributes:
        obs: observation at t (array or dict of arrays).
        action: action sent to the env, normalized to [-1, 1], float32 `[..., action_size]`.
        reward: float32 reward r_t.
        terminated: float32, 1.0 when the MDP ended at t+1 (no bootstrap).
        truncated: float32, 1.0 when a time limit cut the episode (bootstrap from `next_obs`).
        next_obs: true successor observation (pre-reset on episode ends).
        extras: policy extras (`raw_action`, `log_prob`, ...) and env extras (`goal`, ...).
    """

    obs: Any
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    next_obs: Any
    extras: dict = struct.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Static description of an environment, read with `jax.eval_shape` (no compile).

    Goal-conditioned envs (`goal_indices` set; contract in `jaxrl.envs.goal`): the observation
    is `obs = concat(state, goal)`, a flat float32 `[obs_dim]`, with
    `state_dim = obs_dim - len(goal_indices)`; `obs[goal_indices]` compared with
    `obs[state_dim:]` is the goal condition. Their per-step metrics `success` (float32, 1.0
    exactly when `dist < threshold`) and `dist` (that distance) come with every step, the goal
    is redrawn at every reset, and rollouts carry `extras["traj_id"]` (int32 episode counter).

    Attributes:
        name: registered env name.
        obs_shape: shape of the observation, or a dict key -> shape for dict observations.
        action_size: number of action dimensions.
        action_low: lower action bounds in env units (tuple of floats, length `action_size`).
        action_high: upper action bounds in env units.
        episode_length: time limit in env steps (after action repeat).
        dt: control period in seconds, or None when the env does not define one.
        goal_indices: entries of the state the goal refers to (goal-conditioned envs), else None.
            The env's class attribute of the same name.
    """

    name: str
    obs_shape: Any
    action_size: int
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]
    episode_length: int
    dt: float | None = None
    goal_indices: tuple[int, ...] | None = None

    @property
    def obs_is_dict(self) -> bool:
        return isinstance(self.obs_shape, dict)

    @property
    def state_dim(self) -> int | None:
        """Length of the state part of a goal-conditioned observation, else None."""
        if self.goal_indices is None or self.obs_is_dict:
            return None
        return int(self.obs_shape[-1]) - len(self.goal_indices)
