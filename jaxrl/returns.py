"""Returns with `terminated` and `truncated` handled apart. Inputs time-major `[T, N]` float32.

Sources: Schulman et al. 2015, "High-Dimensional Continuous Control Using Generalized Advantage
Estimation" (arXiv 1506.02438), Eq. 16; Brax `training/agents/ppo/losses.py::compute_gae` for the
`brax` parity mode (see `specs/ppo.md` Sec. 5).
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

    _, acc = jax.lax.scan(back, jnp.zeros_like(bootstrap_value), (deltas, terminated, keep),
                          reverse=True)
    vs = acc + values
    vs_tp1 = jnp.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    adv = (rewards + gamma * (1.0 - terminated) * vs_tp1 - values) * keep
    return adv, vs
