"""Tanh-squashed Gaussian policy distribution, computed from the pre-tanh sample `u`.

Follows brax `training/distribution.py` (`NormalTanhDistribution`) and `specs/ppo.md` Sec. 2:
`scale = softplus(raw) + min_std`, action `a = tanh(u)`, and the overflow-safe log-det
`log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`, finite for any float32 `u`.
Shapes: `loc`, `scale`, `u` are `[..., action_size]`; log-probs and entropies sum the last axis.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_LOG_2PI = jnp.log(2.0 * jnp.pi)


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


def log_prob(u: jax.Array, loc: jax.Array, scale: jax.Array) -> jax.Array:
    """Log-density of `a = tanh(u)` evaluated from `u`, summed over action dims."""
    return gaussian_log_prob(u, loc, scale) - jnp.sum(tanh_log_det(u), axis=-1)


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
