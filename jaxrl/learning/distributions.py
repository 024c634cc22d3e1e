"""Tanh-squashed Gaussian policy distribution, computed from the pre-tanh sample `u`.

Follows brax `training/distribution.py` (`NormalTanhDistribution`, `NormalDistribution`):
`scale = softplus(raw) + min_std`, action `a = tanh(u)`, and the overflow-safe log-det
`log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`, finite for any float32 `u`.
Shapes: `loc`, `scale`, `u` are `[..., action_size]`; log-probs and entropies sum the last axis.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

# A NumPy float32 (the value of `jnp.log(2 * jnp.pi)`): a jnp constant here would start the JAX
# backend at import time, before the CLI can choose the CPU device count or join other processes.
_LOG_2PI = np.float32(math.log(2.0 * math.pi))


def tanh_log_det(u: jax.Array) -> jax.Array:
    """`log(1 - tanh(u)^2)` elementwise, safe where `tanh(u)` rounds to +-1."""
    return 2.0 * (jnp.log(2.0) - u - jax.nn.softplus(-2.0 * u))


def params(raw: jax.Array, min_std: float = 1e-3) -> tuple[jax.Array, jax.Array]:
    """Splits a `[..., 2A]` network output into `(loc, scale)`, `scale = softplus + min_std`."""
    loc, raw_scale = jnp.split(raw, 2, axis=-1)
    return loc, jax.nn.softplus(raw_scale) + min_std


def sample(key: jax.Array, loc: jax.Array, scale: jax.Array) -> jax.Array:
    """Pre-tanh sample `u ~ N(loc, scale^2)`; the env action is `tanh(u)`."""
    return loc + scale * jax.random.normal(key, loc.shape, loc.dtype)


def gaussian_log_prob(u, loc, scale) -> jax.Array:
    z = (u - loc) / scale
    return jnp.sum(-0.5 * z * z - jnp.log(scale) - 0.5 * _LOG_2PI, axis=-1)


def tanh_log_det_eps(u: jax.Array, eps: float) -> jax.Array:
    """`log(1 - tanh(u)^2 + eps)` elementwise: the log-det as JaxGCRL's actor loss writes it
    (`jaxgcrl/agents/crl/losses.py`, eps 1e-6; SpinUp's form). Unlike `tanh_log_det` it stays
    above `log(eps)` where `|u|` is large, and its gradient in `u` vanishes there."""
    return jnp.log(1.0 - jnp.square(jnp.tanh(u)) + eps)


def log_prob(u: jax.Array, loc: jax.Array, scale: jax.Array,
             log_det_eps: float = 0.0) -> jax.Array:
    """Log-density of `a = tanh(u)` evaluated from `u`, summed over action dims; with
    `log_det_eps > 0` the log-det is `tanh_log_det_eps` instead of the exact one."""
    log_det = tanh_log_det_eps(u, log_det_eps) if log_det_eps else tanh_log_det(u)
    return gaussian_log_prob(u, loc, scale) - jnp.sum(log_det, axis=-1)


def log_prob_from_action(a: jax.Array, loc: jax.Array, scale: jax.Array) -> jax.Array:
    """Log-density from a post-tanh action: clips to `1 - eps_f32`, then `arctanh`."""
    eps = jnp.finfo(jnp.float32).eps
    u = jnp.arctanh(jnp.clip(a, -1.0 + eps, 1.0 - eps))
    return log_prob(u, loc, scale)


def entropy(key: jax.Array, loc: jax.Array, scale: jax.Array) -> jax.Array:
    """Gaussian entropy plus the log-det at one fresh sample (one-sample estimate, as Brax)."""
    u = sample(key, loc, scale)
    gauss = jnp.sum(0.5 + 0.5 * _LOG_2PI + jnp.log(scale), axis=-1)
    return gauss + jnp.sum(tanh_log_det(u), axis=-1)


def mode(loc: jax.Array) -> jax.Array:
    """Deterministic action `tanh(loc)`."""
    return jnp.tanh(loc)


# --- Truncated Gaussian on [low, high] (per dimension) ---------------------------------------
# Standard results for the doubly truncated normal (e.g. Johnson, Kotz & Balakrishnan,
# "Continuous Univariate Distributions", Vol. 1, Sec. 10.1): with alpha = (low - loc) / scale,
# beta = (high - loc) / scale and Z = Phi(beta) - Phi(alpha),
# pdf(x) = phi((x - loc) / scale) / (scale Z) on [low, high];
# entropy = log(sqrt(2 pi e) scale Z) + (alpha phi(alpha) - beta phi(beta)) / (2 Z).
# Shapes: all arguments broadcast to `[..., A]`; log-probs and entropies sum the last axis.


def _trunc_bounds(loc, scale, low, high):
    alpha, beta = (low - loc) / scale, (high - loc) / scale
    cdf_a, cdf_b = jax.scipy.special.ndtr(alpha), jax.scipy.special.ndtr(beta)
    return alpha, beta, cdf_a, cdf_b, jnp.maximum(cdf_b - cdf_a, 1e-12)


def truncated_sample(key, loc, scale, low, high) -> jax.Array:
    """Inverse-CDF sample of `N(loc, scale^2)` truncated to `[low, high]` (inside the bounds)."""
    _, _, cdf_a, cdf_b, _ = _trunc_bounds(loc, scale, low, high)
    tiny = jnp.finfo(jnp.float32).tiny
    u = jax.random.uniform(key, jnp.shape(loc), minval=0.0, maxval=1.0)
    p = jnp.clip(cdf_a + u * (cdf_b - cdf_a), tiny, 1.0 - 1e-7)
    return jnp.clip(loc + scale * jax.scipy.special.ndtri(p), low, high)


def truncated_log_prob(x, loc, scale, low, high) -> jax.Array:
    """Log-density summed over the last axis; `-inf` outside `[low, high]`."""
    _, _, _, _, z = _trunc_bounds(loc, scale, low, high)
    y = (x - loc) / scale
    lp = -0.5 * y * y - 0.5 * _LOG_2PI - jnp.log(scale) - jnp.log(z)
    return jnp.sum(jnp.where((x >= low) & (x <= high), lp, -jnp.inf), axis=-1)


def truncated_entropy(loc, scale, low, high) -> jax.Array:
    """Closed-form differential entropy, summed over the last axis."""
    alpha, beta, _, _, z = _trunc_bounds(loc, scale, low, high)
    pdf = lambda t: jnp.exp(-0.5 * t * t - 0.5 * _LOG_2PI)  # noqa: E731
    h = 0.5 * (_LOG_2PI + 1.0) + jnp.log(scale * z) + (alpha * pdf(alpha) - beta * pdf(beta)) / (
        2.0 * z)
    return jnp.sum(h, axis=-1)


def truncated_mode(loc, low, high) -> jax.Array:
    """The mode: `loc` clipped into `[low, high]`."""
    return jnp.clip(loc, low, high)


# --- FastDSAC-A target actions: mean-centred tanh truncation ---
# Source: `luge66/FastDSAC` `fast_dsac/fastdsac_net.py`. `u ~ N(mu, sigma^2)`, `x = u - mu`,
# `a' = mu + c tanh(x)` lies in `(mu - c, mu + c)`;
# `log pi_c(a') = log N(u; mu, sigma) - sum_d log(c (1 - tanh(x_d)^2))`.


def centred_tanh_sample(key, loc, scale, radius) -> tuple[jax.Array, jax.Array]:
    """`(a', log_prob)` with `a' = loc + radius * tanh(u - loc)`, `u ~ N(loc, scale^2)`."""
    u = sample(key, loc, scale)
    return centred_tanh_action(u, loc, radius), centred_tanh_log_prob(u, loc, scale, radius)


def centred_tanh_action(u, loc, radius) -> jax.Array:
    return loc + radius * jnp.tanh(u - loc)


def centred_tanh_log_prob(u, loc, scale, radius) -> jax.Array:
    """`log N(u) - log |da'/du|` summed over the last axis (overflow-safe log-det)."""
    log_det = tanh_log_det(u - loc) + jnp.log(radius)
    return gaussian_log_prob(u, loc, scale) - jnp.sum(log_det, axis=-1)


# --- Distribution objects: what actor heads return --------------------------------------------
# An actor head returns one of these; agents only call `sample_and_log_prob`, `log_prob`,
# `from_noise`, `mode`, `entropy` and `metrics`, so any policy class (Gaussian or not, e.g. a
# flow policy) plugs into the same update. They are pytrees: `jax.tree.map` slices a batch.


@struct.dataclass
class TanhGaussian:
    """`a = tanh(u)`, `u ~ N(loc, scale^2)` per dimension (Brax `NormalTanhDistribution`;
    SAC, Haarnoja et al. 2018, arXiv 1812.05905, Appendix C). Shapes `[..., A]`, float32."""

    loc: jax.Array
    scale: jax.Array

    def sample_and_log_prob(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Reparameterized `(a [..., A] in (-1, 1), log pi(a) [...])`."""
        u = sample(key, self.loc, self.scale)
        return jnp.tanh(u), log_prob(u, self.loc, self.scale)

    def sample_raw(self, key: jax.Array) -> jax.Array:
        """Pre-tanh sample `u` (PPO stores it to recompute log-probs exactly)."""
        return sample(key, self.loc, self.scale)

    def log_prob_raw(self, u: jax.Array, log_det_eps: float = 0.0) -> jax.Array:
        """`log pi(tanh(u))` from the pre-tanh sample `u`, `[...]` (`log_prob`'s
        `log_det_eps`)."""
        return log_prob(u, self.loc, self.scale, log_det_eps)

    def log_prob(self, action: jax.Array) -> jax.Array:
        """`log pi(a)` from a post-tanh action (clipped just inside (-1, 1))."""
        return log_prob_from_action(action, self.loc, self.scale)

    def from_noise(self, eps: jax.Array, noise_scale: jax.Array | None = None) -> jax.Array:
        """Action from standard-normal noise: `tanh(loc + (scale * noise_scale) eps)`."""
        scale = self.scale if noise_scale is None else self.scale * noise_scale
        return jnp.tanh(self.loc + scale * eps)

    def mode(self) -> jax.Array:
        return jnp.tanh(self.loc)

    def entropy(self, key: jax.Array) -> jax.Array:
        """One-sample entropy estimate `[...]` (as Brax)."""
        return entropy(key, self.loc, self.scale)

    def metrics(self) -> dict[str, jax.Array]:
        return {"train/policy_std": self.scale.mean()}


@struct.dataclass
class Gaussian:
    """Unsquashed `a ~ N(loc, scale^2)` per dimension (FastDSAC's actor; the env clips to the
    action box). Shapes `[..., A]`, float32."""

    loc: jax.Array
    scale: jax.Array

    def sample_and_log_prob(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        a = sample(key, self.loc, self.scale)
        return a, gaussian_log_prob(a, self.loc, self.scale)

    def log_prob(self, action: jax.Array) -> jax.Array:
        return gaussian_log_prob(action, self.loc, self.scale)

    def from_noise(self, eps: jax.Array, noise_scale: jax.Array | None = None) -> jax.Array:
        scale = self.scale if noise_scale is None else self.scale * noise_scale
        return self.loc + scale * eps

    def mode(self) -> jax.Array:
        return self.loc

    def entropy(self, key: jax.Array | None = None) -> jax.Array:
        return jnp.sum(0.5 + 0.5 * _LOG_2PI + jnp.log(self.scale), axis=-1)

    def metrics(self) -> dict[str, jax.Array]:
        return {"train/policy_std": self.scale.mean()}


# --- diagonal Gaussians parameterized by log-std (PolicyFlow's residual noise) ------------------
_LOG_2PI_F = math.log(2.0 * math.pi)  # a Python float: the same rounding as before the move


def diag_gaussian_log_prob(x, mean, log_std):
    """`sum_i log N(x_i; mean_i, exp(log_std_i)^2)` over the last axis (log-std parameterized,
    as PolicyFlow's state-independent residual)."""
    z = (x - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * jnp.square(z) - log_std - 0.5 * _LOG_2PI_F, axis=-1)


def diag_gaussian_entropy(log_std):
    """`1/2 sum_i log(2 pi e sigma_i^2)` over the last axis."""
    return jnp.sum(log_std + 0.5 * (_LOG_2PI_F + 1.0), axis=-1)


def diag_gaussian_kl(mean_old, log_std_old, mean_new, log_std_new):
    """`KL(N(mean_old, sigma_old) || N(mean_new, sigma_new))` summed over the last axis (the
    direction RSL-RL's adaptive learning rate uses)."""
    var_ratio = jnp.exp(2.0 * (log_std_old - log_std_new))
    gap = jnp.square(mean_old - mean_new) * jnp.exp(-2.0 * log_std_new)
    return jnp.sum(log_std_new - log_std_old + 0.5 * (var_ratio + gap) - 0.5, axis=-1)
