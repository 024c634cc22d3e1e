"""Replay sampling: uniform and Sample Weight Decay row draws, n-step batches, goal relabeling.

Sampling picks an env column uniformly and a row either uniformly over the written rows or by
Sample Weight Decay (WarpSAC, Wu et al., arXiv 2608.24479; `wzhhasadream/warprl`
`nnxrl/buffers/jax_buffer.py`): weight `max(w_min, 1 - age / D)` by row age in vectorized
steps. Weighted rows are drawn by inverse CDF over integer (fixed-point) weights, so the
cumulative sum is exact for any capacity (a float32 cumsum over 1e6 rows rounds each row's mass
by up to ~10%), and a draw never lands on an unwritten row.

n-step returns are formed at sample time from the stored 1-step rows. The window starts at the
sampled row, stops at the first terminated or truncated step (inclusive) and never reads past
the newest written row, which avoids the cross-episode windows and wrong discounts of FastTD3
(`younggyoseo/FastTD3` issue #6, PR #7, issue #10).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.learning.contrastive import future_offsets
from jaxrl.learning.replay.storage import ReplayState, is_float

_INT32_MAX = 2**31 - 1
_MIN_SCALE = 64  # fixed-point steps per unit weight; bounds the capacity of weighted sampling


@struct.dataclass
class Batch:
    """A sampled batch of n-step transitions, B = batch size.

    Attributes:
        obs: observation at the window start, float32 leaves `[B, ...]` (pytree like the env's).
        action: action at the window start, `[B, A]`.
        reward: float32 `[B]`, `sum_{k < n} gamma^k r_k` over the window.
        discount: float32 `[B]`, `gamma^n * (1 - terminated)`: multiply the bootstrap value by it.
        next_obs: observation to bootstrap from: `next_obs` of the window's last step (the true
            final observation when that step is truncated), float32 leaves `[B, ...]`.
        terminated: float32 `[B]`, flag of the window's last step.
        truncated: float32 `[B]`, flag of the window's last step.
        n: int32 `[B]`, effective window length in `[1, n_step]`.
    """

    obs: Any
    action: jax.Array
    reward: jax.Array
    discount: jax.Array
    next_obs: Any
    terminated: jax.Array
    truncated: jax.Array
    n: jax.Array


def swd_weights(age: jax.Array, decay_steps: float, min_weight: float = 0.1) -> jax.Array:
    """Sample Weight Decay row weights (WarpSAC `_linear_weights`), float32 like `age`.

    `D = decay_steps > 0`: `max(min_weight, 1 - age / D)` (recent data first).
    `D < 0`: `min(1, min_weight + age / |D|)` (old data first, as WarpSAC's negative D).
    `D == 0`: all ones (uniform).

    Args:
        age: row ages in vectorized steps (0 = newest), any shape.
        decay_steps: D, a static Python float.
        min_weight: floor of the weights, in [0, 1].
    """
    age = jnp.asarray(age, jnp.float32)
    if decay_steps == 0:
        return jnp.ones_like(age)
    if decay_steps > 0:
        return jnp.maximum(min_weight, 1.0 - age / decay_steps)
    return jnp.minimum(1.0, min_weight + age / -decay_steps)


def uniform_below(key: jax.Array, shape, n: jax.Array) -> jax.Array:
    """Integers in `[0, n)`, `0 < n < 2^31`: `floor(bits * n / 2^32)` from 32 random bits.

    Multiply-shift (Lemire, "Fast Random Integer Generation in an Interval", 2019) spreads the
    rounding error evenly (every value gets `floor` or `ceil` of `2^32 / n` bit patterns);
    `jax.random.randint` puts it on one end (about -2% in the top 5% of `[0, 4.3e8)`). The
    64-bit product is formed from 16-bit limbs since jax runs without 64-bit types by default.
    """
    x = jax.random.bits(key, shape, jnp.uint32)
    t = jnp.asarray(n).astype(jnp.uint32)
    xh, xl, th, tl = x >> 16, x & 0xFFFF, t >> 16, t & 0xFFFF
    mid1, mid2 = xh * tl, xl * th
    carry = ((xl * tl) >> 16) + (mid1 & 0xFFFF) + (mid2 & 0xFFFF)
    high = xh * th + (mid1 >> 16) + (mid2 >> 16) + (carry >> 16)
    return high.astype(jnp.int32)


def _weighted_rows(state, key, batch_size, decay_steps, min_weight) -> jax.Array:
    """Rows drawn with probability proportional to their SWD weight (inverse CDF, exact ints)."""
    c = state.write_time.shape[0]
    scale = min(2**24, _INT32_MAX // c)
    if scale < _MIN_SCALE:
        raise ValueError(f"weighted sampling supports up to {_INT32_MAX // _MIN_SCALE} rows")
    valid = jnp.arange(c) < state.size
    age = state.clock - 1 - state.write_time
    w = jnp.where(valid, swd_weights(age, decay_steps, min_weight), 0.0)
    w = jnp.where(w.sum() > 0, w, valid.astype(jnp.float32))  # min_weight 0 corner: uniform
    q = jnp.round(w * scale).astype(jnp.int32)
    q = jnp.where(valid & (w > 0), jnp.maximum(q, 1), q)  # keep tiny positive weights drawable
    cdf = jnp.cumsum(q)  # exact: sum(q) <= C * scale <= 2^31 - 1
    u = uniform_below(key, (batch_size,), cdf[-1])
    return jnp.searchsorted(cdf, u, side="right").astype(jnp.int32)


def _gather(tree, rows, envs):
    """Leaves `[C, N, ...]` -> `[B, ...]`, floating leaves cast to float32."""

    def take(x):
        y = x[rows, envs]
        return y.astype(jnp.float32) if is_float(y.dtype) else y

    return jax.tree.map(take, tree)


def sample(
    state: ReplayState,
    key: jax.Array,
    batch_size: int,
    *,
    n_step: int = 1,
    gamma=0.99,
    decay_steps: float = 0.0,
    min_weight: float = 0.1,
) -> Batch:
    """Samples `batch_size` n-step transitions (needs `size >= 1`; no check under jit).

    The env column is uniform over N. The start row is uniform over the written rows, or, when
    `decay_steps != 0`, drawn with probability proportional to
    `swd_weights(clock - 1 - write_time[row], decay_steps, min_weight)` (weights are quantized
    to `1 / floor(min(2^24, (2^31 - 1) / C))`, e.g. 1/2147 at C = 1e6).

    The window covers rows `row, row + 1, ...` (mod C), at most `n_step` of them; it stops at the
    first step with `terminated` or `truncated` set (that step included) and at the newest
    written row. With n the window length: `reward = sum_k gamma^k r_k`,
    `discount = gamma^n (1 - terminated_last)`, `next_obs = next_obs_last` (the true final
    observation when the last step is truncated).

    Args:
        state: the buffer.
        key: PRNG key.
        batch_size: B (static).
        n_step: maximum window length (static, >= 1).
        gamma: discount, Python float or traced float32 scalar.
        decay_steps: SWD D in vectorized steps (static Python float; 0 = uniform).
        min_weight: SWD floor in [0, 1] (static).

    Returns:
        Batch with leaves `[B, ...]` (see `Batch`).

    Raises:
        ValueError: if `n_step < 1` or `min_weight` is outside [0, 1].
    """
    if n_step < 1:
        raise ValueError(f"n_step must be >= 1, got {n_step}")
    if not 0.0 <= min_weight <= 1.0:
        raise ValueError(f"min_weight must be in [0, 1], got {min_weight}")
    c, num_envs = state.data["reward"].shape
    key_env, key_row = jax.random.split(key)
    envs = jax.random.randint(key_env, (batch_size,), 0, num_envs)
    if decay_steps == 0:
        rows = uniform_below(key_row, (batch_size,), state.size)
    else:
        rows = _weighted_rows(state, key_row, batch_size, decay_steps, min_weight)

    k = jnp.arange(n_step, dtype=jnp.int32)
    idx = (rows[:, None] + k) % c  # [B, n]
    cols = envs[:, None]
    flags = jnp.maximum(state.data["terminated"][idx, cols], state.data["truncated"][idx, cols])
    done = (flags > 0).astype(jnp.int32)
    rewards = state.data["reward"][idx, cols]
    avail = (state.pos - rows - 1) % c + 1  # rows from `row` to the newest written row
    done_before = jnp.cumsum(done, axis=1) - done
    inside = (k[None] < avail[:, None]) & (done_before == 0)
    n = inside.sum(axis=1).astype(jnp.int32)
    gamma = jnp.asarray(gamma, jnp.float32)
    powers = jnp.power(gamma, k.astype(jnp.float32))
    reward = jnp.where(inside, rewards * powers, 0.0).sum(axis=1)
    last = (rows + n - 1) % c
    terminated = state.data["terminated"][last, envs]
    return Batch(
        obs=_gather(state.data["obs"], rows, envs),
        action=state.data["action"][rows, envs],
        reward=reward,
        discount=jnp.power(gamma, n.astype(jnp.float32)) * (1.0 - terminated),
        next_obs=_gather(state.data["next_obs"], last, envs),
        terminated=terminated,
        truncated=state.data["truncated"][last, envs],
        n=n,
    )


@struct.dataclass
class FutureBatch:
    """Transitions with a future state of the same episode (goal relabeling), B = batch size.

    Attributes:
        obs, action, next_obs: the sampled transition at row t (float32 leaves `[B, ...]`).
        future_obs: `next_obs` of row `t + offset - 1`: the state reached `offset` steps after
            `obs`, in the same episode (float32 `[B, ...]`).
        offset: int32 `[B]`, steps from `obs` to `future_obs`, `>= 1`.
        traj_id: int32 `[B]`, episode id of row t; `future_traj_id`: of the future row (equal).
    """

    obs: Any
    action: jax.Array
    next_obs: Any
    future_obs: Any
    offset: jax.Array
    traj_id: jax.Array
    future_traj_id: jax.Array


def sample_future(state: ReplayState, key: jax.Array, batch_size: int, *, gamma,
                  horizon: int) -> FutureBatch:
    """Samples transitions and a geometric future state of the same episode (CRL relabeling).

    The env column and the row t are uniform over the written rows. The goal row is `t + k`
    with `P(k) ∝ gamma^k` over `k < horizon` such that row `t + k` (mod C) is written, not newer
    than the write head, and has the same `traj_id` as row t; the future state is that row's
    `next_obs`, so the offset from `obs_t` is `k + 1 >= 1` steps and the episode's final
    observation can be a goal. JaxGCRL (`crl.py::flatten_batch`, PR #24) draws from a window of
    `episode_length` rows in the same way but takes `obs_{t+k}` with `k >= 1` and falls back to
    `obs_t` itself at an episode's last step; using `next_obs` has no such fallback.

    Args:
        state: a buffer created with `extras=("traj_id",)` (int32 episode ids per row).
        key: PRNG key.
        batch_size: B (static).
        gamma: relabeling discount in (0, 1] (float or float32 scalar).
        horizon: H, the longest offset considered (static; the episode length is natural).

    Returns:
        FutureBatch with leaves `[B, ...]`.

    Raises:
        ValueError: the buffer stores no `traj_id`, or `horizon < 1`.
    """
    if "traj_id" not in state.data:
        raise ValueError("sample_future needs a buffer created with extras=('traj_id',)")
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    c, num_envs = state.data["reward"].shape
    key_env, key_row, key_k = jax.random.split(key, 3)
    envs = jax.random.randint(key_env, (batch_size,), 0, num_envs)
    rows = (state.pos - state.size + uniform_below(key_row, (batch_size,), state.size)) % c
    k = jnp.arange(horizon, dtype=jnp.int32)
    idx = (rows[:, None] + k) % c  # [B, H]
    ids = state.data["traj_id"]
    avail = (state.pos - rows - 1) % c + 1  # rows from `row` to the newest written row
    valid = (k[None] < avail[:, None]) & (ids[idx, envs[:, None]] == ids[rows, envs][:, None])
    future = (rows + future_offsets(key_k, valid, gamma)) % c
    return _future_batch(state, rows, envs, future)


def _future_batch(state: ReplayState, rows, envs, future) -> FutureBatch:
    """The `FutureBatch` of rows `rows` of columns `envs` with goal rows `future`."""
    ids, c = state.data["traj_id"], state.data["reward"].shape[0]
    return FutureBatch(
        obs=_gather(state.data["obs"], rows, envs),
        action=state.data["action"][rows, envs],
        next_obs=_gather(state.data["next_obs"], rows, envs),
        future_obs=_gather(state.data["next_obs"], future, envs),
        offset=(future - rows) % c + 1,
        traj_id=ids[rows, envs],
        future_traj_id=ids[future, envs],
    )


def sample_windows(state: ReplayState, key: jax.Array, num_batches: int, batch_size: int, *,
                   window: int, gamma) -> FutureBatch:
    """Relabeled batches cut from whole windows of consecutive rows (JaxGCRL's sampling).

    JaxGCRL (`jaxgcrl/agents/crl/crl.py`, `flatten_batch` and the training step) samples one
    window of `episode_length` rows per env, relabels every row of it with a future state of
    the same episode inside the window, shuffles the `N (L - 1)` transitions and scans over all
    of their `N (L - 1) / B` batches. Here `W = ceil(G B / (L - 1))` windows of `L = window`
    rows are drawn (window `w` from env column `w mod N`, so each env once when `W = N`), each
    window's start uniform over the starts whose whole window is written; every one of its
    first `L - 1` rows `t` gets a goal row `t + k`, `P(k) ∝ gamma^k` over the `k` that stay
    inside the window and episode (`future_obs` is that row's `next_obs`, as `sample_future`);
    the `W (L - 1)` transitions are shuffled and the first `G B` split into G batches.

    Args:
        state: a buffer created with `extras=("traj_id",)` holding at least `window` rows.
        key: PRNG key.
        num_batches: G (static); batch_size: B (static).
        window: L >= 2 rows per window (static; the episode length is natural).
        gamma: relabeling discount in (0, 1].

    Returns:
        FutureBatch with leaves `[G, B, ...]`.
    """
    if "traj_id" not in state.data:
        raise ValueError("sample_windows needs a buffer created with extras=('traj_id',)")
    if window < 2:
        raise ValueError(f"window must be >= 2, got {window}")
    c, num_envs = state.data["reward"].shape
    per_window = window - 1
    num_windows = -(-num_batches * batch_size // per_window)
    key_start, key_k, key_perm = jax.random.split(key, 3)
    starts = uniform_below(key_start, (num_windows,), jnp.maximum(state.size - window + 1, 1))
    starts = state.pos - state.size + starts
    j = jnp.arange(per_window, dtype=jnp.int32)
    rows = ((starts[:, None] + j) % c).reshape(-1)  # [W (L - 1)]
    envs = jnp.repeat(jnp.arange(num_windows, dtype=jnp.int32) % num_envs, per_window)
    k = jnp.arange(window, dtype=jnp.int32)
    ids = state.data["traj_id"]
    inside = (jnp.tile(j, num_windows)[:, None] + k[None]) < per_window + 1
    same = ids[(rows[:, None] + k) % c, envs[:, None]] == ids[rows, envs][:, None]
    future = (rows + future_offsets(key_k, inside & same, gamma)) % c
    pick = jax.random.permutation(key_perm, rows.shape[0])[:num_batches * batch_size]
    rows, envs, future = rows[pick], envs[pick], future[pick]

    def split(x):
        return x.reshape((num_batches, batch_size) + x.shape[1:])

    return jax.tree.map(split, _future_batch(state, rows, envs, future))
