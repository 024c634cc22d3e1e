"""Off-policy plumbing an agent holds (composition): replay in the state, warm-up, UTD loop.

Every off-policy agent (the SAC family, CRL, PQL) keeps a device-resident replay buffer inside
its state, in a field named `buffer` (`AgentBase` reads and replaces it there for agents that
declare `has_replay`), so one `jit(vmap(...))` program holds one buffer per seed. The agent
holds an `OffPolicyLoop` (its config, spec and train config) and calls its `update`:

1. `observe(state, traj)` writes the chunk `Transition[T, N]` to the buffer (agents pass their
   own when they also update running statistics there);
2. once the buffer holds `learning_starts` transitions (`lax.cond`; the skipped branch returns
   zero metrics of the same structure), `updates_per_call = utd_ratio * T` gradient steps run
   as one `lax.scan` of the agent's `gradient_step` over its `step_inputs` (pre-sampled
   batches and/or keys), and `reduce_step_metrics` averages their metrics;
3. `buffer/transitions` reports how many transitions the buffer holds.

`utd_ratio` counts gradient steps per vectorized env step, as FastTD3's `num_updates`
(Seo et al., arXiv 2505.22642, `younggyoseo/FastTD3` `fast_td3/train.py`).

The agent's config is a `ReplayConfig` (`batch_size`, `buffer_size`, `learning_starts`) with a
`utd_ratio` (a field, or PQL's property derived from its role ratio).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from jaxrl.engine.types import EnvSpec, Metrics, Transition
from jaxrl.learning import optim, replay


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    """The replay settings every off-policy agent shares (the SAC family, CRL and PQL configs
    subclass it; an agent may override the defaults)."""

    batch_size: int = 256
    """Samples per gradient step (B): transitions, or CRL's (s, a, future goal) pairs."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions, all envs together (`buffer_size // num_envs` per env)."""
    learning_starts: int = 10_000
    """Transitions collected (random actions; CRL: its initial actor) before learning starts."""


@dataclasses.dataclass(frozen=True)
class OffPolicyLoop:
    """The replay schedule of an agent (see the module docstring).

    Attributes:
        config, spec, train: the agent's.
        replay_extras: keys of `Transition.extras` stored in the buffer (CRL: `traj_id`).
    """

    config: Any
    spec: EnvSpec
    train: Any
    replay_extras: tuple[str, ...] = ()

    # ----- sizes and checks --------------------------------------------------------------
    @property
    def updates_per_call(self) -> int:
        """Gradient steps per `update`: `utd_ratio * unroll_length * unrolls_per_update`."""
        return replay.updates_per_call(self.config.utd_ratio, self.train)

    @property
    def capacity_per_env(self) -> int:
        """Replay rows per env: `buffer_size // num_envs`."""
        return replay.capacity_per_env(self.config.buffer_size, self.train.num_envs)

    def validate(self) -> None:
        """Raises ValueError for a replay schedule that cannot work (`replay.check_schedule`)."""
        c = self.config
        if not c.utd_ratio > 0:
            raise ValueError(f"utd_ratio must be > 0, got {c.utd_ratio}.")
        replay.check_schedule(utd_ratio=c.utd_ratio, batch_size=c.batch_size,
                              buffer_size=c.buffer_size, learning_starts=c.learning_starts,
                              train=self.train)

    # ----- the buffer --------------------------------------------------------------------
    def replay_record(self, traj: Transition) -> Transition:
        """The part of a rollout the buffer stores: the Transition fields and `replay_extras`."""
        return Transition(obs=traj.obs, action=traj.action, reward=traj.reward,
                          terminated=traj.terminated, truncated=traj.truncated,
                          next_obs=traj.next_obs,
                          extras={k: traj.extras[k] for k in self.replay_extras})

    def empty_replay(self, obs_dtype=jnp.float32) -> replay.ReplayState:
        """An empty buffer for this env and `num_envs` (`capacity_per_env` rows per env)."""
        n, spec = self.train.num_envs, self.spec
        obs = (jax.ShapeDtypeStruct((n,) + tuple(spec.obs_shape), jnp.float32)
               if not spec.obs_is_dict else
               {k: jax.ShapeDtypeStruct((n,) + tuple(v), jnp.float32)
                for k, v in spec.obs_shape.items()})
        flag = jax.ShapeDtypeStruct((n,), jnp.float32)
        extras = {"traj_id": jax.ShapeDtypeStruct((n,), jnp.int32)}
        example = Transition(obs=obs, action=jax.ShapeDtypeStruct((n, spec.action_size),
                                                                  jnp.float32),
                             reward=flag, terminated=flag, truncated=flag, next_obs=obs,
                             extras={k: extras[k] for k in self.replay_extras})
        return replay.init(example, self.capacity_per_env, obs_dtype, extras=self.replay_extras)

    LR_SCHEDULES = ("constant", "cosine")
    """The step-size schedules `scheduled_rate` knows."""

    def scheduled_rate(self, rate, num_updates, schedule: str, final_fraction: float):
        """`rate` (`schedule="constant"`), or its cosine decay to `final_fraction` of it over
        the run's gradient steps (`optim.cosine_decay`; `num_updates`: gradient steps so far)."""
        if schedule == "constant":
            return rate
        total = max(1, self.train.num_chunks * self.train.iterations_per_chunk *
                    self.updates_per_call)
        frac = jnp.minimum(num_updates / total, 1.0)
        return rate * optim.cosine_decay(frac, final_fraction)

    def learning(self, state: Any) -> jax.Array:
        """bool `[]`: the buffer holds `learning_starts` transitions (gradient steps run)."""
        return replay.num_transitions(state.buffer) >= self.config.learning_starts

    def random_warmup(self, state: Any, key: jax.Array, action: jax.Array) -> jax.Array:
        """Uniform actions in [-1, 1] until `learning`, else `action` clipped to [-1, 1]
        (Brax SAC's random prefill)."""
        rand = jax.random.uniform(jax.random.fold_in(key, 7), action.shape, minval=-1.0,
                                  maxval=1.0)
        return jnp.where(self.learning(state), jnp.clip(action, -1.0, 1.0), rand)

    def observe(self, state: Any, traj: Transition) -> Any:
        """Writes the chunk to the replay buffer."""
        return state.replace(buffer=replay.add(state.buffer, self.replay_record(traj)))

    # ----- the update --------------------------------------------------------------------
    def update(self, state: Any, traj: Transition, key: jax.Array, *, step_inputs: Callable,
               gradient_step: Callable, observe: Callable | None = None,
               reduce_step_metrics: Callable | None = None) -> tuple[Any, Metrics]:
        """`observe`, then the UTD loop once learning started (see the module docstring).

        Args:
            step_inputs: `(state, key) -> inputs` with leading axis `updates_per_call`.
            gradient_step: `(state, inputs) -> (state, per-step metrics)`, the scan body.
            observe: `(state, traj) -> state` (default `OffPolicyLoop.observe`).
            reduce_step_metrics: per-step metrics `[G]` -> scalars (default: the mean).
        """
        reduce = reduce_step_metrics or (lambda m: jax.tree.map(jnp.mean, m))

        def train_steps(state, key):
            state, metrics = jax.lax.scan(gradient_step, state, step_inputs(state, key))
            return state, reduce(metrics)

        state = (observe or self.observe)(state, traj)
        state, metrics = gated(self.learning(state), train_steps, state, key, state)
        count = replay.num_transitions(state.buffer)
        metrics["buffer/transitions"] = count.astype(jnp.float32)
        return state, metrics


def ema(target: Any, online: Any, tau: jax.Array) -> Any:
    """Target-network EMA `target <- (1 - tau) target + tau online`."""
    return optim.soft_update(target, online, tau)


def zeros_obs(spec, lead: tuple[int, ...]) -> Any:
    """Zero observations `lead + obs_shape` (a dict for dict observations), float32."""
    if spec.obs_is_dict:
        return {k: jnp.zeros(lead + tuple(v), jnp.float32) for k, v in spec.obs_shape.items()}
    return jnp.zeros(lead + tuple(spec.obs_shape), jnp.float32)


def zeros_of(shapes: Any) -> Any:
    """Zero arrays for a tree of `jax.ShapeDtypeStruct` (e.g. from `jax.eval_shape`)."""
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def gated(learning: jax.Array, run, state: Any, key: jax.Array, unchanged: Any):
    """`run(state, key) -> (out, metrics)` when `learning`, else (`unchanged`, zero metrics):
    one `lax.cond`, so only the taken branch runs."""
    metrics_shape = jax.eval_shape(run, state, key)[1]
    return jax.lax.cond(learning, run, lambda s, k: (unchanged, zeros_of(metrics_shape)),
                        state, key)
