"""Exploration noise for off-policy agents: per-env scales (FastTD3) and zeta repetition.

- Per-env noise scales (FastTD3, Seo et al., arXiv 2505.22642; `younggyoseo/FastTD3`
  `fast_td3/fast_td3.py`): env i explores with `sigma_i ~ U[low, high]`, redrawn when env i's
  episode ends.
- Mixed exploration (PQL, Li et al., arXiv 2307.12983; `Improbable-AI/pql`
  `pql/utils/noise.py`): env i explores with the fixed `sigma_i = linspace(low, high, N)[i]`.
- TD3 target smoothing (Fujimoto et al. 2018, arXiv 1802.09477, Eq. 14): clipped Gaussian noise
  on target actions.
- Zeta noise repetition (FlashSAC, arXiv 2604.04539; WarpSAC, arXiv 2608.24479): each env's
  standard Gaussian `eps` is held for `k` steps with `P(k) ~ k^-2` on `k = 1..max_repeat`. One
  global counter, so all envs refresh together. The policy turns `eps` into an action
  (e.g. `mu + sigma * eps`).

All functions are pure and jit/vmap friendly; the state is a pytree that checkpoints with the
agent state.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


def sample_noise_scales(
    key: jax.Array, num_envs: int, low: float = 0.001, high: float = 0.4
) -> jax.Array:
    """Per-env noise scales `sigma_i ~ U[low, high)`, float32 `[num_envs]`."""
    return jax.random.uniform(key, (num_envs,), jnp.float32, low, high)


def resample_on_done(
    key: jax.Array, scales: jax.Array, done: jax.Array, low: float = 0.001, high: float = 0.4
) -> jax.Array:
    """Redraws the scales of the envs whose episode ended (`done > 0`), keeps the others.

    Args:
        key: PRNG key.
        scales: float32 `[N]` current scales.
        done: `[N]` episode-end flags (terminated or truncated), bool or 0/1 float.
        low, high: range of the uniform draw.

    Returns:
        float32 `[N]` scales.
    """
    fresh = sample_noise_scales(key, scales.shape[0], low, high)
    return jnp.where(jnp.asarray(done) > 0, fresh, scales)


def zeta_probs(max_repeat: int = 16) -> jax.Array:
    """`P(k) = k^-2 / sum_{j <= max_repeat} j^-2` for `k = 1..max_repeat`, float32 `[max_repeat]`.

    For 16: P(1) = 0.631175, P(2) = 0.157794, P(16) = 0.002466, mean 2.1338.
    """
    k = jnp.arange(1, max_repeat + 1, dtype=jnp.float32)
    w = 1.0 / jnp.square(k)
    return w / w.sum()


def zeta_sample(key: jax.Array, shape=(), max_repeat: int = 16) -> jax.Array:
    """Repeat lengths `k ~ zeta_probs(max_repeat)`, int32 in `[1, max_repeat]`, by inverse CDF."""
    cdf = jnp.cumsum(zeta_probs(max_repeat))
    u = jax.random.uniform(key, shape, jnp.float32) * cdf[-1]
    k = jnp.searchsorted(cdf, u, side="right") + 1
    return jnp.minimum(k, max_repeat).astype(jnp.int32)


@struct.dataclass
class ZetaNoise:
    """Held exploration noise.

    Attributes:
        eps: float32 `[N, A]` standard Gaussian noise in use.
        steps_left: int32 `[]`, steps `eps` will still be used for; 0 means the next
            `zeta_step` draws a new `eps` and a new length (for all envs at once).
    """

    eps: jax.Array
    steps_left: jax.Array


def zeta_init(key: jax.Array, num_envs: int, action_size: int, max_repeat: int = 16) -> ZetaNoise:
    """First noise `eps ~ N(0, 1)` `[num_envs, action_size]`, held for `k ~ zeta` steps."""
    key_eps, key_k = jax.random.split(key)
    eps = jax.random.normal(key_eps, (num_envs, action_size), jnp.float32)
    return ZetaNoise(eps=eps, steps_left=zeta_sample(key_k, (), max_repeat))


def zeta_step(
    noise: ZetaNoise, key: jax.Array, max_repeat: int = 16
) -> tuple[ZetaNoise, jax.Array]:
    """Noise for one vectorized env step.

    When `steps_left` is 0, draws a fresh `eps ~ N(0, 1)` for every env and a fresh length
    `k ~ zeta`; then uses `eps` and counts one step down. Each `eps` is therefore used for exactly
    the `k` steps drawn with it.

    Args:
        noise: current state.
        key: PRNG key for this step (used only on a refresh; pass a fresh key every step).
        max_repeat: largest repeat length (static).

    Returns:
        (new state, eps float32 `[N, A]` to use this step).
    """
    key_eps, key_k = jax.random.split(key)
    refresh = noise.steps_left <= 0
    eps = jnp.where(refresh, jax.random.normal(key_eps, noise.eps.shape, jnp.float32), noise.eps)
    left = jnp.where(refresh, zeta_sample(key_k, (), max_repeat), noise.steps_left)
    return ZetaNoise(eps=eps, steps_left=left - 1), eps


def mixed_sigma(env_id: jax.Array, num_envs: int, low: float, high: float) -> jax.Array:
    """PQL's per-env std `linspace(low, high, num_envs)[env_id]`, float32 like `env_id`; the
    index is the env's global one, so sharding envs keeps each env's std."""
    frac = env_id.astype(jnp.float32) / max(num_envs - 1, 1)
    return low + (high - low) * frac


def per_env_normal_and_uniform(key: jax.Array, env_id: jax.Array, size: int
                               ) -> tuple[jax.Array, jax.Array]:
    """Standard normal and U[-1, 1] draws `[N, size]`, row i from `fold_in(key, env_id[i])`:
    the same numbers for an env whatever shard or batch position it has."""
    def draw(i):
        k_eps, k_unif = jax.random.split(jax.random.fold_in(key, i))
        return (jax.random.normal(k_eps, (size,)),
                jax.random.uniform(k_unif, (size,), minval=-1.0, maxval=1.0))

    return jax.vmap(draw)(env_id)


def smooth_target_action(action: jax.Array, key: jax.Array, std: float, clip: float
                         ) -> jax.Array:
    """TD3 smoothing `clip(a + clip(std * N(0, 1), -clip, clip), -1, 1)`, same shape as `a`."""
    noise = jnp.clip(std * jax.random.normal(key, action.shape), -clip, clip)
    return jnp.clip(action + noise, -1.0, 1.0)
