"""FastDSAC (variant A): a DSAC-T Gaussian return-distribution critic with constrained
exploration, on FastTD3 scaffolding (many parallel envs, several updates per env step).

Sources: Lu et al., "Enhancing Policy Plasticity via Constrained Exploration for Scalable
Humanoid Locomotion" (2026), `luge66/FastDSAC` `fast_dsac/{fastdsac_net,fastdsac}.py`; DSAC-T:
Duan et al., IEEE TPAMI 2025 (arXiv 2310.05858), `Jingliang-Duan/DSAC-v2` `dsac_v2.py`.

- Actor: its own head, an untanh'd Gaussian (`distributions.Gaussian`): `mu` clamped to
  [-1, 1], `sigma` (or log sigma, `std_bound_mode`) squashed into its range; behaviour
  `a = mu + sigma eps` (clipped to the action box by the env side); deterministic action `mu`.
- Target actions (the constraint): `a' = mu + c tanh(u - mu)`, `u ~ N(mu, sigma^2)`, so
  `a'` stays within `c = policy_noise` of the mean (`target_constraint="tanh"`, as released), or
  a Gaussian truncated to `[mu - c, mu + c]` (`"truncnorm"`).
- Critic: twin Gaussian heads `(Q_i, sigma_i)`. With `q' = min_i Qbar_i(s', a')`,
  `j = argmin`, `zbar = Qbar_j + clip(eps, -3, 3) sigmabar_j`:
  `y_q = r + gamma m (q' - alpha log pi(a'))` (expected-value substitution) and
  `y_z = r + gamma m (zbar - alpha log pi(a'))`; `wbar_i` is an EMA (`dsac_tau`) of the batch
  mean of `sigma_i`; `y_zb = Qhat_i + clip(y_z - Qhat_i, -3 wbar_i, 3 wbar_i)`; the loss is the
  DSAC-T "original" form `dsac_t_loss` with `b = dsac_b`.
- Choices: no target actor (the released fork has none; target actions come from the online
  actor); the actor loss samples plain reparameterized Gaussian actions; `std_bound_mode`
  `sigma` bounds sigma to [1e-3, 0.4] (default) and `as_released` bounds log sigma to
  [0.001, 0.4] as the release does (sigma in [1.001, 1.49]: a much wider policy than the
  paper's text suggests).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.agents.common.sac_config import SACCoreConfig
from jaxrl.agents.common.sac_core import SACState, SoftActorCritic
from jaxrl.engine.checks import check_choice
from jaxrl.learning import distributions as dist


@dataclasses.dataclass(frozen=True)
class FastDSACConfig(SACCoreConfig):
    """FastDSAC-A settings (defaults: the released Playground G1/T1 values)."""

    actor_hidden: tuple[int, ...] = (512, 256)
    critic_hidden: tuple[int, ...] = (1024, 512)
    activation: str = "gelu"
    target_entropy: str = "action_dim"
    init_alpha: float = 1e-4
    policy_delay: int = 2
    tau: float = 0.1
    gamma: float = 0.97
    learning_rate: float = 3e-4
    alpha_learning_rate: float = 3e-4
    weight_decay: float = 0.1
    policy_noise: float = 1e-3
    """Truncation radius c of the target actions around the actor mean."""
    target_constraint: str = "tanh"
    """`tanh` (mean-centred tanh, as released) or `truncnorm` (truncated Gaussian)."""
    std_bound_mode: str = "sigma"
    """`sigma`: sigma in [1e-3, 0.4]; `as_released`: log sigma in [0.001, 0.4]."""
    dsac_b: float = 0.1
    """`b` of the DSAC-T original loss (keeps small sigmas from blowing up the step)."""
    dsac_tau: float = 0.005
    """EMA rate of `wbar` (mean predicted std)."""
    q_clip: float | None = None
    """Clamp the critic mean to [-q_clip, q_clip] (10 on Playground locomotion); None: off."""


def dsac_t_loss(q, sigma, q_hat, sigma_hat, y_q, y_zb, wbar, b):
    """DSAC-T "original" critic loss of one head (Duan et al., arXiv 2310.05858, with the `b`
    guard of `Jingliang-Duan/DSAC-v2` `dsac_v2.py`), averaged over the batch.

    `L = (wbar^2 + b) mean[-(y_q - Qhat)/(sigmahat^2 + b) Q
    - ((Qhat - y_zb)^2 - sigmahat^2)/(sigmahat^3 + b) sigma]`; hats are stop-gradient copies.
    For `b = 0` its gradients are the Gaussian NLL gradients times `wbar^2`.

    Args:
        q, sigma: `[B]` online mean and std (differentiated).
        q_hat, sigma_hat: `[B]` the same values, treated as constants.
        y_q, y_zb: `[B]` expected-value target and clipped sample target.
        wbar: scalar EMA of the mean std; b: float.
    """
    sg = jax.lax.stop_gradient
    q_hat, sigma_hat = sg(q_hat), sg(sigma_hat)
    mean_term = -(sg(y_q) - q_hat) / (sigma_hat ** 2 + b) * q
    std_term = -((q_hat - sg(y_zb)) ** 2 - sigma_hat ** 2) / (sigma_hat ** 3 + b) * sigma
    return (sg(wbar) ** 2 + b) * jnp.mean(mean_term + std_term, axis=-1)


def clip_sample_target(q_hat, y_z, wbar):
    """`y_zb = Qhat + clip(y_z - Qhat, -3 wbar, 3 wbar)` (variance-based target clipping)."""
    return q_hat + jnp.clip(y_z - q_hat, -3.0 * wbar, 3.0 * wbar)


def update_wbar(wbar, batch_sigma_mean, tau):
    """EMA `wbar <- (1 - tau) wbar + tau mean(sigma)`; a negative `wbar` (unset) takes the
    first batch mean."""
    return jnp.where(wbar < 0, batch_sigma_mean, (1.0 - tau) * wbar + tau * batch_sigma_mean)


@struct.dataclass(kw_only=True)
class FastDSACState(SACState):
    wbar: jax.Array
    """float32 `[num_q]`: EMA of each head's mean predicted std (-1 until the first step)."""


@dataclasses.dataclass(frozen=True)
class FastDSAC(SoftActorCritic):
    """FastDSAC-A (off-policy): the SAC-family core with the Gaussian return critic and
    constrained target actions documented above."""

    config: FastDSACConfig
    state_cls: ClassVar[type] = FastDSACState
    critic_kind: ClassVar[str] = "gaussian"

    def validate(self) -> None:
        c = self.config
        check_choice("target_constraint", c.target_constraint, ("tanh", "truncnorm"))
        check_choice("std_bound_mode", c.std_bound_mode, ("sigma", "as_released"))
        if not (c.policy_noise > 0 and c.dsac_b >= 0 and 0 < c.dsac_tau <= 1):
            raise ValueError(f"fastdsac needs policy_noise > 0, dsac_b >= 0, 0 < dsac_tau <= 1; "
                             f"got {c.policy_noise}, {c.dsac_b}, {c.dsac_tau}.")
        if c.q_clip is not None and not c.q_clip > 0:
            raise ValueError(f"q_clip must be positive or None, got {c.q_clip}.")
        super().validate()

    def extra_state(self) -> dict:
        return {"wbar": -jnp.ones((self.config.num_q,), jnp.float32)}

    @property
    def log_std_bounds(self) -> tuple[float, float]:
        """log sigma in [log 1e-3, log 0.4] (`sigma`), or in [0.001, 0.4] (`as_released`)."""
        if self.config.std_bound_mode == "sigma":
            return math.log(1e-3), math.log(0.4)
        return 1e-3, 0.4

    def make_dist(self, head_out):
        mu, log_std = head_out
        return dist.Gaussian(loc=jnp.clip(mu, -1.0, 1.0), scale=jnp.exp(log_std))

    def target_action(self, policy, key):
        c = self.config.policy_noise
        mu, std = policy.loc, policy.scale
        if self.config.target_constraint == "tanh":
            return dist.centred_tanh_sample(key, mu, std, c)
        a = dist.truncated_sample(key, mu, std, mu - c, mu + c)
        return a, dist.truncated_log_prob(a, mu, std, mu - c, mu + c)

    def q_values(self, out):
        q = out[..., 0]
        clip = self.config.q_clip
        return q if clip is None else jnp.clip(q, -clip, clip)

    def critic_loss(self, critic_params, state, batch, key):
        """DSAC-T loss of every head with the expected-value and clipped sample targets."""
        c = self.config
        k_next, k_eps = jax.random.split(key)
        next_a, alpha_logp = self.next_action(state, batch, k_next)
        out, tgt, variables = self.critic_outputs(critic_params, state, batch, next_a)
        q, sigma = self.q_values(out), out[..., 1]  # [E, B]
        q_bar, sigma_bar = self.q_values(tgt), tgt[..., 1]
        j = jnp.argmin(q_bar, axis=0)
        pick = lambda x: jnp.take_along_axis(x, j[None], axis=0)[0]  # noqa: E731
        eps = jnp.clip(jax.random.normal(k_eps, j.shape), -3.0, 3.0)
        z_bar = pick(q_bar) + eps * pick(sigma_bar)
        reward = self.scaled_reward(state, batch.reward)
        y_q = reward + batch.discount * (pick(q_bar) - alpha_logp)
        y_z = reward + batch.discount * (z_bar - alpha_logp)
        wbar = update_wbar(state.wbar, jax.lax.stop_gradient(sigma).mean(axis=1),
                           c.dsac_tau)
        y_zb = clip_sample_target(jax.lax.stop_gradient(q), y_z[None], wbar[:, None])
        if c.truncation == "brax":  # drop truncated transitions from the loss
            keep = 1.0 - batch.truncated
            q, sigma = q * keep, sigma * keep
        loss = jnp.sum(jax.vmap(dsac_t_loss, in_axes=(0, 0, 0, 0, None, 0, 0, None))(
            q, sigma, q, sigma, y_q, y_zb, wbar, c.dsac_b))
        metrics = {"train/critic_loss": loss, "train/q_mean": q.mean(),
                   "train/sigma_mean": sigma.mean(), "train/wbar": wbar.mean()}
        return loss, (metrics, variables, {"wbar": wbar})
