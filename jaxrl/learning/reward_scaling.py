"""Return-based reward scaling (SimbaV2, FlashSAC, WarpSAC).

Per env a running discounted return `G <- gamma (1 - done_prev) G + r` is kept, with
`done = terminated or truncated` of the previous step (a new episode starts from 0). The
statistics of every `G_t` (Welford mean / variance with 64-bit-safe counts, as in
`jaxrl.learning.running_stats`, and `G_max = max |G_t|`) give the scale
`max(sqrt(var(G) + eps), G_max / v_max_ratio)`; agents divide rewards by it, so returns fit the
fixed categorical support (`[-5, 5]` with `v_max_ratio = 5`).

Statistics are updated from the stream in replay-write order, never from sampled batches
(sampling reorders and repeats rows: Motphys/UniLab PR #245). Sources: Lee et al., SimbaV2,
arXiv 2502.15280 (`dojeon-ai/SimbaV2` reward normalizer); `leeyngdo/FlashSAC`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.learning import running_stats


@struct.dataclass
class RewardScaleState:
    """Running return statistics. N = number of envs.

    Attributes:
        ret: float32 `[N]`, discounted return G of each env's current episode (already reset to 0
            after a done step).
        mean: float32 `[]`, mean of all G_t seen.
        m2: float32 `[]`, sum of squared deviations of all G_t seen (`var = m2 / count`).
        count_lo, count_hi: uint32 `[]` words of the number of G_t seen (exact past 2^24).
        g_max: float32 `[]`, `max |G_t|` seen.
    """

    ret: jax.Array
    mean: jax.Array
    m2: jax.Array
    count_lo: jax.Array
    count_hi: jax.Array
    g_max: jax.Array


def init(num_envs: int) -> RewardScaleState:
    """Empty statistics and zero returns for `num_envs` envs."""
    zero = jnp.zeros((), jnp.float32)
    z = jnp.zeros((), jnp.uint32)
    return RewardScaleState(
        ret=jnp.zeros((num_envs,), jnp.float32),
        mean=zero,
        m2=zero,
        count_lo=z,
        count_hi=z,
        g_max=zero,
    )


def count(state: RewardScaleState) -> jax.Array:
    """Number of returns seen, float32 (approximate past 2^24)."""
    return running_stats.count(_as_stats(state))


def _as_stats(state: RewardScaleState) -> running_stats.RunningStats:
    return running_stats.RunningStats(
        count_lo=state.count_lo, count_hi=state.count_hi, mean=state.mean, m2=state.m2
    )


def update(
    state: RewardScaleState,
    reward: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma,
    *,
    axis_name: str | None = None,
) -> RewardScaleState:
    """Advances every env's return through `T` written steps and adds the `T * N` returns.

    Args:
        state: current statistics.
        reward: float32 `[T, N]` raw rewards, in write (time) order.
        terminated, truncated: `[T, N]` 0/1 flags of the same steps; either ends the episode,
            so the next step's G starts from 0 (G is not reset at the done step itself).
        gamma: discount (Python float or traced scalar).
        axis_name: optional mapped axis (devices or env shards) to merge the statistics over;
            each shard keeps its own `ret`.

    Returns:
        Updated RewardScaleState.
    """
    gamma = jnp.asarray(gamma, jnp.float32)
    done = jnp.maximum(terminated, truncated).astype(jnp.float32)

    def step(g, xs):
        r, d = xs
        g = gamma * g + r.astype(jnp.float32)
        return g * (1.0 - d), g

    ret, returns = jax.lax.scan(step, state.ret, (reward, done))
    stats = running_stats.update(_as_stats(state), returns.reshape(-1), axis_name)
    g_max = jnp.max(jnp.abs(returns))
    if axis_name is not None:
        g_max = jax.lax.pmax(g_max, axis_name)
    return RewardScaleState(
        ret=ret,
        mean=stats.mean,
        m2=stats.m2,
        count_lo=stats.count_lo,
        count_hi=stats.count_hi,
        g_max=jnp.maximum(state.g_max, g_max),
    )


def scale(state: RewardScaleState, eps: float = 1e-8, v_max_ratio: float = 5.0) -> jax.Array:
    """Reward divisor `max(sqrt(var(G) + eps), G_max / v_max_ratio)`, float32 `[]`; 1 before data.

    `var(G)` is the population variance of all returns seen.
    """
    n = jnp.maximum(count(state), 1.0)
    s = jnp.maximum(jnp.sqrt(state.m2 / n + eps), state.g_max / v_max_ratio)
    empty = (state.count_lo == 0) & (state.count_hi == 0)
    return jnp.where(empty, 1.0, s)
