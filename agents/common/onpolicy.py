"""The on-policy actor-critic core: the PPO machinery that PPO and the flow policies share.

Sources: Schulman et al. 2017 (arXiv 1707.06347) for the loop (epochs x minibatches of one
rollout); GAE from arXiv 1506.02438; brax `training/agents/ppo/{train,losses}.py` for
observation normalization before SGD, reward scaling inside the loss, the `0.5 * vf_coef` value
weight and minibatches of whole sub-trajectories; RSL-RL's adaptive learning rate
(`desired_kl`).

`OnPolicyLoop` is a helper an agent holds (composition, not a base class): the agent gives it
its policy (`init_policy(key, policy_obs) -> params` and `policy_objective(policy_params, obs,
mb, adv, key, hp) -> (policy loss, extra loss, metrics)`), and it owns the value net, the
normalizer and the SGD loop. `update` takes `Transition[T, B]`, updates the observation
normalizer (before SGD by default), then runs `num_epochs` passes over `num_minibatches`
minibatches of whole length-T sub-trajectories; per minibatch it computes values, GAE (per
minibatch, as Brax) and normalized advantages, and adds the agent's policy objective.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.engine.types import EnvSpec, Transition
from jaxrl.learning import losses, optim, running_stats
from jaxrl.learning.networks import ACTIVATIONS, MLP, flatten_obs
from jaxrl.learning.returns import gae, gae_brax

HP_FIELDS = ("learning_rate", "gamma", "gae_lambda", "vf_coef", "reward_scaling")
HP_RANGES = {"learning_rate": (0.0, 1.0), "gamma": (0.0, 1.0), "gae_lambda": (0.0, 1.0),
             "vf_coef": (0.0, 1e3), "reward_scaling": (0.0, 1e6)}


@dataclasses.dataclass(frozen=True)
class OnPolicyConfig:
    """Settings of the on-policy loop, the value net and the normalizer (every on-policy
    actor-critic agent has them). Float fields named in the agent's `HP_FIELDS` are traced."""

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


@struct.dataclass(kw_only=True)
class OnPolicyState:
    params: dict
    """`{"policy": ..., "value": ...}` parameter pytrees."""
    opt_state: object
    obs_stats: running_stats.RunningStats
    hp: dict
    learning_rate: jax.Array
    """Current step size (annealed or adapted; float32)."""
    num_updates: jax.Array
    """Updates (rollouts) consumed so far (int32)."""


@dataclasses.dataclass(frozen=True)
class OnPolicyLoop:
    """The on-policy loop, value net and normalizer of an agent (see the module docstring).

    Attributes:
        config, spec, train: the agent's.
        init_policy: `(key, policy_obs [1, O]) -> policy params`.
        policy_objective: `(policy_params, obs [T, M, ...] normalized, mb: Transition[T, M],
            adv [T, M] normalized, key, hp) -> (policy loss, extra loss, metrics)`; the total
            loss is `policy + value + extra`.
    """

    config: OnPolicyConfig
    spec: EnvSpec
    train: Any
    init_policy: Callable
    policy_objective: Callable

    def validate(self) -> None:
        """Raises ValueError before compiling for bad settings or a batch layout that does
        not divide."""
        c = self.config
        if c.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}; got "
                             f"{c.activation!r}.")
        if c.gae_mode not in ("bootstrap", "brax"):
            raise ValueError(f"gae_mode must be 'bootstrap' or 'brax', got {c.gae_mode!r}.")
        if c.num_minibatches <= 0 or c.num_epochs <= 0:
            raise ValueError("num_minibatches and num_epochs must be positive.")
        batch = self.train.num_envs * self.train.unrolls_per_update
        if batch % c.num_minibatches:
            raise ValueError(
                f"num_envs * unrolls_per_update = {batch} trajectories per update is not "
                f"divisible by num_minibatches = {c.num_minibatches}: change num_envs, "
                "unrolls_per_update or num_minibatches.")

    # ----- networks and state ------------------------------------------------------------
    @property
    def value_net(self):
        return MLP(tuple(self.config.value_hidden) + (1,), self.config.activation)

    def init(self, key, hp) -> OnPolicyState:
        obs = zeros_obs(self.spec)
        k1, k2 = jax.random.split(key)
        params = {"policy": self.init_policy(k1, self.policy_in(obs)),
                  "value": self.value_net.init(k2, self.value_in(obs))}
        opt = optim.make_optimizer(self.config.max_grad_norm)
        hp = {k: jnp.asarray(v, jnp.float32) for k, v in hp.items()}
        return OnPolicyState(params=params, opt_state=opt.init(params),
                             obs_stats=running_stats.init(obs),
                             hp=hp, learning_rate=hp["learning_rate"],
                             num_updates=jnp.zeros((), jnp.int32))

    def with_hp(self, state: OnPolicyState, hp) -> OnPolicyState:
        """`state` with new float hyperparameters; a new `learning_rate` also scales the
        current step size (adapted with `desired_kl`, else the rate itself) by new / old."""
        return optim.replace_hp(state, hp)

    def policy_in(self, obs):
        return flatten_obs(obs, [self.config.policy_obs_key] if isinstance(obs, dict) else None)

    def value_in(self, obs):
        return flatten_obs(obs, [self.config.value_obs_key] if isinstance(obs, dict) else None)

    def normalize(self, obs_stats, obs):
        """Normalized (and clipped, with `obs_clip`) observations, as the networks see them."""
        if not self.config.normalize_observations:
            return obs
        out = running_stats.normalize(obs_stats, obs, self.config.obs_std_eps)
        clip = self.config.obs_clip
        return out if clip is None else jax.tree.map(lambda x: jnp.clip(x, -clip, clip), out)

    # ----- the update --------------------------------------------------------------------
    def update(self, state: OnPolicyState, traj: Transition, key):
        c = self.config
        obs_stats = state.obs_stats
        if c.normalize_observations and not c.normalize_after_sgd:
            obs_stats = running_stats.update(obs_stats, traj.obs)
        opt = optim.make_optimizer(c.max_grad_norm)
        loss_grad = jax.value_and_grad(self.loss, has_aux=True)

        def sgd_step(carry, xs):
            params, opt_state, lr = carry
            mb, k = xs
            (_, metrics), grads = loss_grad(params, obs_stats, mb, k, state.hp)
            params, opt_state = optim.apply(opt, opt_state, params, grads, lr)
            lr = self._adapt_lr(lr, metrics["train/approx_kl"])
            return (params, opt_state, lr), dict(metrics, **{"train/learning_rate": lr})

        def epoch(carry, k):
            k_perm, k_loss = jax.random.split(k)
            mbs = minibatches(traj, k_perm, c.num_minibatches)
            keys = jax.random.split(k_loss, c.num_minibatches)
            return jax.lax.scan(sgd_step, carry, (mbs, keys))

        (params, opt_state, lr), metrics = jax.lax.scan(
            epoch, (state.params, state.opt_state, self._start_lr(state)),
            jax.random.split(key, c.num_epochs))
        if c.normalize_observations and c.normalize_after_sgd:
            obs_stats = running_stats.update(obs_stats, traj.obs)
        new = state.replace(params=params, opt_state=opt_state, obs_stats=obs_stats,
                            learning_rate=lr, num_updates=state.num_updates + 1)
        return new, jax.tree.map(jnp.mean, metrics)

    def _start_lr(self, state: OnPolicyState):
        if not self.config.anneal_lr:
            return state.learning_rate
        total = self.train.num_chunks * self.train.iterations_per_chunk
        # Clamped at 0: a run continued past its planned updates keeps a zero step size.
        return state.hp["learning_rate"] * jnp.maximum(1.0 - state.num_updates / total, 0.0)

    def _adapt_lr(self, lr, kl):
        target = self.config.desired_kl
        return lr if target is None else optim.adapt_to_kl(lr, kl, target)

    def advantages(self, values, next_values, mb: Transition, hp):
        """GAE advantages and value targets `[T, M]` (constants) of scaled rewards."""
        rewards = mb.reward * hp["reward_scaling"]
        sg = jax.lax.stop_gradient
        if self.config.gae_mode == "brax":
            return gae_brax(rewards, sg(values), sg(next_values[-1]), mb.terminated,
                            mb.truncated, hp["gamma"], hp["gae_lambda"])
        return gae(rewards, sg(values), sg(next_values), mb.terminated, mb.truncated,
                   hp["gamma"], hp["gae_lambda"])

    def loss(self, params, obs_stats, mb: Transition, key, hp):
        """Policy objective + value MSE (+ the agent's extra terms) on a minibatch `[T, M]`:
        `(total loss, metrics)`."""
        obs = self.normalize(obs_stats, mb.obs)
        next_obs = self.normalize(obs_stats, mb.next_obs)
        values = self.value_net.apply(params["value"], self.value_in(obs))[..., 0]
        next_values = self.value_net.apply(params["value"], self.value_in(next_obs))[..., 0]
        adv, targets = self.advantages(values, next_values, mb, hp)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        policy_loss, extra, metrics = self.policy_objective(params["policy"], obs, mb, adv,
                                                            key, hp)
        v_loss = losses.value_loss(targets, values, hp["vf_coef"])
        total = policy_loss + v_loss + extra
        metrics.update({"train/total_loss": total, "train/value_loss": v_loss})
        return total, metrics


def zeros_obs(spec: EnvSpec):
    """A zero observation of one env (array or dict, as the env's)."""
    if spec.obs_is_dict:
        return {k: jnp.zeros(v, jnp.float32) for k, v in spec.obs_shape.items()}
    return jnp.zeros(spec.obs_shape, jnp.float32)


def minibatches(traj: Transition, key, num_minibatches: int) -> Transition:
    """Shuffles the B sub-trajectories of `[T, B]` -> `[M, T, B / M]` (whole trajectories)."""
    b = traj.reward.shape[1]
    perm = jax.random.permutation(key, b)

    def split(x):
        x = jnp.take(x, perm, axis=1)
        x = x.reshape((x.shape[0], num_minibatches, b // num_minibatches) + x.shape[2:])
        return jnp.swapaxes(x, 0, 1)

    return jax.tree.map(split, traj)
