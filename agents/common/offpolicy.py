"""The off-policy agent base: replay in the state, warm-up gating, the UTD loop, target EMA.

Every off-policy agent (the SAC family, CRL) keeps a device-resident replay buffer inside its
state, so one `jit(vmap(...))` program holds one buffer per seed. `OffPolicyAgent.update`:

1. `observe(state, traj)` writes the chunk `Transition[T, N]` to the buffer (subclasses also
   update running statistics there);
2. once the buffer holds `learning_starts` transitions (`lax.cond`; the skipped branch returns
   zero metrics of the same structure), `train_steps` runs `updates_per_call = utd_ratio * T`
   gradient steps as one `lax.scan` over `step_inputs` (pre-sampled batches and/or keys) with
   `gradient_step`, and `reduce_step_metrics` averages their metrics;
3. `buffer/transitions` reports how many transitions the buffer holds.

`utd_ratio` counts gradient steps per vectorized env step, as FastTD3's `num_updates`
(Seo et al., arXiv 2505.22642, `younggyoseo/FastTD3` `fast_td3/train.py`).

The config of a subclass must have `utd_ratio`, `batch_size`, `buffer_size`, `learning_starts`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from jaxrl.engine.contract import AgentBase
from jaxrl.engine.types import Metrics, Transition
from jaxrl.learning import optim, replay


@dataclasses.dataclass(frozen=True)
class OffPolicyAgent(AgentBase):
    """Shared off-policy plumbing; subclasses implement `init`, `act`, `step_inputs` and
    `gradient_step` (and keep the buffer in a state field named `buffer`)."""

    on_policy: ClassVar[bool] = False
    has_replay: ClassVar[bool] = True
    REPLAY_EXTRAS: ClassVar[tuple[str, ...]] = ()
    """Keys of `Transition.extras` stored in the buffer (CRL: `traj_id`)."""

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
        """AgentBase checks, then the replay schedule (`replay.check_schedule`)."""
        super().validate()
        c = self.config
        if not c.utd_ratio > 0:
            raise ValueError(f"utd_ratio must be > 0, got {c.utd_ratio}.")
        replay.check_schedule(utd_ratio=c.utd_ratio, batch_size=c.batch_size,
                              buffer_size=c.buffer_size, learning_starts=c.learning_starts,
                              train=self.train)

    # ----- replay declarations of the contract ---------------------------------------------
    def replay_of(self, state: Any) -> replay.ReplayState:
        return state.buffer

    def with_replay(self, state: Any, buffer: Any) -> Any:
        return state.replace(buffer=buffer)

    def data_specs(self, state: Any, axis: str) -> Any:
        """Replay data `[C, N, ...]` sharded on its env axis, everything else replicated."""
        specs = jax.tree.map(lambda _: PartitionSpec(), state)
        buffer = self.replay_of(specs)
        data = jax.tree.map(lambda _: PartitionSpec(None, axis), self.replay_of(state).data)
        return self.with_replay(specs, buffer.replace(data=data))

    def replay_record(self, traj: Transition) -> Transition:
        """The part of a rollout the buffer stores: the Transition fields and `REPLAY_EXTRAS`."""
        return Transition(obs=traj.obs, action=traj.action, reward=traj.reward,
                          terminated=traj.terminated, truncated=traj.truncated,
                          next_obs=traj.next_obs,
                          extras={k: traj.extras[k] for k in self.REPLAY_EXTRAS})

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
                             extras={k: extras[k] for k in self.REPLAY_EXTRAS})
        return replay.init(example, self.capacity_per_env, obs_dtype, extras=self.REPLAY_EXTRAS)

    def learning(self, state: Any) -> jax.Array:
        """bool `[]`: the buffer holds `learning_starts` transitions (gradient steps run)."""
        return replay.num_transitions(self.replay_of(state)) >= self.config.learning_starts

    def random_warmup(self, state: Any, key: jax.Array, action: jax.Array) -> jax.Array:
        """Uniform actions in [-1, 1] until `learning`, else `action` clipped to [-1, 1]
        (Brax SAC's random prefill)."""
        rand = jax.random.uniform(jax.random.fold_in(key, 7), action.shape, minval=-1.0,
                                  maxval=1.0)
        return jnp.where(self.learning(state), jnp.clip(action, -1.0, 1.0), rand)

    @staticmethod
    def ema(target: Any, online: Any, tau: jax.Array) -> Any:
        """Target-network EMA `target <- (1 - tau) target + tau online`."""
        return optim.soft_update(target, online, tau)

    # ----- the update --------------------------------------------------------------------
    def observe(self, state: Any, traj: Transition) -> Any:
        """Writes the chunk to the replay buffer (subclasses add running statistics)."""
        return self.with_replay(state, replay.add(self.replay_of(state),
                                                  self.replay_record(traj)))

    def update(self, state: Any, traj: Transition, key: jax.Array) -> tuple[Any, Metrics]:
        """`observe`, then `train_steps` once learning started (see the module docstring)."""
        state = self.observe(state, traj)
        state, metrics = gated(self.learning(state), self.train_steps, state, key, state)
        count = replay.num_transitions(self.replay_of(state))
        metrics["buffer/transitions"] = count.astype(jnp.float32)
        return state, metrics

    def train_steps(self, state: Any, key: jax.Array) -> tuple[Any, Metrics]:
        """The UTD loop: `lax.scan` of `gradient_step` over `step_inputs(state, key)`."""
        state, metrics = jax.lax.scan(self.gradient_step, state, self.step_inputs(state, key))
        return state, self.reduce_step_metrics(metrics)

    def step_inputs(self, state: Any, key: jax.Array) -> Any:
        """Per-step scan inputs with leading axis `updates_per_call` (batches and/or keys)."""
        raise NotImplementedError

    def gradient_step(self, state: Any, inputs: Any) -> tuple[Any, Any]:
        """One gradient step: `(state, inputs) -> (state, per-step metrics)`."""
        raise NotImplementedError

    def reduce_step_metrics(self, metrics: Any) -> Metrics:
        """Per-step metrics `[G]` -> scalars (mean over the steps)."""
        return jax.tree.map(jnp.mean, metrics)


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
