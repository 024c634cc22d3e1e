"""PQL and PQL-D: Parallel Q-Learning with data collection, critic (V) learning and policy (P)
learning as three roles at fixed update ratios, in one program.

Sources: Li, Chen, Hong, Ajay, Agrawal, "Parallel Q-Learning: Scaling Off-policy Reinforcement
Learning under Massively Parallel Simulation" (ICML 2023, arXiv 2307.12983), Sec. 3 (roles,
the ratios beta_a:v and beta_p:v, mixed exploration); `Improbable-AI/pql`:
`pql/algo/pql_actor.py`, `pql_v_learner.py`, `pql_p_learner.py` (roles),
`pql/utils/noise.py` (mixed noise), `pql/models/mlp.py` (512-256-128 ELU),
`cfg/algo/pql_algo.yaml` (`critic_sample_ratio = 8`, `critic_actor_ratio = 2`, `tau = 0.05`,
3-step returns, AdamW 5e-4, grad-norm clip 0.5), `pql/models/critic.py`
(`DistributionalDoubleQ`: 51 atoms on [-10, 10], BCE on the elementwise min of the projected
twins).

- Actor: deterministic `pi(s) = tanh(MLP(s))`; no target actor. Behaviour: env `i` (global
  index, so sharding keeps the assignment) adds `sigma_i eps`,
  `sigma_i = linspace(sigma_min, sigma_max, N)[i]` (`sigma_min == sigma_max` is PQL's `fixed`
  noise), clipped to [-1, 1]; uniform actions until `learning_starts`.
- V-learner: twin critics, target `y = R^(n) + gamma^n (1 - d) min_k Qbar_k(s', a')` with
  `a' = clip(pi(s') + clip(N(0, 0.8^2), -0.2, 0.2), -1, 1)` from the latest actor (TD3
  smoothing), MSE per twin, then the target EMA with `tau` after every critic step. n-step
  windows come from the replay (`replay.sample`): they stop at terminations (mask 0) and at
  truncations, which bootstrap from the true final observation.
- P-learner: `L = -mean(min_k Q_k(s, pi(s)))` on its OWN observation batch (a separate key),
  critic frozen.
- Ratios are loop counts: `critic_updates_per_step` critic steps per vectorized env step and
  one actor step per `critic_updates_per_actor_update` critic steps; the counters in the state
  prove them. PQL balances its roles with sleeps; the counts make runs hardware-independent.
- PQL-D (`critic_type="categorical"`): twin softmax heads on `num_atoms` atoms; target
  `min_bce` (reference: elementwise min of the per-twin projections, BCE with probabilities
  clipped to [eps, 1 - eps]) or `lower_ce` (ours: cross-entropy to the projection of the twin
  with the lower expected value, a proper distribution).
- Schedules: `sync` (newest parameters everywhere; one actor step after every
  `critic_updates_per_actor_update` critic steps in the same scan) and `pipelined` (the V and P
  blocks of an update both read the parameters of the previous update and the buffer before the
  new chunk is added, like PQL's concurrent roles with one iteration of staleness).
- Layouts across devices (`jaxrl.engine.layouts`): `data` (envs, replay and batches sharded,
  gradients averaged) and `role` (actor | learners, or actor | V | P; `pipelined` only).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl.agents.common.offpolicy import OffPolicyLoop, ema, gated, zeros_obs, zeros_of
from jaxrl.agents.common.pql_config import HP_FIELDS, HP_RANGES, PQLConfig
from jaxrl.engine.checks import check_choice, check_finite, check_positive
from jaxrl.engine.contract import AgentBase
from jaxrl.engine.parallel import DATA_AXIS
from jaxrl.learning import exploration, losses, optim, replay
from jaxrl.learning import running_stats as stats
from jaxrl.learning.networks import ACTIVATIONS, MLP, QHead, ensemble, flatten_obs
from jaxrl.learning.returns import categorical_support


@struct.dataclass(kw_only=True)
class PQLState:
    params: dict
    """`{"actor": variables, "critic": variables}` (critic heads stacked on axis 0)."""
    target_critic: dict
    opt_state: dict
    buffer: replay.ReplayState
    obs_stats: stats.RunningStats
    hp: dict
    critic_updates: jax.Array
    """Critic steps taken (int32)."""
    actor_updates: jax.Array
    """Actor steps taken (int32)."""
    target_updates: jax.Array
    """Target-critic EMA updates (int32)."""


@dataclasses.dataclass(frozen=True)
class PQL(AgentBase):
    """Parallel Q-Learning (off-policy, deterministic actor, twin critics)."""

    config: PQLConfig
    HP_FIELDS: ClassVar = HP_FIELDS
    HP_RANGES: ClassVar = HP_RANGES
    on_policy: ClassVar[bool] = False
    explores: ClassVar[bool] = True
    has_replay: ClassVar[bool] = True

    @property
    def replay(self) -> OffPolicyLoop:
        """The replay buffer's sizes, warm-up and schedule checks."""
        return OffPolicyLoop(self.config, self.spec, self.train)

    # ----- checks --------------------------------------------------------------------------
    def validate(self) -> None:
        """Raises ValueError (before compiling) for bad ratios, atoms, layouts or sizes."""
        c = self.config
        for name in ("critic_updates_per_step", "critic_updates_per_actor_update", "n_step",
                     "num_atoms"):
            value = getattr(c, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        check_choice("critic_type", c.critic_type, ("scalar", "categorical"))
        check_choice("distributional_target", c.distributional_target, ("min_bce", "lower_ce"))
        check_choice("schedule", c.schedule, ("sync", "pipelined"))
        check_choice("layout", c.layout, ("single", "data", "role"))
        check_choice("activation", c.activation, tuple(ACTIVATIONS))
        check_positive(c, "batch_size", "obs_clip", "max_grad_norm")
        check_finite(c, "sigma_min", "sigma_max", "target_noise", "target_noise_clip",
                      "v_min", "v_max", "prob_eps", "weight_decay")
        if not 0 <= c.sigma_min <= c.sigma_max:
            raise ValueError(f"need 0 <= sigma_min <= sigma_max, got {c.sigma_min}, "
                             f"{c.sigma_max}.")
        if c.critic_type == "categorical" and c.num_atoms < 2:
            raise ValueError(f"PQL-D needs num_atoms >= 2, got {c.num_atoms}.")
        if c.critic_type == "categorical" and not c.v_min < c.v_max:
            raise ValueError(f"PQL-D needs v_min < v_max, got v_min={c.v_min}, v_max={c.v_max}.")
        steps = self.replay.updates_per_call
        if steps % c.critic_updates_per_actor_update:
            raise ValueError(
                f"critic steps per update ({steps} = critic_updates_per_step x "
                f"unroll_length x unrolls_per_update) must be a multiple of "
                f"critic_updates_per_actor_update ({c.critic_updates_per_actor_update}).")
        self._validate_layout()
        super().validate()
        self.replay.validate()

    def _validate_layout(self) -> None:
        c, n = self.config, self.train.num_devices
        if c.layout == "role":
            if n not in (2, 3):
                raise ValueError(f"layout='role' needs num_devices 2 (actor | learners) or 3 "
                                 f"(actor | V | P), got {n}.")
            if c.schedule != "pipelined":
                raise ValueError("layout='role' exchanges parameters at iteration boundaries: "
                                 "use schedule='pipelined'.")
        if c.layout == "data" and (self.train.num_envs % n or c.batch_size % n):
            raise ValueError(f"layout='data' over {n} devices needs num_envs "
                             f"({self.train.num_envs}) and batch_size ({c.batch_size}) "
                             f"divisible by {n}.")

    @property
    def layout(self) -> tuple[str, int]:
        """(`single` | `data` | `role`, number of devices): read by `engine.layouts`. The count
        is the run's `num_devices`; with `single` the run's data parallelism (if any) is the
        one every agent gets (`jaxrl.engine.parallel`), so PQL's layout is one device."""
        if self.config.layout == "single":
            return "single", 1
        return self.config.layout, self.train.num_devices

    @property
    def axis_name(self) -> str | None:
        """Mesh axis of the `data` layout (collectives in the update), else None."""
        return DATA_AXIS if self.config.layout == "data" else None

    @property
    def replay_ratios(self) -> tuple[float, float]:
        """(critic, actor) replay ratios: samples drawn per transition collected."""
        c, n = self.config, self.train.num_envs
        critic = c.critic_updates_per_step * c.batch_size / n
        return critic, critic / c.critic_updates_per_actor_update

    # ----- networks ------------------------------------------------------------------------
    @property
    def actor_net(self):
        c = self.config
        return MLP(tuple(c.actor_hidden) + (self.spec.action_size,), c.activation)

    @property
    def critic_net(self):
        c = self.config
        atoms = c.num_atoms if c.critic_type == "categorical" else 1
        return ensemble(QHead, 2)(tuple(c.critic_hidden), c.critic_type, atoms, c.activation)

    def prepare_obs(self, state, obs):
        """Normalized (running statistics, clamped to +-obs_clip) float32 flat observations."""
        if self.config.normalize_observations:
            clip = self.config.obs_clip
            obs = jax.tree.map(lambda x: jnp.clip(x, -clip, clip),
                               stats.normalize(state.obs_stats, obs))
        if isinstance(obs, dict):
            obs = flatten_obs(obs, [self.config.obs_key])
        return obs.astype(jnp.float32)

    def pi(self, actor_vars, obs):
        """Deterministic action `tanh(MLP(obs))` in [-1, 1] for prepared `obs`."""
        return jnp.tanh(self.actor_net.apply(actor_vars, obs))

    def q_values(self, critic_vars, obs, action):
        """Expected value per twin `[2, B]` (PQL-D: `sum_j z_j p_j`)."""
        out = self.critic_net.apply(critic_vars, obs, action)
        if self.config.critic_type == "categorical":
            z = categorical_support(self.config.v_min, self.config.v_max, out.shape[-1])
            return jnp.sum(jax.nn.softmax(out, axis=-1) * z, axis=-1)
        return out[..., 0]

    # ----- state ---------------------------------------------------------------------------
    def _optimizer(self):
        """AdamW with global-norm clipping (learning rate applied by `optim.apply`)."""
        c = self.config
        return optax.chain(optax.clip_by_global_norm(c.max_grad_norm), optax.scale_by_adam(),
                           optax.add_decayed_weights(c.weight_decay))

    def init(self, key, hp):
        spec = self.spec
        k_actor, k_critic = jax.random.split(key)
        obs = zeros_obs(spec, (1,))
        flat = flatten_obs(obs, [self.config.obs_key]) if isinstance(obs, dict) else obs
        actor = self.actor_net.init(k_actor, flat)
        critic = self.critic_net.init(k_critic, flat, jnp.zeros((1, spec.action_size)))
        opt = self._optimizer()
        zero = jnp.zeros((), jnp.int32)
        return PQLState(
            params={"actor": actor, "critic": critic}, target_critic=critic,
            opt_state={"actor": opt.init(actor["params"]), "critic": opt.init(critic["params"])},
            buffer=self.replay.empty_replay(), obs_stats=stats.init(zeros_obs(spec, ())),
            hp={k: jnp.asarray(v, jnp.float32) for k, v in hp.items()},
            critic_updates=zero, actor_updates=zero, target_updates=zero)

    def learning(self, state):
        """bool `[]`: the replay holds `learning_starts` transitions (summed over `data` shards)."""
        count = replay.num_transitions(state.buffer)
        if self.axis_name:
            count = jax.lax.psum(count, self.axis_name)
        return count >= self.config.learning_starts

    # ----- acting --------------------------------------------------------------------------
    def sigma(self, env_id):
        """Mixed-exploration std per env (`exploration.mixed_sigma` over the global N)."""
        c = self.config
        return exploration.mixed_sigma(env_id, self.train.num_envs, c.sigma_min, c.sigma_max)

    def act(self, state, obs, key, deterministic: bool = False):
        """`pi(obs)` `[N, A]`; stochastic: row i explores as env i (`explore`)."""
        action = self.pi(state.params["actor"], self.prepare_obs(state, obs))
        if deterministic:
            return action, {}
        env_id = jnp.arange(action.shape[0], dtype=jnp.int32)
        return self._behaviour(state, action, key, env_id), {}

    def init_explore(self, key, num_envs: int):
        """The carry holds each env's global index (sharded with the envs)."""
        return {"env_id": jnp.arange(num_envs, dtype=jnp.int32)}

    def explore(self, state, obs, key, carry, done):
        action = self.pi(state.params["actor"], self.prepare_obs(state, obs))
        return self._behaviour(state, action, key, carry["env_id"]), {}, carry

    def _behaviour(self, state, action, key, env_id):
        """`clip(pi + sigma_i eps_i, -1, 1)` (uniform during warm-up); noise drawn per env from
        `fold_in(key, env_id)`, so it does not depend on how envs are sharded."""
        eps, uniform = exploration.per_env_normal_and_uniform(key, env_id, action.shape[-1])
        noisy = jnp.clip(action + self.sigma(env_id)[:, None] * eps, -1.0, 1.0)
        return jnp.where(self.learning(state), noisy, uniform)

    # ----- the update ----------------------------------------------------------------------
    def observe(self, state, traj):
        state = self.replay.observe(state, traj)
        if not self.config.normalize_observations:
            return state
        return state.replace(obs_stats=stats.update(state.obs_stats, traj.obs,
                                                    axis_name=self.axis_name))

    def update(self, state, traj, key):
        """`sync`: observe, then V and P interleaved. `pipelined`: V and P blocks on the previous
        parameters and buffer, `publish`, then observe the chunk."""
        if self.config.schedule == "sync":
            state = self.observe(state, traj)
            metrics_shape = jax.eval_shape(self._sync_steps, state, key)[1]
            state, metrics = jax.lax.cond(self.learning(state), self._sync_steps,
                                          lambda s, k: (s, zeros_of(metrics_shape)), state, key)
        else:
            k_critic, k_actor = self.role_keys(key)
            return self.finish_roles(state, traj, self.critic_block(state, k_critic),
                                     self.actor_block(state, k_actor))
        return state, self._bookkeeping(state, metrics)

    def role_keys(self, key):
        """Keys of the V and P blocks of a `pipelined` update (same in the `role` layout)."""
        k_critic, k_actor = jax.random.split(key)
        return k_critic, k_actor

    def finish_roles(self, state, traj, critic_out, actor_out):
        """End of a `pipelined` update: `publish` the V and P blocks' outputs, then `observe`
        the chunk (the roles never saw it this iteration)."""
        (critic_part, m_critic), (actor_part, m_actor) = critic_out, actor_out
        state = self.observe(self.publish(state, critic_part, actor_part), traj)
        return state, self._bookkeeping(state, dict(m_critic, **m_actor))

    def _bookkeeping(self, state, metrics):
        critic_rr, actor_rr = self.replay_ratios
        count = replay.num_transitions(state.buffer)
        if self.axis_name:
            count = jax.lax.psum(count, self.axis_name)
        return dict(metrics, **{"buffer/transitions": count.astype(jnp.float32),
                                "train/critic_updates": state.critic_updates.astype(jnp.float32),
                                "train/actor_updates": state.actor_updates.astype(jnp.float32),
                                "train/critic_replay_ratio": jnp.float32(critic_rr),
                                "train/actor_replay_ratio": jnp.float32(actor_rr)})

    def _sync_steps(self, state, key):
        """`G / r` rounds of (r critic steps, one actor step), newest parameters everywhere."""
        r = self.config.critic_updates_per_actor_update

        def round_(s, k):
            critic_keys, k_actor = self.round_keys(k)
            s, m_critic = jax.lax.scan(lambda s_, k_: self._critic_step(s_, k_, s_),
                                       s, critic_keys)
            s, m_actor = self._actor_step(s, k_actor, s)
            return s, (m_critic, m_actor)

        keys = jax.random.split(key, self.replay.updates_per_call // r)
        state, (m_critic, m_actor) = jax.lax.scan(round_, state, keys)
        return state, jax.tree.map(jnp.mean, dict(m_critic, **m_actor))

    def round_keys(self, key):
        """Keys of one `sync` round: `[r]` critic-step keys and the actor step's own key (the
        P batch is never the V batch)."""
        k_critic, k_actor = jax.random.split(key)
        return jax.random.split(k_critic, self.config.critic_updates_per_actor_update), k_actor

    def critic_block(self, state, key):
        """V role: `G` critic steps from `state`, target actions from `state`'s actor (frozen).
        Returns (the critic part of the state, metrics); unchanged before `learning_starts`."""
        def run(s, k):
            s, m = jax.lax.scan(lambda s_, k_: self._critic_step(s_, k_, state), s,
                                jax.random.split(k, self.replay.updates_per_call))
            return _critic_part(s), jax.tree.map(jnp.mean, m)

        return gated(self.learning(state), run, state, key, _critic_part(state))

    def actor_block(self, state, key):
        """P role: `G / r` actor steps from `state` against `state`'s critic (frozen)."""
        steps = self.replay.updates_per_call // self.config.critic_updates_per_actor_update

        def run(s, k):
            s, m = jax.lax.scan(lambda s_, k_: self._actor_step(s_, k_, state), s,
                                jax.random.split(k, steps))
            return _actor_part(s), jax.tree.map(jnp.mean, m)

        return gated(self.learning(state), run, state, key, _actor_part(state))

    def publish(self, state, critic_part, actor_part):
        """`state` with the V role's critic part and the P role's actor part."""
        return state.replace(
            params={"actor": actor_part["actor"], "critic": critic_part["critic"]},
            target_critic=critic_part["target_critic"],
            opt_state={"actor": actor_part["opt_actor"], "critic": critic_part["opt_critic"]},
            critic_updates=critic_part["critic_updates"],
            target_updates=critic_part["target_updates"],
            actor_updates=actor_part["actor_updates"])

    # ----- one critic step, one actor step -------------------------------------------------
    def _sample(self, state, key, n_step):
        """A batch from the replay: this shard's `batch_size / num_devices` under `data`."""
        b = self.config.batch_size
        if self.axis_name:
            key = jax.random.fold_in(key, jax.lax.axis_index(self.axis_name))
            b //= self.layout[1]
        return replay.sample(state.buffer, key, b, n_step=n_step, gamma=state.hp["gamma"])

    def _grads(self, loss_fn, params, *args):
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, *args)
        if self.axis_name:
            grads, metrics = jax.lax.pmean((grads, metrics), self.axis_name)
        return grads, metrics

    def _critic_step(self, state, key, frozen):
        """One critic step on a fresh n-step batch (actor of `frozen` for target actions), then
        the target EMA."""
        k_batch, k_noise = jax.random.split(key)
        batch = self._sample(state, k_batch, self.config.n_step)
        critic = state.params["critic"]
        grads, metrics = self._grads(self.critic_loss, critic["params"], state, batch, k_noise,
                                     frozen.params["actor"])
        params, opt = optim.apply(self._optimizer(), state.opt_state["critic"],
                                  critic["params"], grads, state.hp["critic_learning_rate"])
        critic = dict(critic, params=params)
        target = ema(state.target_critic, critic, state.hp["tau"])
        return state.replace(params=dict(state.params, critic=critic), target_critic=target,
                             opt_state=dict(state.opt_state, critic=opt),
                             critic_updates=state.critic_updates + 1,
                             target_updates=state.target_updates + 1), metrics

    def _actor_step(self, state, key, frozen):
        """One actor step on the P role's own observation batch against `frozen`'s critic."""
        obs = self.prepare_obs(state, self._sample(state, key, 1).obs)
        actor = state.params["actor"]
        critic_vars = frozen.params["critic"]

        def loss_fn(p):
            q = self.q_values(critic_vars, obs, self.pi(dict(actor, params=p), obs))
            loss = losses.deterministic_actor_loss(q)
            return loss, {"train/actor_loss": loss}

        grads, metrics = self._grads(loss_fn, actor["params"])
        params, opt = optim.apply(self._optimizer(), state.opt_state["actor"], actor["params"],
                                  grads, state.hp["actor_learning_rate"])
        return state.replace(params=dict(state.params, actor=dict(actor, params=params)),
                             opt_state=dict(state.opt_state, actor=opt),
                             actor_updates=state.actor_updates + 1), metrics

    def target_action(self, actor_vars, next_obs, key):
        """TD3 smoothing: `clip(pi(s') + clip(N(0, target_noise^2), +-clip), -1, 1)`."""
        return self.smooth(self.pi(actor_vars, next_obs), key)

    def smooth(self, a, key):
        """TD3 smoothing of target actions (`exploration.smooth_target_action`)."""
        c = self.config
        return exploration.smooth_target_action(a, key, c.target_noise, c.target_noise_clip)

    def critic_loss(self, critic_params, state, batch, key, actor_vars):
        """MSE per twin to `R + discount min_k Qbar_k(s', a')` (scalar) or the PQL-D loss."""
        c = self.config
        obs, next_obs = self.prepare_obs(state, batch.obs), self.prepare_obs(state,
                                                                              batch.next_obs)
        next_a = self.target_action(actor_vars, next_obs, key)
        reward = batch.reward * state.hp["reward_scaling"]
        variables = dict(state.params["critic"], params=critic_params)
        out = self.critic_net.apply(variables, obs, batch.action)
        tgt = jax.lax.stop_gradient(self.critic_net.apply(state.target_critic, next_obs, next_a))
        if c.critic_type == "scalar":
            y = reward + batch.discount * tgt[..., 0].min(axis=0)
            loss = losses.twin_td_loss(out[..., 0], y)
            return loss, {"train/critic_loss": loss, "train/q_mean": out[..., 0].mean(),
                          "train/td_target": y.mean()}
        if c.distributional_target == "min_bce":
            target = losses.twin_min_projection_target(jax.nn.softmax(tgt, axis=-1), reward,
                                                       batch.discount, c.v_min, c.v_max)
            loss = losses.binary_cross_entropy(jax.nn.softmax(out, axis=-1), target, c.prob_eps)
        else:
            target = losses.categorical_td_target(tgt, reward, batch.discount,
                                                  jnp.zeros_like(reward), c.v_min, c.v_max)
            loss = losses.categorical_cross_entropy(out, target, jnp.ones_like(reward))
        z = categorical_support(c.v_min, c.v_max, c.num_atoms)
        q = jnp.sum(jax.nn.softmax(out, axis=-1) * z, axis=-1)
        return loss, {"train/critic_loss": loss, "train/q_mean": q.mean(),
                      "train/target_mass": target.sum(-1).mean()}


def _critic_part(state) -> dict:
    return {"critic": state.params["critic"], "target_critic": state.target_critic,
            "opt_critic": state.opt_state["critic"], "critic_updates": state.critic_updates,
            "target_updates": state.target_updates}


def _actor_part(state) -> dict:
    return {"actor": state.params["actor"], "opt_actor": state.opt_state["actor"],
            "actor_updates": state.actor_updates}

