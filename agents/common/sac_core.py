"""The SAC-family core: actor, twin (ensemble) critics, temperature, target EMA, exploration.

Sources: Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (arXiv 1812.05905),
Eqs. 5-7 (soft Q target, policy loss) and 18 (temperature loss); brax
`training/agents/sac/{train,losses,networks}.py` for the defaults, the target entropy
`-0.5 |A|` and observation normalization; FastTD3 (arXiv 2505.22642, `younggyoseo/FastTD3`)
for many parallel envs with several updates per env step; FlashSAC's normalized networks and
cross-batch BatchNorm (arXiv 2604.04539, `leeyngdo/FlashSAC`
`flash_rl/agents/flashSAC/update.py`).

Schedule (`OffPolicyLoop`): each `update` adds the chunk to the replay buffer (observation and
reward statistics in write order) and, once the buffer holds `learning_starts` transitions,
takes `G = utd_ratio * T` gradient steps on one sample of `G * B` transitions reshaped to
`[G, B]`. Each step: critic (then target EMA with `tau`), and every `policy_delay` steps actor
and temperature. Before `learning_starts`, behaviour actions are uniform in [-1, 1].

`SACCore` is a helper an agent holds (composition, not a base class): the agent gives its
`ActorHead` (network, distribution, target action) and its `CriticHead` (output head, expected
value, loss: network outputs from `critic_outputs`/`next_action` fed to a pure loss of
`jaxrl.learning.losses`), both from `jaxrl.agents.common.sac_heads`, and delegates `init`,
`act`, `explore` and `update` to it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl.agents.common.offpolicy import OffPolicyLoop, ema, zeros_obs
from jaxrl.agents.common.sac_config import TARGET_ENTROPY, SACCoreConfig
from jaxrl.agents.common.sac_heads import ActorHead, CriticHead
from jaxrl.engine.checks import check_choice, check_log_std_bounds, check_positive
from jaxrl.engine.types import EnvSpec
from jaxrl.learning import exploration, losses, optim, replay, reward_scaling
from jaxrl.learning import running_stats as stats
from jaxrl.learning.networks import (
    ACTIVATIONS,
    QHead,
    ensemble,
    flatten_obs,
    project_weights,
)


@struct.dataclass(kw_only=True)
class SACState:
    params: dict
    """`{"actor": variables, "critic": variables}` (flax variables incl. `batch_stats`)."""
    target_critic: dict
    opt_state: dict
    log_alpha: jax.Array
    buffer: replay.ReplayState
    obs_stats: stats.RunningStats
    reward_stats: reward_scaling.RewardScaleState
    hp: dict
    num_updates: jax.Array
    """Gradient steps taken so far (int32)."""


@dataclasses.dataclass(frozen=True)
class SACCore:
    """The SAC-family machinery an agent holds (see the module docstring): the agent gives its
    actor and critic heads; the core owns the networks' state, the replay schedule (an
    `OffPolicyLoop`, `replay`), exploration and the gradient steps.

    Attributes:
        config, spec, train: the agent's.
        actor, critic: the agent's heads.
        state_cls: the state class (`SACState` or a subclass declaring `extra_state`'s fields).
        extra_state: `() -> dict` of more initial state fields (FastDSAC: `wbar`).
    """

    config: SACCoreConfig
    spec: EnvSpec
    train: Any
    actor: ActorHead
    critic: CriticHead
    state_cls: type = SACState
    extra_state: Callable[[], dict] = dict

    def validate(self) -> None:
        """Raises ValueError (before compiling) for inconsistent sizes or settings."""
        c = self.config
        check_choice("q_agg", c.q_agg, ("min", "mean"))
        check_choice("target_entropy", c.target_entropy, TARGET_ENTROPY)
        check_choice("truncation", c.truncation, ("bootstrap", "brax"))
        check_choice("lr_schedule", c.lr_schedule, self.replay.LR_SCHEDULES)
        check_choice("obs_dtype", c.obs_dtype, ("float32", "bfloat16"))
        check_choice("activation", c.activation, tuple(ACTIVATIONS))
        check_positive(c, "num_q", "policy_delay", "n_step")
        check_log_std_bounds(*self.actor.log_std_bounds)
        if c.truncation == "brax" and c.n_step != 1:
            raise ValueError("truncation='brax' masks single transitions: use n_step = 1.")
        low_high = c.noise_scale_range
        if low_high is not None and not 0 < low_high[0] <= low_high[1]:
            raise ValueError(f"noise_scale_range must be 0 < low <= high, got {low_high}.")
        self.replay.validate()

    @property
    def replay(self) -> OffPolicyLoop:
        """The replay buffer's sizes, warm-up, schedule and UTD loop."""
        return OffPolicyLoop(self.config, self.spec, self.train)

    # ----- networks and policy -----------------------------------------------------------
    @property
    def critic_net(self):
        c = self.config
        return ensemble(QHead, c.num_q)(tuple(c.critic_hidden), self.critic.kind,
                                        self.critic.num_atoms, c.activation, c.normalized_nets,
                                        c.num_blocks, c.layer_norm, c.normalized_bias)

    def apply_net(self, net, variables, *args, train: bool = False):
        """Applies `net`; in training mode with BatchNorm also returns updated variables."""
        if train and self.config.normalized_nets:
            out, upd = net.apply(variables, *args, True, mutable=["batch_stats"])
            return out, dict(variables, **upd)
        return net.apply(variables, *args, False), variables

    def policy(self, actor_vars, obs, train: bool = False):
        """(distribution object, possibly BN-updated variables) for prepared `obs`."""
        if self.actor.policy is not None:
            return self.actor.policy(actor_vars, obs), actor_vars
        out, actor_vars = self.apply_net(self.actor.net, actor_vars, obs, train=train)
        return self.actor.make_dist(out), actor_vars

    def prepare_obs(self, state, obs, key_name: str):
        """Running-statistics normalization (if on) and the dict key `key_name`; float32."""
        if self.config.normalize_observations and not self.config.normalized_nets:
            obs = stats.normalize(state.obs_stats, obs)
        if isinstance(obs, dict):
            obs = flatten_obs(obs, [key_name])
        return obs.astype(jnp.float32)

    def q_values(self, out):
        """Expected value per head `[E, ...]` from the critic output (the critic head's)."""
        return self.critic.q_values(out)

    def aggregate(self, q):
        return q.min(axis=0) if self.config.q_agg == "min" else q.mean(axis=0)

    def target_entropy(self) -> float:
        a = self.spec.action_size
        return {"brax": -0.5 * a, "action_dim": -float(a), "zero": 0.0,
                "flash": 0.5 * a * math.log(2 * math.pi * math.e * 0.15 ** 2)
                }[self.config.target_entropy]

    # ----- state -------------------------------------------------------------------------
    def init(self, key, hp):
        c, spec = self.config, self.spec
        k_actor, k_critic = jax.random.split(key)
        obs = zeros_obs(spec, (1,))
        actor = self.actor.net.init(k_actor, _flat(obs, c.policy_obs_key), False)
        critic = self.critic_net.init(k_critic, _flat(obs, c.critic_obs_key),
                                      jnp.zeros((1, spec.action_size)), False)
        hp = {k: jnp.asarray(v, jnp.float32) for k, v in hp.items()}
        opt = self._optimizers()
        return self.state_cls(
            params={"actor": actor, "critic": critic}, target_critic=critic,
            opt_state={"actor": opt["actor"].init(actor["params"]),
                       "critic": opt["critic"].init(critic["params"]),
                       "alpha": opt["alpha"].init(jnp.zeros(()))},
            log_alpha=jnp.log(hp["init_alpha"]),
            buffer=self.replay.empty_replay(jnp.bfloat16 if c.obs_dtype == "bfloat16"
                                     else jnp.float32),
            obs_stats=stats.init(zeros_obs(spec, ())),
            reward_stats=reward_scaling.init(self.train.num_envs), hp=hp,
            num_updates=jnp.zeros((), jnp.int32), **self.extra_state())

    def _optimizers(self):
        c = self.config
        wd = [optax.add_decayed_weights(c.weight_decay)] if c.weight_decay else []
        net = optax.chain(optax.scale_by_adam(), *wd)
        return {"actor": net, "critic": net, "alpha": optim.make_optimizer()}

    # ----- acting ------------------------------------------------------------------------
    def act(self, state, obs, key, deterministic: bool = False):
        """Action in [-1, 1] `[N, A]` (mode when deterministic); uniform during warm-up."""
        dist, _ = self.policy(state.params["actor"],
                              self.prepare_obs(state, obs, self.config.policy_obs_key))
        if deterministic:
            return dist.mode(), {}
        eps = jax.random.normal(key, dist.loc.shape)
        return self.replay.random_warmup(state, key, dist.from_noise(eps)), {}

    def init_explore(self, key, num_envs: int):
        """Exploration carry: zeta noise and per-env std multipliers (`learning.exploration`)."""
        c, a = self.config, self.spec.action_size
        k1, k2 = jax.random.split(key)
        low, high = c.noise_scale_range or (1.0, 1.0)
        return {"zeta": exploration.zeta_init(k1, num_envs, a),
                "scale": exploration.sample_noise_scales(k2, num_envs, low, high)}

    def explore(self, state, obs, key, carry, done):
        """Behaviour policy with zeta-repeated noise and per-env scales; returns the carry."""
        c = self.config
        k_eps, k_zeta, k_scale = jax.random.split(key, 3)
        scale = carry["scale"]
        if c.noise_scale_range is not None:
            scale = exploration.resample_on_done(k_scale, scale, done, *c.noise_scale_range)
        zeta = carry["zeta"]
        if c.noise_repeat:
            zeta, eps = exploration.zeta_step(zeta, k_zeta)
        else:
            eps = jax.random.normal(k_eps, zeta.eps.shape)
        dist, _ = self.policy(state.params["actor"],
                              self.prepare_obs(state, obs, c.policy_obs_key))
        action = dist.from_noise(eps, scale[:, None])
        return (self.replay.random_warmup(state, k_eps, action), {},
                {"zeta": zeta, "scale": scale})

    # ----- learning ----------------------------------------------------------------------
    def update(self, state, traj, key):
        """The UTD loop (`OffPolicyLoop.update`) with this agent's `observe`, `step_inputs`,
        `gradient_step` and `reduce_step_metrics`."""
        return self.replay.update(state, traj, key, step_inputs=self.step_inputs,
                                  gradient_step=self.gradient_step, observe=self.observe,
                                  reduce_step_metrics=self.reduce_step_metrics)

    def observe(self, state, traj):
        """The buffer write, then the observation and reward statistics."""
        state = self.replay.observe(state, traj)
        obs_stats = (stats.update(state.obs_stats, traj.obs)
                     if self.config.normalize_observations else state.obs_stats)
        return state.replace(obs_stats=obs_stats, reward_stats=reward_scaling.update(
            state.reward_stats, traj.reward, traj.terminated, traj.truncated, state.hp["gamma"]))

    def step_inputs(self, state, key):
        """One sample of `G * B` n-step transitions as `[G, B]` batches, and G step keys."""
        c, g = self.config, self.replay.updates_per_call
        k_sample, k_steps = jax.random.split(key)
        batch = replay.sample(state.buffer, k_sample, g * c.batch_size, n_step=c.n_step,
                              gamma=state.hp["gamma"], decay_steps=c.swd_decay_steps,
                              min_weight=c.swd_min_weight)
        batch = jax.tree.map(lambda x: x.reshape((g, c.batch_size) + x.shape[1:]), batch)
        return batch, jax.random.split(k_steps, g)

    def reduce_step_metrics(self, metrics):
        """Critic metrics: mean over steps; actor metrics: mean over the steps that ran it."""
        metrics, actor_metrics, did_actor = metrics
        count = jnp.maximum(did_actor.sum(), 1.0)
        out = jax.tree.map(jnp.mean, metrics)
        out.update({k: v.sum() / count for k, v in actor_metrics.items()})
        return out

    def gradient_step(self, state, inputs):
        """Critic step, actor + temperature every `policy_delay` steps, target EMA."""
        batch, key = inputs
        k_critic, k_actor = jax.random.split(key)
        lr = self.learning_rate(state)
        state, metrics = self.critic_step(state, batch, k_critic, lr)
        do_actor = state.num_updates % self.config.policy_delay == 0
        actor_shape = jax.eval_shape(self.actor_step, state, batch, k_actor, lr)[1]
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), actor_shape)
        state, actor_metrics = jax.lax.cond(
            do_actor, self.actor_step, lambda s, b, k, lr_: (s, zeros), state, batch, k_actor,
            lr)
        target = ema(state.target_critic, state.params["critic"], state.hp["tau"])
        state = state.replace(target_critic=target, num_updates=state.num_updates + 1)
        return state, (dict(metrics, **{"train/learning_rate": lr}), actor_metrics,
                       do_actor.astype(jnp.float32))

    def learning_rate(self, state):
        """`hp["learning_rate"]`, or its cosine decay over the run's gradient steps."""
        return self.replay.scheduled_rate(state.hp["learning_rate"], state.num_updates,
                                          self.config.lr_schedule, self.config.lr_final_fraction)

    def scaled_reward(self, state, reward):
        """`reward * reward_scaling`, divided by the return-based scale when enabled."""
        r = reward * state.hp["reward_scaling"]
        if self.config.reward_normalization:
            r = r / reward_scaling.scale(state.reward_stats)
        return r

    def critic_step(self, state, batch, key, lr):
        grad_fn = jax.value_and_grad(self.critic.loss, has_aux=True)
        critic = state.params["critic"]
        (_, (metrics, critic_vars, updates)), grads = grad_fn(critic["params"], state, batch,
                                                              key)
        params, opt_state = self._opt_step(self._optimizers()["critic"],
                                           state.opt_state["critic"], critic_vars["params"],
                                           grads, lr)
        critic_vars = dict(critic_vars, params=params)
        return state.replace(params=dict(state.params, critic=critic_vars),
                             opt_state=dict(state.opt_state, critic=opt_state),
                             **updates), metrics

    def _opt_step(self, opt, opt_state, params, grads, lr):
        """Optimizer step, then the FlashSAC weight projection with `normalized_nets`."""
        params, opt_state = optim.apply(opt, opt_state, params, grads, lr)
        return (project_weights(params) if self.config.normalized_nets else params), opt_state

    def scalar_critic_loss(self, critic_params, state, batch, key):
        """`0.5 mean((Q_i - y)^2)` over heads and batch (truncated steps masked with
        `truncation="brax"`), `y` the soft TD target with the ensemble reduced by `q_agg`.

        Returns `(loss, online critic output [E, B, 1], critic variables, alpha log pi(a'|s'))`.
        """
        next_a, alpha_logp = self.next_action(state, batch, key)
        out, tgt, variables = self.critic_outputs(critic_params, state, batch, next_a)
        reward = self.scaled_reward(state, batch.reward)
        mask = (1.0 - batch.truncated if self.config.truncation == "brax"
                else jnp.ones_like(reward))
        target = losses.soft_td_target(reward, batch.discount,
                                       self.aggregate(self.q_values(tgt)), alpha_logp)
        loss = losses.soft_q_loss(self.q_values(out), target, mask)
        return loss, out, variables, alpha_logp

    def next_action(self, state, batch, key):
        """Target action at `next_obs` and `alpha * log pi(a')`, both constants."""
        next_pi = self.prepare_obs(state, batch.next_obs, self.config.policy_obs_key)
        dist, _ = self.policy(state.params["actor"], next_pi)
        next_a, next_logp = self.actor.target_action(dist, key)
        return jax.lax.stop_gradient(next_a), jax.lax.stop_gradient(
            jnp.exp(state.log_alpha) * next_logp)

    def critic_outputs(self, critic_params, state, batch, next_a):
        """Online output at (s, a) and target output at (s', a'): `[E, B, ...]` each.

        With `normalized_nets` both networks run in training mode on `concat[(s, a); (s', a')]`
        (FlashSAC's cross-batch BatchNorm); the online prediction is the first half, the
        bootstrap the second half of the target's output.
        """
        c = self.config
        obs = self.prepare_obs(state, batch.obs, c.critic_obs_key)
        next_obs = self.prepare_obs(state, batch.next_obs, c.critic_obs_key)
        variables = dict(state.params["critic"], params=critic_params)
        if c.normalized_nets:
            both_o = jnp.concatenate([obs, next_obs])
            both_a = jnp.concatenate([batch.action, next_a])
            out, variables = self.apply_net(self.critic_net, variables, both_o, both_a,
                                            train=True)
            tgt, _ = self.apply_net(self.critic_net, state.target_critic, both_o, both_a,
                                    train=True)
            b = obs.shape[0]
            return out[:, :b], jax.lax.stop_gradient(tgt[:, b:]), variables
        out, _ = self.apply_net(self.critic_net, variables, obs, batch.action)
        tgt, _ = self.apply_net(self.critic_net, state.target_critic, next_obs, next_a)
        return out, jax.lax.stop_gradient(tgt), variables

    def actor_step(self, state, batch, key, lr):
        """Actor and temperature step (the actor head's own step size if it has one)."""
        if self.actor.learning_rate is not None:
            lr = self.actor.learning_rate(state, lr)
        opt = self._optimizers()
        grad_fn = jax.value_and_grad(self.actor_loss, has_aux=True)
        actor = state.params["actor"]
        (_, (metrics, actor_vars, logp)), grads = grad_fn(actor["params"], state, batch, key)
        params, opt_actor = self._opt_step(opt["actor"], state.opt_state["actor"],
                                           actor_vars["params"], grads, lr)
        log_alpha, opt_alpha = losses.temperature_step(
            opt["alpha"], state.opt_state["alpha"], state.log_alpha, logp,
            self.target_entropy(), state.hp["alpha_learning_rate"])
        state = state.replace(
            params=dict(state.params, actor=dict(actor_vars, params=params)),
            opt_state=dict(state.opt_state, actor=opt_actor, alpha=opt_alpha),
            log_alpha=log_alpha)
        return state, dict(metrics, **{"train/alpha": jnp.exp(log_alpha)})

    def actor_loss(self, actor_params, state, batch, key):
        """`mean(alpha log pi(a|s) - agg_i Q_i(s, a))`, critic in evaluation mode. With
        `normalized_nets` the actor's BN runs in training mode on `concat(s, s')` (FlashSAC)."""
        c = self.config
        obs = self.prepare_obs(state, batch.obs, c.policy_obs_key)
        variables = dict(state.params["actor"], params=actor_params)
        if c.normalized_nets:
            both = jnp.concatenate([obs, self.prepare_obs(state, batch.next_obs,
                                                          c.policy_obs_key)])
            dist, variables = self.policy(variables, both, train=True)
            dist = jax.tree.map(lambda x: x[: obs.shape[0]], dist)
        else:
            dist, variables = self.policy(variables, obs)
        action, logp = dist.sample_and_log_prob(key)
        q_out, _ = self.apply_net(self.critic_net, state.params["critic"],
                                  self.prepare_obs(state, batch.obs, c.critic_obs_key), action)
        q = self.aggregate(self.q_values(q_out))
        loss = losses.sac_actor_loss(logp, q, jnp.exp(state.log_alpha))
        metrics = {"train/actor_loss": loss, "train/entropy": -logp.mean(), **dist.metrics()}
        return loss, (metrics, variables, logp)


def _flat(obs, key_name: str):
    return flatten_obs(obs, [key_name]) if isinstance(obs, dict) else obs
