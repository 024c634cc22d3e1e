"""Running observation statistics (Welford / Chan), exact counts past 2^24, mergeable.

State is shaped by the observation only (`[obs_dim]` per leaf, never by `num_envs`), works on
observation pytrees (dict observations), and merges across shards or devices with Chan et al.'s
parallel formula ("Updating Formulae and a Pairwise Algorithm for Computing Sample Variances",
1979). The count is kept as two uint32 words (as brax `acme/running_statistics.py` does), because
float32 counts stop increasing at 2^24 samples and jax runs without 64-bit types by default.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

_TWO32 = 4294967296.0


@struct.dataclass(kw_only=True)
class RunningStats:
    """count_lo/count_hi: uint32 words of the sample count; mean, m2 (sum of squared
    deviations): float32 pytrees shaped like one observation."""

    count_lo: jax.Array
    count_hi: jax.Array
    mean: object
    m2: object


def init(obs_example) -> RunningStats:
    """Zero statistics for observations shaped like `obs_example` (one observation, no batch)."""
    zeros = jax.tree.map(lambda x: jnp.zeros(jnp.shape(x), jnp.float32), obs_example)
    z = jnp.zeros((), jnp.uint32)
    return RunningStats(count_lo=z, count_hi=z, mean=zeros, m2=zeros)


def count(state: RunningStats) -> jax.Array:
    """Sample count as float32 (approximate past 2^24; use `exact_count` for the exact value)."""
    return state.count_hi.astype(jnp.float32) * _TWO32 + state.count_lo.astype(jnp.float32)


def exact_count(state: RunningStats) -> int:
    """Exact sample count as a Python int (host side)."""
    return int(state.count_hi) * (1 << 32) + int(state.count_lo)


def _add_count(state: RunningStats, n_lo, n_hi) -> tuple[jax.Array, jax.Array]:
    lo = state.count_lo + n_lo
    carry = (lo < state.count_lo).astype(jnp.uint32)
    return lo, state.count_hi + n_hi + carry


def merge(a: RunningStats, b: RunningStats) -> RunningStats:
    """Statistics of the union of the samples behind `a` and `b` (Chan et al. 1979)."""
    na, nb = count(a), count(b)
    n = jnp.maximum(na + nb, 1.0)
    wb = nb / n

    def mean_fn(ma, mb):
        return ma + (mb - ma) * wb

    def m2_fn(ma, mb, sa, sb):
        return sa + sb + jnp.square(mb - ma) * na * wb

    mean = jax.tree.map(mean_fn, a.mean, b.mean)
    m2 = jax.tree.map(m2_fn, a.mean, b.mean, a.m2, b.m2)
    lo, hi = _add_count(a, b.count_lo, b.count_hi)
    return RunningStats(count_lo=lo, count_hi=hi, mean=mean, m2=m2)


def update(state: RunningStats, batch, axis_name: str | None = None) -> RunningStats:
    """Adds a batch of observations (leading axes are batch axes, e.g. `[T, N, obs_dim]`).

    With `axis_name`, counts and moments are summed over that mapped axis (devices or shards)
    first, so every shard ends with the statistics of the global batch.
    """
    leaves = jax.tree.leaves(batch)
    ref = jax.tree.leaves(state.mean)[0]
    n_local = leaves[0].size // max(ref.size, 1)

    def flat(x, m):
        return x.reshape((-1,) + m.shape).astype(jnp.float32)

    xs = jax.tree.map(flat, batch, state.mean)
    total = jax.tree.map(lambda x: x.sum(0), xs)
    n = jnp.asarray(n_local, jnp.float32)
    if axis_name is not None:
        total, n = jax.lax.psum((total, n), axis_name)
    bmean = jax.tree.map(lambda s: s / n, total)
    bm2 = jax.tree.map(lambda x, m: jnp.square(x - m).sum(0), xs, bmean)
    if axis_name is not None:
        bm2 = jax.lax.psum(bm2, axis_name)
    n_int = n.astype(jnp.uint32)
    other = RunningStats(count_lo=n_int, count_hi=jnp.zeros((), jnp.uint32), mean=bmean, m2=bm2)
    return merge(state, other)


def std(state: RunningStats, std_eps: float = 0.0, std_min: float = 1e-6, std_max: float = 1e6):
    """`clip(sqrt(var + std_eps), std_min, std_max)` per leaf, population variance."""
    n = jnp.maximum(count(state), 1.0)
    return jax.tree.map(lambda s: jnp.clip(jnp.sqrt(s / n + std_eps), std_min, std_max), state.m2)


def normalize(state: RunningStats, obs, std_eps: float = 0.0):
    """`(obs - mean) / std`; identity while the count is zero (first rollout is never divided
    by ~0)."""
    sd = std(state, std_eps)
    empty = (state.count_lo == 0) & (state.count_hi == 0)

    def norm(x, m, s):
        return jnp.where(empty, x, (x - m) / s)

    return jax.tree.map(norm, obs, state.mean, sd)
