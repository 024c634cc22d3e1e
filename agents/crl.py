"""CRL: contrastive RL for goal reaching without rewards, as in JaxGCRL (off-policy).

Sources: Eysenbach et al., "Contrastive Learning as Goal-Conditioned Reinforcement Learning"
(NeurIPS 2022, arXiv 2206.07568): the critic `f(s, a, g)` is a classifier between future
states of `(s, a)` and other goals, trained with InfoNCE, and the actor maximizes `f` for the
commanded goal; Bortkiewicz et al.,
"Accelerating Goal-Conditioned RL Algorithms and Research" (ICLR 2025, arXiv 2408.11052),
`MichalBortkiewicz/JaxGCRL` `jaxgcrl/agents/crl/{crl,losses,networks}.py` for the defaults
(256 x 2 swish encoders, representation 64, `distance` energy, logsumexp penalty 0.1, lr 3e-4,
target entropy `-0.5 |A|`, log-std in [-5, 2]).

Env contract: `obs = concat(state, goal)` with `EnvSpec.goal_indices` the state entries the goal
refers to (`state_dim = obs_dim - len(goal_indices)`), and `Transition.extras["traj_id"]`
(episode ids from `AutoReset`). The reward is never read.

Schedule: each `update` adds the chunk `Transition[T, N]` (with `traj_id`) to the replay buffer
in the state; once it holds `learning_starts` transitions it takes `G = utd_ratio * T`
gradient steps. Each step samples B transitions uniformly and, for each, a future state of the
same episode `k >= 1` steps ahead with `P(k) ∝ gamma^(k-1)` (`replay.sample_future`); the goal
is that state's `goal_indices` entries. Per step, as JaxGCRL: actor and temperature first (on
the relabeled goals), then the critic; no target networks and no TD. With `random_goals > 0`
that share of the actor's goals are other pairs' relabeled goals (Eysenbach et al.'s code,
`google-research/contrastive_rl` `learning.py`), so the actor also learns goals its own
trajectory did not reach.

Departure from JaxGCRL (default `sampling="pairs"`): it samples one window of
`episode_length` rows per env, relabels every row and scans over all
`num_envs * (episode_length - 1) / batch_size` batches, which ties `num_envs`,
`episode_length` and `batch_size` together by divisibility (JaxGCRL #54). Here pairs are drawn
independently and the replay ratio is `utd_ratio`, so no such constraint exists; JaxGCRL's
ratio is `utd_ratio = num_envs * (episode_length - 1) / (batch_size * T)`.
`sampling="windows"` builds JaxGCRL's batches instead (`replay.sample_windows`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.agents.common.contrastive import CRITIC_KEYS, ContrastiveConfig, ContrastiveNets
from jaxrl.agents.common.offpolicy import OffPolicyLoop, ReplayConfig
from jaxrl.engine.checks import check_choice
from jaxrl.engine.contract import AgentBase
from jaxrl.learning import contrastive, losses, optim, replay

SAMPLINGS = ("pairs", "windows")
HP_FIELDS = ("learning_rate", "critic_learning_rate", "alpha_learning_rate", "gamma")
HP_RANGES = {"learning_rate": (0.0, 1.0), "critic_learning_rate": (0.0, 1.0),
              "alpha_learning_rate": (0.0, 1.0), "gamma": (1e-6, 1.0)}


@dataclasses.dataclass(frozen=True)
class CRLConfig(ContrastiveConfig, ReplayConfig):
    """CRL settings (JaxGCRL defaults): the contrastive networks' and the replay's
    (`batch_size` pairs per gradient step: the negatives are the other B - 1 goals). Float
    fields named in `HP_FIELDS` are traced."""

    utd_ratio: float = 1.0
    """Gradient steps per vectorized env step (`utd_ratio * unroll_length` per update)."""
    horizon: int | None = None
    """Longest goal offset in steps, and the window length of `sampling="windows"`; None: the
    episode length."""
    sampling: str = "pairs"
    """`pairs`: every gradient step draws its B transitions independently from the whole
    buffer (`replay.sample_future`); `windows`: JaxGCRL's batches, cut once per update from
    windows of `horizon` consecutive rows, one per env (`replay.sample_windows`)."""
    target_entropy_scale: float = 0.5
    """Target entropy `-scale * action_size` for the temperature (JaxGCRL: 0.5)."""
    learning_rate: float = 3e-4
    """Actor Adam step size."""
    critic_learning_rate: float = 3e-4
    """Critic (both encoders) Adam step size."""
    alpha_learning_rate: float = 3e-4
    """Temperature Adam step size (initial alpha 1, as JaxGCRL's `log_alpha = 0`)."""
    gamma: float = 0.99
    """Discount of the geometric future-goal relabeling."""
    random_goals: float = 0.0
    """Share of each actor batch whose goal is another transition's relabeled future state
    instead of its own (`contrastive.mix_random_goals`; Eysenbach et al. 2022's
    `random_goals`, 0.5 in their code). 0: only own future states, as JaxGCRL."""
    lr_schedule: str = "constant"
    """`constant`, or `cosine`: the actor's and the critic's step sizes decay over the run's
    gradient steps to `lr_final_fraction` of their rates (`optim.cosine_decay`)."""
    lr_final_fraction: float = 0.1
    """Final step-size fraction of the cosine schedule."""
    log_det_epsilon: float = 0.0
    """`eps` in the actor loss's tanh log-det `log(1 - tanh(u)^2 + eps)`
    (`distributions.tanh_log_det_eps`); JaxGCRL's is 1e-6 (`jaxgcrl/agents/crl/losses.py`).
    0: the exact log-det (`distributions.tanh_log_det`)."""
    actor_init_scale: float = 1 / 3
    """Actor kernel init `variance_scaling(scale, fan_in, uniform)`: JaxGCRL's 1/3
    (`jaxgcrl/agents/crl/networks.py`); 1.0 is lecun uniform (measurements in
    `benchmarks/RESULTS.md`, "Attribution of the gap")."""


@struct.dataclass(kw_only=True)
class CRLState:
    params: dict
    """`{"actor", "sa_encoder", "g_encoder"}` flax variables, and `log_temperature` (cosine)."""
    opt_state: dict
    log_alpha: jax.Array
    buffer: replay.ReplayState
    hp: dict
    num_updates: jax.Array
    """Gradient steps taken so far (int32)."""


@dataclasses.dataclass(frozen=True)
class CRL(AgentBase):
    """Contrastive RL (off-policy, goal-conditioned, reward-free)."""

    config: CRLConfig
    HP_FIELDS: ClassVar = HP_FIELDS
    HP_RANGES: ClassVar = HP_RANGES
    on_policy: ClassVar[bool] = False
    has_replay: ClassVar[bool] = True
    goal_conditioned: ClassVar[bool] = True

    @property
    def nets(self) -> ContrastiveNets:
        """The actor and contrastive critic networks and the critic step."""
        return ContrastiveNets(self.config, self.spec)

    @property
    def replay(self) -> OffPolicyLoop:
        """The replay schedule; the buffer keeps each transition's `traj_id` (relabeling)."""
        return OffPolicyLoop(self.config, self.spec, self.train, ("traj_id",))

    @property
    def horizon(self) -> int:
        return int(self.config.horizon or self.spec.episode_length)

    def validate(self) -> None:
        """Raises ValueError (before compiling) for a non-goal env or inconsistent sizes."""
        super().validate()
        self.nets.validate()
        self.replay.validate()
        c = self.config
        if not math.isfinite(c.target_entropy_scale):
            raise ValueError(f"target_entropy_scale must be finite, got {c.target_entropy_scale}.")
        if c.horizon is not None and c.horizon < 1:
            raise ValueError(f"horizon must be >= 1 or None, got {c.horizon}.")
        if not 0.0 <= c.log_det_epsilon < 1.0:
            raise ValueError(f"log_det_epsilon must be in [0, 1), got {c.log_det_epsilon}.")
        if not 0.0 <= c.random_goals <= 1.0:
            raise ValueError(f"random_goals must be in [0, 1], got {c.random_goals}.")
        check_choice("lr_schedule", c.lr_schedule, OffPolicyLoop.LR_SCHEDULES)
        if not 0.0 <= c.lr_final_fraction <= 1.0:
            raise ValueError(f"lr_final_fraction must be in [0, 1], got {c.lr_final_fraction}.")
        if c.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}; got {c.sampling!r}.")
        if c.sampling == "windows" and self.horizon < 2:
            raise ValueError(f"sampling='windows' needs horizon >= 2, got {self.horizon}.")
        if c.sampling == "windows" and c.learning_starts < self.horizon * self.train.num_envs:
            raise ValueError(
                f"sampling='windows' cuts windows of {self.horizon} rows per env: learning_starts "
                f"must be at least horizon * num_envs = {self.horizon * self.train.num_envs}, "
                f"got {c.learning_starts}.")

    def init(self, key, hp) -> CRLState:
        params = self.nets.init_params(key)
        opt = optim.make_optimizer()
        return CRLState(
            params=params,
            opt_state={"actor": opt.init(params["actor"]),
                       "critic": opt.init({k: params[k] for k in CRITIC_KEYS}),
                       "alpha": opt.init(jnp.zeros(()))},
            log_alpha=jnp.zeros(()),
            buffer=self.replay.empty_replay(),
            hp={k: jnp.asarray(v, jnp.float32) for k, v in hp.items()},
            num_updates=jnp.zeros((), jnp.int32))

    def act(self, state: CRLState, obs, key, deterministic: bool = False):
        """Action in [-1, 1] `[N, A]` from `pi(. | s, g)` on `obs = [s, g]`; `tanh(mu)` when
        deterministic."""
        policy = self.nets.policy(state.params["actor"], obs)
        if deterministic:
            return policy.mode(), {}
        return jnp.tanh(policy.sample_raw(key)), {}

    def update(self, state: CRLState, traj, key):
        """The UTD loop (`OffPolicyLoop.update`) over this agent's gradient steps."""
        return self.replay.update(state, traj, key, step_inputs=self.step_inputs,
                                  gradient_step=self.gradient_step)

    def step_inputs(self, state: CRLState, key):
        """One key per gradient step (`pairs`: each step samples and relabels its own batch);
        with `windows`, also the update's G batches `[G, B, ...]` (`replay.sample_windows`)."""
        g = self.replay.updates_per_call
        if self.config.sampling == "pairs":
            return jax.random.split(key, g)
        k_batches, k_steps = jax.random.split(key)
        batches = replay.sample_windows(state.buffer, k_batches, g, self.config.batch_size,
                                        window=self.horizon, gamma=state.hp["gamma"])
        return batches, jax.random.split(k_steps, g)

    def gradient_step(self, state: CRLState, inputs):
        """Relabel a batch (or take the update's next one); actor and temperature step, then
        critic step (JaxGCRL order)."""
        if self.config.sampling == "pairs":
            k_sample, k_actor = jax.random.split(inputs)
            batch = replay.sample_future(state.buffer, k_sample, self.config.batch_size,
                                         gamma=state.hp["gamma"], horizon=self.horizon)
        else:
            batch, key = inputs
            k_actor = jax.random.split(key)[1]
        s, goal = self.nets.split_obs(batch.obs)[0], self.nets.goal_of(batch.future_obs)
        actor_goal = contrastive.mix_random_goals(goal, self.config.random_goals)
        state, actor_metrics = self._actor_step(state, s, actor_goal, k_actor)
        params, opt_critic, metrics = self.nets.critic_step(
            state.params, state.opt_state["critic"], s, batch.action, goal,
            self.learning_rate(state, "critic_learning_rate"))
        state = state.replace(params=params, opt_state=dict(state.opt_state, critic=opt_critic),
                              num_updates=state.num_updates + 1)
        metrics.update(actor_metrics)
        metrics["train/goal_offset"] = batch.offset.mean().astype(jnp.float32)
        return state, metrics

    def learning_rate(self, state: CRLState, name: str):
        """The step size `hp[name]` now: constant, or its cosine decay over the run's gradient
        steps (`lr_schedule`)."""
        c = self.config
        return self.replay.scheduled_rate(state.hp[name], state.num_updates, c.lr_schedule,
                                          c.lr_final_fraction)

    def _actor_step(self, state: CRLState, s, goal, key):
        opt = optim.make_optimizer()
        (_, (metrics, logp)), grads = jax.value_and_grad(self._actor_loss, has_aux=True)(
            state.params["actor"], state, s, goal, key)
        actor, opt_actor = optim.apply(opt, state.opt_state["actor"], state.params["actor"],
                                       grads, self.learning_rate(state, "learning_rate"))
        target = -self.config.target_entropy_scale * self.spec.action_size
        log_alpha, opt_alpha = losses.temperature_step(
            opt, state.opt_state["alpha"], state.log_alpha, logp, target,
            state.hp["alpha_learning_rate"])
        state = state.replace(params=dict(state.params, actor=actor), log_alpha=log_alpha,
                              opt_state=dict(state.opt_state, actor=opt_actor, alpha=opt_alpha))
        return state, dict(metrics, **{"train/alpha": jnp.exp(log_alpha)})

    def _actor_loss(self, actor, state: CRLState, s, goal, key):
        """`mean(alpha log pi(a | s, g) - f(s, a, g))`, `a ~ pi` reparameterized; the critic
        parameters get no gradient from it."""
        policy = self.nets.policy(actor, jnp.concatenate([s, goal], -1))
        u = policy.sample_raw(key)
        logp = policy.log_prob_raw(u, self.config.log_det_epsilon)
        critic = jax.lax.stop_gradient({k: state.params[k] for k in CRITIC_KEYS})
        f = self.nets.q_value(critic, s, jnp.tanh(u), goal)
        loss = jnp.mean(jnp.exp(state.log_alpha) * logp - f)
        return loss, ({"train/actor_loss": loss, "train/entropy": -logp.mean(),
                       **policy.metrics()}, logp)
