"""CPPO: contrastive PPO, on-policy goal reaching without rewards. OUR RECONSTRUCTION.

Known from the source (Osman et al., "Self-Supervised On-Policy Reinforcement Learning via
Contrastive Proximal Policy Optimisation", arXiv 2605.13554, abstract only; no public code):
advantages come from contrastive Q-values and are optimized with PPO's clipped objective; no
reward, no replay buffer, no target networks; continuous and discrete actions. Everything else
below is our design and must be revisited when the method text
appears. Choices, each a config switch where it is one:

- Data: the loop's rollout `Transition[T, N]` with the env's commanded goals; policy
  `pi(a | s, g)`, a tanh-Gaussian on `obs = [s, g]` with log-std in [-2, 2] (CRL: [-5, 2]).
- Critic: CRL's `f(s, a, g) = energy(phi(s, a), psi(g))` (`agents/crl.py`, default `distance`
  energy, forward InfoNCE + 0.1 LSE penalty), trained only on the current rollout: for every
  step a future state of the same episode inside the rollout is the positive goal (geometric
  offset with discount `gamma`, `contrastive.rollout_future_index`, masked by `traj_id`), the
  other goals of the minibatch are the negatives. `critic_epochs` passes, each with fresh
  relabeling, over minibatches of `critic_batch_size` pairs. By CRL's theory `exp(f)` is
  proportional to the discounted occupancy of `g` under `pi`, i.e. an on-policy goal-reaching Q
  (up to a per-goal factor, which cancels in `A = Q - V`).
- Horizon: goals never lie beyond the rollout, so `unroll_length` bounds the horizon; use
  rollouts at least as long as the distances to reach (`PointMaze`: T = episode length).
- Advantage, computed once per update with the freshly fitted critic for the commanded goal:
  `A = Q(s, a, g) - V(s, g)` with `Q = f` (`q_space="log"`, default) or `exp(f)` ("exp"), and
  `V = mean_m Q(s, a'_m, g)` over `num_action_samples` actions `a'_m ~ pi(. | s, g)` of the
  behaviour policy (Monte Carlo; an exact sum for discrete actions is not built, every
  registered env is continuous). No GAE; advantages normalized per minibatch, as PPO.
- Order per update: fit the critic, compute advantages, then `num_epochs` x `num_minibatches`
  PPO steps (clip `clipping_epsilon`, entropy bonus `entropy_cost`) over the flattened steps.
- Multi-agent (centralized critic) is out of scope.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.agents.common.contrastive import CRITIC_KEYS, ContrastiveConfig, ContrastiveNets
from jaxrl.engine.contract import AgentBase
from jaxrl.engine.types import Transition
from jaxrl.learning import contrastive, losses, optim

HP_FIELDS = ("learning_rate", "critic_learning_rate", "gamma", "clipping_epsilon",
             "entropy_cost")
HP_RANGES = {"learning_rate": (0.0, 1.0), "critic_learning_rate": (0.0, 1.0),
              "gamma": (1e-6, 1.0), "clipping_epsilon": (0.0, 10.0), "entropy_cost": (0.0, 1e3)}


@dataclasses.dataclass(frozen=True)
class CPPOConfig(ContrastiveConfig):
    """CPPO settings (our reconstruction). Float fields named in `HP_FIELDS` are traced."""

    critic_epochs: int = 4
    """Passes over the rollout fitting the critic (fresh relabeling each pass)."""
    critic_batch_size: int = 256
    """Pairs per critic step (negatives: the other goals of the minibatch)."""
    num_epochs: int = 4
    """PPO passes over the rollout per update."""
    num_minibatches: int = 8
    """PPO minibatches per pass (the `T * N` steps are shuffled and split evenly)."""
    num_action_samples: int = 8
    """Policy samples M for the baseline `V(s, g) = mean_m Q(s, a'_m, g)`."""
    q_space: str = "log"
    """`log`: Q = f (the critic's logit); `exp`: Q = exp(f) (occupancy ratio scale)."""
    max_grad_norm: float | None = 1.0
    """Global-norm clipping of the policy gradient; None disables it."""
    learning_rate: float = 3e-4
    """Policy Adam step size."""
    critic_learning_rate: float = 3e-4
    """Critic Adam step size."""
    gamma: float = 0.99
    """Discount of the geometric future-goal relabeling inside the rollout."""
    clipping_epsilon: float = 0.2
    """PPO ratio clip."""
    desired_kl: float | None = None
    """Adaptive policy step size (RSL-RL, `optim.adapt_to_kl`): after every PPO minibatch step
    the step size is divided by 1.5 when the minibatch's approximate KL exceeds twice this
    value and multiplied by 1.5 below half of it, within [1e-5, 1e-2]; it starts at
    `learning_rate` and carries over between updates. None keeps `learning_rate`."""
    entropy_cost: float = 1e-2
    """Entropy bonus weight."""
    log_std_min: float = -2.0
    """Lower bound of the policy's log-std; -2 (not CRL's -5) keeps the std from collapsing in a
    few updates (numbers in `benchmarks/RESULTS.md`); the CPPO maze presets raise it to -1, where
    -2 still collapsed on some seeds. The eval policy is `tanh(mu)`."""


@struct.dataclass(kw_only=True)
class CPPOState:
    params: dict
    """`{"actor", "sa_encoder", "g_encoder", "log_temperature"}` flax variables."""
    opt_state: dict
    hp: dict
    learning_rate: jax.Array
    """The policy's current step size (float32): `hp["learning_rate"]`, or adapted with
    `desired_kl`."""
    num_updates: jax.Array
    """Updates (rollouts) so far (int32)."""


@dataclasses.dataclass(frozen=True)
class CPPO(AgentBase):
    """Contrastive PPO (on-policy, goal-conditioned, reward-free); our reconstruction."""

    config: CPPOConfig
    HP_FIELDS: ClassVar = HP_FIELDS
    HP_RANGES: ClassVar = HP_RANGES
    on_policy: ClassVar[bool] = True
    goal_conditioned: ClassVar[bool] = True

    @property
    def nets(self) -> ContrastiveNets:
        """The actor and contrastive critic networks and the critic step."""
        return ContrastiveNets(self.config, self.spec)

    @property
    def steps_per_update(self) -> int:
        return self.train.unroll_length * self.train.unrolls_per_update * self.train.num_envs

    def validate(self) -> None:
        """Raises ValueError (before compiling) for a non-goal env or a batch that does not
        divide."""
        super().validate()
        self.nets.validate()
        c = self.config
        if c.q_space not in ("log", "exp"):
            raise ValueError(f"q_space must be 'log' or 'exp', got {c.q_space!r}.")
        for name in ("critic_epochs", "critic_batch_size", "num_epochs", "num_minibatches",
                     "num_action_samples"):
            if getattr(c, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(c, name)}.")
        if c.desired_kl is not None and not (c.desired_kl > 0 and math.isfinite(c.desired_kl)):
            raise ValueError(f"desired_kl must be positive and finite (or None for a fixed "
                             f"step size), got {c.desired_kl}.")
        if c.max_grad_norm is not None and not (c.max_grad_norm > 0 and
                                                 math.isfinite(c.max_grad_norm)):
            raise ValueError(f"max_grad_norm must be positive and finite (or None to disable "
                             f"clipping), got {c.max_grad_norm}.")
        steps = self.steps_per_update
        if steps % c.num_minibatches:
            raise ValueError(f"num_envs * unroll_length * unrolls_per_update = {steps} steps "
                             f"per update is not divisible by num_minibatches = "
                             f"{c.num_minibatches}: change one of them.")
        if c.critic_batch_size > steps:
            raise ValueError(f"critic_batch_size = {c.critic_batch_size} is larger than the "
                             f"{steps} steps of one update: lower it or raise num_envs.")

    def init(self, key, hp) -> CPPOState:
        params = self.nets.init_params(key)
        hp = {k: jnp.asarray(v, jnp.float32) for k, v in hp.items()}
        return CPPOState(
            params=params,
            opt_state={"actor": self._actor_opt.init(params["actor"]),
                       "critic": optim.make_optimizer().init({k: params[k] for k in CRITIC_KEYS})},
            hp=hp, learning_rate=hp["learning_rate"], num_updates=jnp.zeros((), jnp.int32))

    def with_hp(self, state: CPPOState, hp) -> CPPOState:
        """`state` with new float hyperparameters; a new `learning_rate` scales an adapted
        step size by new / old (`optim.rescale_rate`)."""
        return optim.replace_hp(state, hp)

    @property
    def _actor_opt(self):
        return optim.make_optimizer(self.config.max_grad_norm)

    def act(self, state: CPPOState, obs, key, deterministic: bool = False):
        """Action in [-1, 1] `[N, A]`; extras `raw_action` (pre-tanh u) and `log_prob`."""
        policy = self.nets.policy(state.params["actor"], obs)
        if deterministic:
            return policy.mode(), {}
        u = policy.sample_raw(key)
        return jnp.tanh(u), {"raw_action": u, "log_prob": policy.log_prob_raw(u)}

    def update(self, state: CPPOState, traj: Transition, key):
        k_critic, k_adv, k_ppo = jax.random.split(key, 3)
        params, opt_critic, metrics = self._fit_critic(state, traj, k_critic)
        adv = self.advantages(params, traj.obs, traj.action, k_adv)
        flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]),
                            {"obs": traj.obs, "u": traj.extras["raw_action"],
                             "logp": traj.extras["log_prob"], "adv": adv})
        (actor, opt_actor, lr), ppo_metrics = self._ppo_epochs(state, params["actor"], flat,
                                                                k_ppo)
        state = state.replace(params=dict(params, actor=actor),
                              opt_state={"actor": opt_actor, "critic": opt_critic},
                              learning_rate=lr, num_updates=state.num_updates + 1)
        metrics.update(ppo_metrics)
        metrics["train/advantage_std"] = adv.std()
        return state, metrics

    def _fit_critic(self, state: CPPOState, traj: Transition, key):
        """`critic_epochs` passes of contrastive critic steps on goals relabeled in the rollout."""
        c = self.config
        n = traj.reward.shape[1]
        s = self.nets.split_obs(traj.obs)[0]
        per_epoch = self.steps_per_update // c.critic_batch_size

        def epoch(carry, k):
            params, opt_state = carry
            k_rel, k_perm = jax.random.split(k)
            rows = contrastive.rollout_future_index(k_rel, traj.extras["traj_id"],
                                                    state.hp["gamma"])
            goal = self.nets.goal_of(traj.next_obs[rows, jnp.arange(n)[None, :]])
            keep = jax.random.permutation(k_perm, self.steps_per_update)[
                : per_epoch * c.critic_batch_size]
            batches = jax.tree.map(
                lambda x: x.reshape((-1,) + x.shape[2:])[keep].reshape(
                    (per_epoch, c.critic_batch_size) + x.shape[2:]), (s, traj.action, goal))

            def step(carry, b):
                params, opt_state, metrics = self.nets.critic_step(
                    *carry, *b, state.hp["critic_learning_rate"])
                return (params, opt_state), metrics

            return jax.lax.scan(step, (params, opt_state), batches)

        (params, opt_state), metrics = jax.lax.scan(
            epoch, (state.params, state.opt_state["critic"]),
            jax.random.split(key, c.critic_epochs))
        return params, opt_state, jax.tree.map(jnp.mean, metrics)

    def advantages(self, params, obs, action, key):
        """`A = Q(s, a, g) - mean_m Q(s, a'_m, g)` for the commanded goal `g` of `obs`.

        Args:
            params: agent params (actor and critic).
            obs: float32 `[..., obs_dim]` observations `[s, g]`.
            action: float32 `[..., A]` actions taken, in [-1, 1].
            key: PRNG key for the `num_action_samples` baseline actions `a'_m ~ pi(. | s, g)`.

        Returns:
            float32 `[...]` advantages (Q in the space of `q_space`).
        """
        critic = {k: params[k] for k in CRITIC_KEYS}
        s, goal = self.nets.split_obs(obs)
        q = self.nets.q_value(critic, s, action, goal)
        policy = self.nets.policy(params["actor"], obs)
        m = self.config.num_action_samples
        u = policy.loc + policy.scale * jax.random.normal(key, (m,) + policy.loc.shape)
        q_pi = self.nets.q_value(critic, jnp.broadcast_to(s, (m,) + s.shape), jnp.tanh(u),
                            jnp.broadcast_to(goal, (m,) + goal.shape))
        return baseline_advantage(q, q_pi, self.config.q_space)

    def _ppo_epochs(self, state: CPPOState, actor, flat, key):
        c, opt = self.config, self._actor_opt
        size = self.steps_per_update // c.num_minibatches
        grad_fn = jax.value_and_grad(self._policy_loss, has_aux=True)

        def sgd(carry, xs):
            actor, opt_state, lr = carry
            mb, k = xs
            (_, metrics), grads = grad_fn(actor, mb, k, state.hp)
            actor, opt_state = optim.apply(opt, opt_state, actor, grads, lr)
            if c.desired_kl is not None:
                lr = optim.adapt_to_kl(lr, metrics["train/approx_kl"], c.desired_kl)
                metrics = dict(metrics, **{"train/learning_rate": lr})
            return (actor, opt_state, lr), metrics

        def epoch(carry, k):
            k_perm, k_loss = jax.random.split(k)
            perm = jax.random.permutation(k_perm, self.steps_per_update)
            mbs = jax.tree.map(lambda x: x[perm].reshape((c.num_minibatches, size) + x.shape[1:]),
                               flat)
            return jax.lax.scan(sgd, carry, (mbs, jax.random.split(k_loss, c.num_minibatches)))

        carry, metrics = jax.lax.scan(epoch, (actor, state.opt_state["actor"],
                                              state.learning_rate),
                                      jax.random.split(key, c.num_epochs))
        return carry, jax.tree.map(jnp.mean, metrics)

    def _policy_loss(self, actor, mb, key, hp):
        """Clipped surrogate on normalized advantages minus the entropy bonus."""
        policy = self.nets.policy(actor, mb["obs"])
        adv = (mb["adv"] - mb["adv"].mean()) / (mb["adv"].std() + 1e-8)
        loss, metrics = losses.clipped_surrogate(policy.log_prob_raw(mb["u"]), mb["logp"], adv,
                                                 hp["clipping_epsilon"])
        entropy = policy.entropy(key).mean()
        total = loss - hp["entropy_cost"] * entropy
        return total, dict(metrics, **{"train/entropy": entropy}, **policy.metrics())


def baseline_advantage(q: jax.Array, q_pi: jax.Array, q_space: str = "log") -> jax.Array:
    """`A = Q - V` with `V` the mean of `Q` over policy samples (axis 0 of `q_pi`).

    Args:
        q: float32 `[...]` critic logits `f(s, a, g)` of the taken actions.
        q_pi: float32 `[M, ...]` logits for M actions drawn from the policy.
        q_space: `log` uses `f` as Q; `exp` uses `exp(f)`.
    """
    if q_space == "exp":
        q, q_pi = jnp.exp(q), jnp.exp(q_pi)
    return q - q_pi.mean(axis=0)
