"""Returns with `terminated` and `truncated` handled apart. Inputs time-major `[T, N]` float32.

Sources: Schulman et al. 2015, "High-Dimensional Continuous Control Using Generalized Advantage
Estimation" (arXiv 1506.02438), Eq. 16; Brax `training/agents/ppo/losses.py::compute_gae` for the
`brax` parity mode (truncated steps masked). Also the C51 categorical projection used by the
distributional critics (Bellemare et al. 2017, arXiv 1707.06887, Algorithm 1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gae(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
    """GAE that bootstraps from V(final obs) on truncation and not on termination.

    delta_t = r_t + gamma (1 - terminated_t) V(next_obs_t) - V(obs_t)
    A_t     = delta_t + gamma lambda (1 - done_t) A_{t+1},  A_T = 0,  done = term OR trunc

    Args:
        rewards, values, terminated, truncated: `[T, ...]` float32 (flags are 0/1).
        next_values: V of the true successor `next_obs_t` (pre-reset at episode ends), `[T, ...]`.
        gamma, gae_lambda: scalars (may be traced).

    Returns:
        (advantages, value_targets), each `[T, ...]`; targets are `A + V`.
    """
    done = jnp.maximum(terminated, truncated)
    deltas = rewards + gamma * (1.0 - terminated) * next_values - values

    def back(acc, xs):
        delta, d = xs
        acc = delta + gamma * gae_lambda * (1.0 - d) * acc
        return acc, acc

    _, adv = jax.lax.scan(back, jnp.zeros_like(deltas[0]), (deltas, done), reverse=True)
    return adv, adv + values


def gae_brax(rewards, values, bootstrap_value, terminated, truncated, gamma, gae_lambda):
    """Brax parity mode: truncated steps are masked (advantage 0, target = current value).

    Follows brax `ppo/losses.py::compute_gae`: `vs` are lambda-returns, and the advantage is
    `(r_t + gamma (1 - term_t) vs_{t+1} - V_t) (1 - trunc_t)` (no lambda on the first link).

    Args:
        rewards, values, terminated, truncated: `[T, ...]`.
        bootstrap_value: V(next_obs_{T-1}), `[...]`.

    Returns:
        (advantages, vs), each `[T, ...]`.
    """
    values_tp1 = jnp.concatenate([values[1:], bootstrap_value[None]], axis=0)
    keep = 1.0 - truncated
    deltas = (rewards + gamma * (1.0 - terminated) * values_tp1 - values) * keep

    def back(acc, xs):
        delta, term, k = xs
        acc = delta + gamma * (1.0 - term) * k * gae_lambda * acc
        return acc, acc

    _, acc = jax.lax.scan(
        back, jnp.zeros_like(bootstrap_value), (deltas, terminated, keep), reverse=True
    )
    vs = acc + values
    vs_tp1 = jnp.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    adv = (rewards + gamma * (1.0 - terminated) * vs_tp1 - values) * keep
    return adv, vs


def categorical_support(v_min: float, v_max: float, num_atoms: int) -> jax.Array:
    """Fixed C51 support `z_j = v_min + j (v_max - v_min) / (K - 1)`, float32 `[K]`."""
    return jnp.linspace(v_min, v_max, num_atoms, dtype=jnp.float32)


def _project_one(p, lower, upper, frac):
    """Scatter-adds `p (1 - frac)` onto `lower` and `p frac` onto `upper`; all `[K]`."""
    out = jnp.zeros_like(p).at[lower].add(p * (1.0 - frac))
    return out.at[upper].add(p * frac)


def categorical_projection(
    probs: jax.Array, target_atoms: jax.Array, v_min: float, v_max: float
) -> jax.Array:
    """C51 projection of a shifted distribution onto the fixed support (C51).

    Atom `j` of the next distribution carries probability `probs[..., j]` and sits at
    `target_atoms[..., j]` (`r + discount * (z_j - alpha log pi)`, formed by the caller). Each
    target is clipped to `[v_min, v_max]`, placed at `b = (Tz - v_min) / dz`, and its mass split
    between `lower = floor(b)` and `upper = min(lower + 1, K - 1)` with weights `1 - frac` and
    `frac`, `frac = b - lower`. A target on an atom keeps all its mass there, so the result sums
    to `sum(probs)`. (The `floor`/`ceil` form with a `lower == upper` fix-up put mass 1 on both
    neighbours: FastTD3 issue #29, fixed in PR #30; Bellemare et al. 2017, arXiv 1707.06887,
    Algorithm 1.)

    Args:
        probs: `[..., K]` probabilities of the next distribution.
        target_atoms: `[..., K]` shifted atom locations, broadcastable to `probs`.
        v_min, v_max: support bounds (K is read from `probs`; K >= 2).

    Returns:
        float32 `[..., K]` projected probabilities on `categorical_support(v_min, v_max, K)`.
    """
    probs = jnp.asarray(probs, jnp.float32)
    k = probs.shape[-1]
    target = jnp.broadcast_to(jnp.asarray(target_atoms, jnp.float32), probs.shape)
    dz = (v_max - v_min) / (k - 1)
    b = (jnp.clip(target, v_min, v_max) - v_min) / dz
    lower = jnp.clip(jnp.floor(b), 0, k - 1)
    frac = jnp.clip(b - lower, 0.0, 1.0)
    lower = lower.astype(jnp.int32)
    upper = jnp.minimum(lower + 1, k - 1)
    flat = [x.reshape(-1, k) for x in (probs, lower, upper, frac)]
    return jax.vmap(_project_one)(*flat).reshape(probs.shape)
