"""PPO, faithful to Brax / MuJoCo Playground PPO (brax `training/agents/ppo`).

Sources: Schulman et al. 2017, "Proximal Policy Optimization Algorithms" (arXiv 1707.06347),
Eq. 7 (clipped surrogate); GAE from arXiv 1506.02438; brax `training/agents/ppo/{losses,
networks,train}.py` for the tanh-normal policy, observation normalization (before SGD by
default), reward scaling inside the loss, `0.5 * vf_coef` value weight and the one-sample
entropy estimate. Difference from Brax by default: truncation bootstraps from V(true final obs)
(`gae_mode="bootstrap"`); `gae_mode="brax"` masks truncated steps as Brax does.

`update` takes `Transition[T, B]` with `extras["raw_action"]` (pre-tanh `u`) and
`extras["log_prob"]`, normalizes observations, then runs `num_epochs` passes over
`num_minibatches` minibatches of whole length-T sub-trajectories (GAE per minibatch).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.engine.contract import AgentBase
from jaxrl.engine.types import EnvSpec, Transition
from jaxrl.learning import distributions, losses, optim, running_stats
from jaxrl.learning.networks import ACTIVATIONS, MLP, flatten_obs
from jaxrl.learning.returns import gae, gae_brax

HP_FIELDS = ("learning_rate", "gamma", "gae_lambda", "clipping_epsilon", "entropy_cost",
             "vf_coef", "reward_scaling")

HP_RANGES = {"learning_rate": (0.0, 1.0), "gamma": (0.0, 1.0), "gae_lambda": (0.0, 1.0),
              "clipping_epsilon": (0.0, 10.0), "entropy_cost": (0.0, 1e3), "vf_coef": (0.0, 1e3),
              "reward_scaling": (0.0, 1e6)}


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO settings. Float fields named in `HP_FIELDS` are traced (sweepable) defaults."""

    policy_hidden: tuple[int, ...] = (32, 32, 32, 32)
    """Policy MLP hidden widths (Brax/Playground DM Control: 32 x 4)."""
    value_hidden: tuple[int, ...] = (256, 256, 256, 256, 256)
    """Value MLP hidden widths (Brax/Playground: 256 x 5)."""
    activation: str = "silu"
    """Hidden activation (silu = swish, as Brax)."""
    num_minibatches: int = 32
    """Minibatches per epoch; each holds whole length-T sub-trajectories."""
    num_epochs: int = 16
    """Passes over the batch per update (Brax `num_updates_per_batch`)."""
    max_grad_norm: float | None = None
    """Global-norm gradient clipping; None disables it."""
    normalize_observations: bool = True
    """Running mean/std observation normalization (Welford)."""
    normalize_after_sgd: bool = False
    """Update the normalizer after SGD instead of before (Brax order is before)."""
    obs_std_eps: float = 0.0
    """Added to the running variance before the square root (Brax `std_eps`); a small value
    keeps near-constant observation entries from being blown up early in training."""
    obs_clip: float | None = None
    """Clip normalized observations to [-obs_clip, obs_clip]; None (Brax) does not clip."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over the run (as CleanRL's `anneal_lr`)."""
    desired_kl: float | None = None
    """Adaptive learning rate (RSL-RL style): after each minibatch step
    `lr /= 1.5` if KL > 2 desired_kl, `lr *= 1.5` if KL < desired_kl / 2, within [1e-5, 1e-2].
    None keeps the learning rate fixed."""
    gae_mode: str = "bootstrap"
    """`bootstrap`: V(final obs) at truncation; `brax`: mask truncated steps (parity)."""
    policy_obs_key: str = "state"
    """Key read by the policy when observations are dicts."""
    value_obs_key: str = "state"
    """Key read by the value net when observations are dicts (`privileged_state` for
    Playground locomotion)."""
    min_std: float = 1e-3
    """Floor added to `softplus` of the policy scale."""
    learning_rate: float = 1e-3
    """Adam step size."""
    gamma: float = 0.995
    """Discount factor (Brax `discounting`)."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clipping_epsilon: float = 0.3
    """PPO ratio clip."""
    entropy_cost: float = 1e-2
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss coefficient; the loss is `0.5 * vf_coef * mean((G - V)^2)` as in Brax."""
    reward_scaling: float = 10.0
    """Rewards are multiplied by this inside the loss (Brax: 10 for DM Control, 1 for
    locomotion; the CPU preset uses 1)."""


@struct.dataclass(kw_only=True)
class PPOState:
    params: dict
    opt_state: object
    obs_stats: running_stats.RunningStats
    hp: dict
    learning_rate: jax.Array
    num_updates: jax.Array


@dataclasses.dataclass(frozen=True)
class PPO(AgentBase):
    """Proximal Policy Optimization with a tanh-normal policy (on-policy)."""

    config: PPOConfig
    HP_FIELDS: ClassVar = HP_FIELDS
    HP_RANGES: ClassVar = HP_RANGES
    on_policy: ClassVar[bool] = True

    def validate(self) -> None:
        """Raises ValueError before compiling when the batch layout does not divide."""
        c = self.config
        if c.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}; got "
                             f"{c.activation!r}.")
        if c.gae_mode not in ("bootstrap", "brax"):
            raise ValueError(f"gae_mode must be 'bootstrap' or 'brax', got {c.gae_mode!r}.")
        if c.num_minibatches <= 0 or c.num_epochs <= 0:
            raise ValueError("num_minibatches and num_epochs must be positive.")
        super().validate()
        batch = self.train.num_envs * self.train.unrolls_per_update
        if batch % c.num_minibatches:
            raise ValueError(
                f"num_envs * unrolls_per_update = {batch} trajectories per update is not "
                f"divisible by num_minibatches = {c.num_minibatches}: change num_envs, "
                "unrolls_per_update or num_minibatches.")

    @property
    def _nets(self):
        c = self.config
        policy = MLP(tuple(c.policy_hidden) + (2 * self.spec.action_size,), c.activation)
        return policy, MLP(tuple(c.value_hidden) + (1,), c.activation)

    def init(self, key, hp) -> PPOState:
        obs = _zeros_obs(self.spec)
        policy, value = self._nets
        k1, k2 = jax.random.split(key)
        params = {"policy": policy.init(k1, self._policy_in(obs)),
                  "value": value.init(k2, self._value_in(obs))}
        opt = optim.make_optimizer(self.config.max_grad_norm)
        hp = {k: jnp.asarray(v, jnp.float32) for k, v in hp.items()}
        return PPOState(params=params, opt_state=opt.init(params),
                        obs_stats=running_stats.init(obs),
                        hp=hp, learning_rate=hp["learning_rate"],
                        num_updates=jnp.zeros((), jnp.int32))

    def _policy_in(self, obs):
        return flatten_obs(obs, [self.config.policy_obs_key] if isinstance(obs, dict) else None)

    def _value_in(self, obs):
        return flatten_obs(obs, [self.config.value_obs_key] if isinstance(obs, dict) else None)

    def _normalize(self, obs_stats, obs):
        if not self.config.normalize_observations:
            return obs
        out = running_stats.normalize(obs_stats, obs, self.config.obs_std_eps)
        clip = self.config.obs_clip
        return out if clip is None else jax.tree.map(lambda x: jnp.clip(x, -clip, clip), out)

    def policy(self, policy_params, obs) -> distributions.TanhGaussian:
        """The tanh-Gaussian policy for normalized observations `obs`."""
        raw = self._nets[0].apply(policy_params, self._policy_in(obs))
        loc, scale = distributions.params(raw, self.config.min_std)
        return distributions.TanhGaussian(loc=loc, scale=scale)

    def act(self, state: PPOState, obs, key, deterministic: bool = False):
        """Action in [-1, 1] `[N, A]`; extras `raw_action` (pre-tanh u) and `log_prob`."""
        policy = self.policy(state.params["policy"], self._normalize(state.obs_stats, obs))
        if deterministic:
            return policy.mode(), {}
        u = policy.sample_raw(key)
        return jnp.tanh(u), {"raw_action": u, "log_prob": policy.log_prob_raw(u)}

    def update(self, state: PPOState, traj: Transition, key):
        c = self.config
        obs_stats = state.obs_stats
        if c.normalize_observations and not c.normalize_after_sgd:
            obs_stats = running_stats.update(obs_stats, traj.obs)
        opt = optim.make_optimizer(c.max_grad_norm)
        loss_grad = jax.value_and_grad(self._loss, has_aux=True)

        def sgd_step(carry, xs):
            params, opt_state, lr = carry
            mb, k = xs
            (_, metrics), grads = loss_grad(params, obs_stats, mb, k, state.hp)
            params, opt_state = optim.apply(opt, opt_state, params, grads, lr)
            lr = self._adapt_lr(lr, metrics["train/approx_kl"])
            return (params, opt_state, lr), dict(metrics, **{"train/learning_rate": lr})

        def epoch(carry, k):
            k_perm, k_loss = jax.random.split(k)
            mbs = _minibatches(traj, k_perm, c.num_minibatches)
            keys = jax.random.split(k_loss, c.num_minibatches)
            return jax.lax.scan(sgd_step, carry, (mbs, keys))

        (params, opt_state, lr), metrics = jax.lax.scan(
            epoch, (state.params, state.opt_state, self._start_lr(state)),
            jax.random.split(key, c.num_epochs))
        if c.normalize_observations and c.normalize_after_sgd:
            obs_stats = running_stats.update(obs_stats, traj.obs)
        new = state.replace(params=params, opt_state=opt_state, obs_stats=obs_stats,
                            learning_rate=lr,
                            num_updates=state.num_updates + 1)
        return new, jax.tree.map(jnp.mean, metrics)

    def _start_lr(self, state: PPOState):
        if not self.config.anneal_lr:
            return state.learning_rate
        total = self.train.num_chunks * self.train.iterations_per_chunk
        # Clamped at 0: a run continued past its planned updates keeps a zero step size.
        return state.hp["learning_rate"] * jnp.maximum(1.0 - state.num_updates / total, 0.0)

    def _adapt_lr(self, lr, kl):
        target = self.config.desired_kl
        if target is None:
            return lr
        lr = jnp.where(kl > 2.0 * target, lr / 1.5, jnp.where(kl < 0.5 * target, lr * 1.5, lr))
        return jnp.clip(lr, 1e-5, 1e-2)

    def _loss(self, params, obs_stats, mb: Transition, key, hp):
        """Clipped surrogate + value MSE - entropy bonus on one minibatch `[T, M]`."""
        c = self.config
        value = self._nets[1]
        obs = self._normalize(obs_stats, mb.obs)
        next_obs = self._normalize(obs_stats, mb.next_obs)
        pi = self.policy(params["policy"], obs)
        values = value.apply(params["value"], self._value_in(obs))[..., 0]
        next_values = value.apply(params["value"], self._value_in(next_obs))[..., 0]
        rewards = mb.reward * hp["reward_scaling"]
        sg = jax.lax.stop_gradient
        if c.gae_mode == "brax":
            adv, targets = gae_brax(rewards, sg(values), sg(next_values[-1]), mb.terminated,
                                    mb.truncated, hp["gamma"], hp["gae_lambda"])
        else:
            adv, targets = gae(rewards, sg(values), sg(next_values), mb.terminated,
                               mb.truncated, hp["gamma"], hp["gae_lambda"])
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        logp = pi.log_prob_raw(mb.extras["raw_action"])
        policy_loss, metrics = losses.clipped_surrogate(logp, mb.extras["log_prob"], adv,
                                                        hp["clipping_epsilon"])
        v_loss = losses.value_loss(targets, values, hp["vf_coef"])
        entropy = pi.entropy(key).mean()
        total = policy_loss + v_loss - hp["entropy_cost"] * entropy
        metrics.update({"train/total_loss": total, "train/value_loss": v_loss,
                        "train/entropy": entropy, **pi.metrics()})
        return total, metrics


def _zeros_obs(spec: EnvSpec):
    if spec.obs_is_dict:
        return {k: jnp.zeros(v, jnp.float32) for k, v in spec.obs_shape.items()}
    return jnp.zeros(spec.obs_shape, jnp.float32)


def _minibatches(traj: Transition, key, num_minibatches: int) -> Transition:
    """Shuffles the B sub-trajectories of `[T, B]` -> `[M, T, B / M]` (whole trajectories)."""
    b = traj.reward.shape[1]
    perm = jax.random.permutation(key, b)

    def split(x):
        x = jnp.take(x, perm, axis=1)
        x = x.reshape((x.shape[0], num_minibatches, b // num_minibatches) + x.shape[2:])
        return jnp.swapaxes(x, 0, 1)

    return jax.tree.map(split, traj)
